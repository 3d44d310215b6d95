package bench

import (
	"fmt"
	"image/color"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// ForestFile is the forest plot of a report's claims, under plots/.
const ForestFile = "forest.png"

// forestRow is one claim in the forest plot.
type forestRow struct {
	Label     string
	D, Lo, Hi float64
	Verdict   string // after Holm
}

// forestGroup is a family's claims (a metric's, unless claims name one)
// on one effect axis.
type forestGroup struct {
	Title, XLabel string
	Rows          []forestRow
	XMin, XMax    float64
	XTicks        []float64
}

// forestSpec is the forest plot as data: what the figure check inspects.
type forestSpec struct {
	Groups []forestGroup
	Note   string
}

// verdictMarks are the markers of the verdicts after Holm.
var verdictMarks = []struct {
	Verdict string
	Style   draw.GlyphStyle
}{
	{"held", draw.GlyphStyle{Color: color.RGBA{R: 0x11, G: 0x77, B: 0x33, A: 0xFF}, Shape: draw.CircleGlyph{}, Radius: vg.Points(3.5)}},
	{"not held", draw.GlyphStyle{Color: color.RGBA{R: 0xCC, G: 0x33, B: 0x11, A: 0xFF}, Shape: draw.BoxGlyph{}, Radius: vg.Points(3.5)}},
	{"equivalent", draw.GlyphStyle{Color: color.RGBA{R: 0x00, G: 0x77, B: 0xBB, A: 0xFF}, Shape: draw.PyramidGlyph{}, Radius: vg.Points(3.8)}},
	{"inconclusive", draw.GlyphStyle{Color: color.Gray{Y: 110}, Shape: draw.RingGlyph{}, Radius: vg.Points(3.2)}},
	{"exploratory", draw.GlyphStyle{Color: color.Gray{Y: 110}, Shape: draw.CrossGlyph{}, Radius: vg.Points(3.2)}},
}

func verdictGlyph(v string) draw.GlyphStyle {
	for _, m := range verdictMarks {
		if m.Verdict == v {
			return m.Style
		}
	}
	return verdictMarks[3].Style
}

// buildForest groups the claims with an effect and an interval by family,
// in the order of their first claim; ok is false when none has both.
func buildForest(vs []ClaimVerdict) (forestSpec, bool) {
	var f forestSpec
	idx := map[string]int{}
	var missing []string
	for _, v := range vs {
		if v.DeltaMean == nil || v.CILow == nil || v.CIHigh == nil {
			missing = append(missing, v.Claim)
			continue
		}
		fam := v.Family
		if fam == "" {
			fam = v.Metric
		}
		i, ok := idx[fam]
		if !ok {
			i = len(f.Groups)
			idx[fam] = i
			f.Groups = append(f.Groups, forestGroup{Title: axisLabel(fam), XLabel: "effect d on " + axisLabel(v.Metric)})
		}
		label := v.Claim
		if len(v.Arms) == 2 {
			label = v.Arms[0] + " vs " + v.Arms[1]
			if v.At != "" {
				label += " (at equal " + v.At + ")"
			}
		}
		f.Groups[i].Rows = append(f.Groups[i].Rows, forestRow{Label: label, D: *v.DeltaMean, Lo: *v.CILow, Hi: *v.CIHigh, Verdict: v.VerdictHolm})
	}
	for gi := range f.Groups {
		g := &f.Groups[gi]
		seen := map[string]int{}
		for _, r := range g.Rows {
			seen[r.Label]++
		}
		for ri := range g.Rows {
			if seen[g.Rows[ri].Label] > 1 {
				g.Rows[ri].Label = vsClaim(vs, g.Title, ri, g.Rows[ri].Label)
			}
		}
		lo, hi := 0.0, 0.0
		for _, r := range g.Rows {
			lo, hi = min(lo, r.Lo), max(hi, r.Hi)
		}
		pad := 0.05 * (hi - lo)
		if pad == 0 {
			pad = 1
		}
		g.XMin, g.XMax = lo-pad, hi+pad
		g.XTicks = roundTicks(g.XMin, g.XMax, 6)
	}
	f.Note = "Point: the effect d, the mean over paired seeds of (claimed-better arm minus the other arm), sign flipped where lower is better; " +
		"bar: its 95% interval; dotted: no effect. Marker: the verdict after Holm's correction within the family. One panel per family, each on its metric's scale."
	if len(missing) > 0 {
		f.Note += " No effect computed (not drawn): " + strings.Join(missing, ", ") + "."
	}
	return f, len(f.Groups) > 0
}

// vsClaim is a row label made unique by its claim's name.
func vsClaim(vs []ClaimVerdict, _ string, _ int, label string) string {
	for _, v := range vs {
		if len(v.Arms) == 2 && v.Arms[0]+" vs "+v.Arms[1] == strings.SplitN(label, " (", 2)[0] {
			return v.Claim
		}
	}
	return label
}

// WriteForest draws the forest plot of the claims' verdicts into
// plotsDir/forest.png and returns the results.md lines that show it; ""
// when no claim has an effect and interval.
func WriteForest(plotsDir string, vs []ClaimVerdict) (string, error) {
	f, ok := buildForest(vs)
	if !ok {
		return "", nil
	}
	if err := renderForest(f, filepath.Join(plotsDir, ForestFile)); err != nil {
		return "", err
	}
	n := 0
	for _, g := range f.Groups {
		n += len(g.Rows)
	}
	return fmt.Sprintf("**Every claim's effect with its 95%% interval (%d claims, %d families). %s**\n\n![forest](plots/%s)\n", n, len(f.Groups), f.Note, ForestFile), nil
}

const (
	forestRowH   = vg.Length(15)
	forestHeadH  = vg.Length(68) // a panel's title and x axis
	forestW      = 8.6 * vg.Inch
	forestLegend = vg.Length(26)
)

// renderForest draws f: the families' panels stacked, the verdicts'
// legend and the note below.
func renderForest(f forestSpec, path string) error {
	nsty := noteStyle()
	noteLines := wrapText(f.Note, nsty, forestW-4*legendMargin)
	noteRowH := nsty.Height("Mg") + 2
	noteH := vg.Length(len(noteLines))*noteRowH + legendMargin
	h := forestLegend + noteH
	for _, g := range f.Groups {
		h += forestHeadH + vg.Length(len(g.Rows))*forestRowH
	}
	img := vgimg.NewWith(vgimg.UseWH(forestW, h), vgimg.UseDPI(figureDPI))
	img.SetColor(color.White)
	img.Fill(vgRect(forestW, h))
	dc := draw.New(img)
	top := h
	for _, g := range f.Groups {
		gh := forestHeadH + vg.Length(len(g.Rows))*forestRowH
		p := plot.New()
		p.Title.Text = g.Title
		p.X.Label.Text = g.XLabel
		n := len(g.Rows)
		p.X.Min, p.X.Max = g.XMin, g.XMax
		p.Y.Min, p.Y.Max = -0.7, float64(n)-0.3
		p.X.Tick.Marker = fixedTicks(g.XTicks)
		var yt plot.ConstantTicks
		for i, r := range g.Rows {
			yt = append(yt, plot.Tick{Value: float64(n - 1 - i), Label: r.Label})
		}
		p.Y.Tick.Marker = yt
		p.Add(plotter.NewGrid())
		zero, err := plotter.NewLine(plotter.XYs{{X: 0, Y: p.Y.Min}, {X: 0, Y: p.Y.Max}})
		if err != nil {
			return err
		}
		zero.Color, zero.Width, zero.Dashes = color.Gray{Y: 60}, vg.Points(0.8), []vg.Length{vg.Points(2), vg.Points(2)}
		p.Add(zero)
		for i, r := range g.Rows {
			y := float64(n - 1 - i)
			ci, err := plotter.NewLine(plotter.XYs{{X: r.Lo, Y: y}, {X: r.Hi, Y: y}})
			if err != nil {
				return err
			}
			gs := verdictGlyph(r.Verdict)
			ci.Color, ci.Width = gs.Color, vg.Points(1.4)
			p.Add(ci)
			sc, err := plotter.NewScatter(plotter.XYs{{X: r.D, Y: y}})
			if err != nil {
				return err
			}
			sc.GlyphStyle = gs
			p.Add(sc)
		}
		c := draw.Crop(dc, legendMargin, -2*legendMargin, top-gh, -(h-top)-10)
		p.Draw(c)
		top -= gh
	}
	// The verdicts' legend, centred on one line.
	sty := legendStyle()
	var w vg.Length
	for _, m := range verdictMarks {
		w += 14 + legendGap + sty.Width("after Holm: "+m.Verdict) + legendColGap
	}
	x := (forestW - w) / 2
	yc := noteH + forestLegend/2
	for _, m := range verdictMarks {
		dc.DrawGlyph(m.Style, vg.Point{X: x + 7, Y: yc})
		dc.FillText(sty, vg.Point{X: x + 14 + legendGap, Y: yc}, "after Holm: "+m.Verdict)
		x += 14 + legendGap + sty.Width("after Holm: "+m.Verdict) + legendColGap
	}
	for i, s := range noteLines {
		dc.FillText(nsty, vg.Point{X: 2 * legendMargin, Y: noteH - legendMargin/2 - (vg.Length(i)+0.5)*noteRowH}, s)
	}
	return writePNG(path, img)
}
