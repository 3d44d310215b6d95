package bench

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
)

// rawKeyRE matches a metric key left in a label: a slash between word
// characters (val/mean/avg@4) or a snake_case word (head_std).
var rawKeyRE = regexp.MustCompile(`\w/\w|[a-z]_[a-z]`)

// checkFigures is the figure check: what a report's figures must not be.
// It returns one line per problem: a panel with a single x value, a
// constant line, a label that is a raw metric key, two arms with one look
// (or one arm with two) within the report, a line figure whose note does
// not say what its lines are (seeds, N, smoothing), ticks that are not
// round, a mean line that ends before its longest seed's without the note
// saying so, and a forest row without a finite interval around its effect.
func checkFigures(figs []figSpec, forest *forestSpec) []string {
	var bad []string
	lookOf := map[string]look{}
	armOf := map[look]string{}
	for _, f := range figs {
		where := "figure " + f.Name
		if len(f.Panels) == 0 {
			bad = append(bad, where+": no panel")
		}
		for _, lbl := range []string{f.XLabel} {
			if lbl == "" || rawKeyRE.MatchString(lbl) {
				bad = append(bad, fmt.Sprintf("%s: x label %q is not words", where, lbl))
			}
		}
		xs := map[float64]bool{}
		for _, p := range f.Panels {
			if p.YLabel == "" || rawKeyRE.MatchString(p.YLabel) {
				bad = append(bad, fmt.Sprintf("%s: y label %q is not words", where, p.YLabel))
			}
			if rawKeyRE.MatchString(p.Title) {
				bad = append(bad, fmt.Sprintf("%s: title %q is not words", where, p.Title))
			}
			for _, l := range p.Lines {
				for _, pt := range l.Mean {
					xs[pt.X] = true
				}
				if len(l.Mean) < 2 {
					bad = append(bad, fmt.Sprintf("%s: %s is a single point", where, l.Arm))
				}
				if _, ok := constantLine(l); ok {
					bad = append(bad, fmt.Sprintf("%s: %s is a constant series", where, l.Arm))
				}
				if len(l.Seeds) == 0 {
					bad = append(bad, fmt.Sprintf("%s: %s has no per-seed lines", where, l.Arm))
				}
				if o, ok := lookOf[l.Arm]; ok && o != l.Look {
					bad = append(bad, fmt.Sprintf("%s: %s drawn as %v, elsewhere as %v", where, l.Arm, l.Look, o))
				}
				if a, ok := armOf[l.Look]; ok && a != l.Arm {
					bad = append(bad, fmt.Sprintf("%s: %s and %s share the look %v", where, l.Arm, a, l.Look))
				}
				lookOf[l.Arm], armOf[l.Look] = l.Look, l.Arm
			}
		}
		if len(xs) < 2 {
			bad = append(bad, fmt.Sprintf("%s: %d x value(s)", where, len(xs)))
		}
		if !bandNoteRE.MatchString(f.Note) || !strings.Contains(f.Note, "smooth") {
			bad = append(bad, fmt.Sprintf("%s: its note %q does not say what the lines are (seeds, N, smoothing)", where, f.Note))
		}
		named := shortNamed(f.Note)
		for _, a := range shortMeans(f) {
			if !slices.Contains(named, a) && !slices.Contains(named, everyArm) {
				bad = append(bad, fmt.Sprintf("%s: %s's mean ends before its longest seed and the note does not say so", where, a))
			}
		}
		if f.Clipped != strings.Contains(f.Note, "clipped") {
			bad = append(bad, fmt.Sprintf("%s: clipped %v but the note says otherwise", where, f.Clipped))
		}
		if !f.LogX && !roundTickSet(f.XTicks) {
			bad = append(bad, fmt.Sprintf("%s: x ticks %v are not at round steps", where, f.XTicks))
		}
		if !roundTickSet(f.YTicks) {
			bad = append(bad, fmt.Sprintf("%s: y ticks %v are not at round steps", where, f.YTicks))
		}
		for _, e := range f.Legend {
			if o, ok := lookOf[e.Arm]; ok && o != e.Look {
				bad = append(bad, fmt.Sprintf("%s: legend draws %s as %v, its lines as %v", where, e.Arm, e.Look, o))
			}
		}
	}
	if forest != nil {
		for _, g := range forest.Groups {
			if rawKeyRE.MatchString(g.Title) || rawKeyRE.MatchString(g.XLabel) {
				bad = append(bad, fmt.Sprintf("forest: labels %q, %q are not words", g.Title, g.XLabel))
			}
			if !roundTickSet(g.XTicks) {
				bad = append(bad, fmt.Sprintf("forest %s: x ticks %v are not at round steps", g.Title, g.XTicks))
			}
			for _, r := range g.Rows {
				if !(r.Lo <= r.D && r.D <= r.Hi) || math.IsInf(r.Hi-r.Lo, 0) || math.IsNaN(r.Hi-r.Lo) {
					bad = append(bad, fmt.Sprintf("forest %s: %s: effect %v outside its interval [%v, %v]", g.Title, r.Label, r.D, r.Lo, r.Hi))
				}
				if r.Lo < g.XMin || r.Hi > g.XMax {
					bad = append(bad, fmt.Sprintf("forest %s: %s: interval outside the axis", g.Title, r.Label))
				}
			}
		}
		if !strings.Contains(forest.Note, "95% interval") || !strings.Contains(forest.Note, "Holm") {
			bad = append(bad, "forest: its note does not say what the bars and markers are")
		}
	}
	return bad
}

// shortNamed are the arms a note says end short of their longest seed:
// the list in shortMeanNote's sentence.
func shortNamed(note string) []string {
	m := shortNoteRE.FindStringSubmatch(note)
	if m == nil {
		return nil
	}
	return strings.Split(m[1], ", ")
}

var shortNoteRE = regexp.MustCompile(`each mean is taken step by step at its seeds' mean [a-z ]+, so it ends at their mean, before its longest seed's line \(([^)]*)\)`)

// bandNoteRE is what a line figure's note must say: thick and thin lines,
// and N.
var bandNoteRE = regexp.MustCompile(`mean over seeds; thin lines: each seed \(N = \d+( to \d+)? seeds per arm\)`)

// roundTickSet reports whether ts are two or more ticks, evenly spaced at
// 1, 2, 2.5 or 5 times a power of ten, each a multiple of the spacing.
func roundTickSet(ts []float64) bool {
	if len(ts) < 2 {
		return false
	}
	s := ts[1] - ts[0]
	if s <= 0 {
		return false
	}
	m := s / math.Pow(10, math.Floor(math.Log10(s)+1e-9))
	okM := false
	for _, c := range []float64{1, 2, 2.5, 5} {
		okM = okM || math.Abs(m-c) < 1e-6
	}
	if !okM {
		return false
	}
	for i, t := range ts {
		if math.Abs(t-(ts[0]+float64(i)*s)) > 1e-6*s || math.Abs(t/s-math.Round(t/s)) > 1e-6 {
			return false
		}
	}
	return true
}
