package bench

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/cde-rl/cde/core"
)

// Claims at equal compute (docs/bench.md, "Claims at equal compute"): a
// claim with `at` compares the arms where each had spent the same
// responses, generated tokens or training wall time, not after the same
// optimiser steps. Each arm's evaluations of the metric are a curve over
// that axis; a seed's value is the curve linearly interpolated at the
// claim's point, which must lie where both arms have evaluations (never
// extrapolated). Per-problem results exist only at the steps evaluated,
// so such a claim is judged on the per-seed values.

// The axes a claim may be judged at (Claim.At); "" is equal steps.
const (
	AtResponses = "responses"
	AtTokens    = "tokens"
	AtWall      = "wall"
)

// atAxes are the axes `at` takes, with what each measures.
var atAxes = map[string]string{
	AtResponses: "responses generated",
	AtTokens:    "tokens generated",
	AtWall:      "training wall seconds",
}

// Per-step metrics the tokens and wall axes are built from: a step's
// generated tokens are perf/gen_tokens_per_s x perf/gen_s (every batch
// drawn, dynamic sampling's dropped groups included), its wall time
// perf/step_s (generation, update and weight sync; evaluations and
// checkpoints excluded).
const (
	genTokensPerSMetric = "perf/gen_tokens_per_s"
	genSMetric          = "perf/gen_s"
	stepSMetric         = "perf/step_s"
)

// computeX is the x of every row of r on axis: what the run had spent
// before the row's step trained, so an evaluation at step s (made before
// step s) sits at what produced the policy it evaluated, step 0 at 0, and
// the evaluation after the last step at the run's total. nil when no row
// has the metrics the axis needs (a run from before them, or a restored
// one without perf/*).
func computeX(r *armRun, axis string) []float64 {
	if axis == AtResponses {
		return samplesX(r)
	}
	xs := make([]float64, len(r.Rows))
	total, found := 0.0, false
	for i, row := range r.Rows {
		xs[i] = total
		switch axis {
		case AtTokens:
			rate, ok1 := row[genTokensPerSMetric]
			secs, ok2 := row[genSMetric]
			if ok1 && ok2 {
				total += rate * secs
				found = true
			}
		case AtWall:
			if s, ok := row[stepSMetric]; ok {
				total += s
				found = true
			}
		}
	}
	if !found {
		return nil
	}
	return xs
}

// curvePoint is one evaluation of a metric at x on a claim's axis; step
// is the row's step (-1 for the shared base's evaluation).
type curvePoint struct {
	x, v float64
	step int
}

// computeCurve is r's evaluations of metric against axis, in step order,
// preceded by base's step-0 value at x = 0 when r has no step-0 value and
// base (the bench's base_eval run of the same seed; nil for none) has one:
// every arm starts from that policy. ok false when the axis cannot be
// built for r.
func computeCurve(r, base *armRun, metric, axis string) ([]curvePoint, bool) {
	xs := computeX(r, axis)
	if xs == nil {
		return nil, false
	}
	var pts []curvePoint
	for i, row := range r.Rows {
		if v, ok := row[metric]; ok {
			pts = append(pts, curvePoint{x: xs[i], v: v, step: int(row["step"])})
		}
	}
	if base != nil && (len(pts) == 0 || pts[0].step != 0) {
		for _, row := range base.Rows {
			if v, ok := row[metric]; ok && row["step"] == 0 {
				pts = append([]curvePoint{{x: 0, v: v, step: -1}}, pts...)
				break
			}
		}
	}
	return pts, true
}

// interpolate is the curve's value at x, linear between the two
// evaluations around it (an evaluation at x exactly is taken as it is),
// with a description of where it came from; ok false outside the curve.
func interpolate(pts []curvePoint, x float64) (v float64, from string, ok bool) {
	name := func(p curvePoint) string {
		if p.step < 0 {
			return "base"
		}
		return "step " + strconv.Itoa(p.step)
	}
	for i, p := range pts {
		if p.x == x {
			return p.v, name(p), true
		}
		if i > 0 && pts[i-1].x < x && x < p.x {
			q := pts[i-1]
			f := (x - q.x) / (p.x - q.x)
			return q.v + f*(p.v-q.v), fmt.Sprintf("%s (%s) to %s (%s)", name(q), fmtAxis(q.x), name(p), fmtAxis(p.x)), true
		}
	}
	return 0, "", false
}

// fmtAxis writes a point on an axis: a whole count with thousands
// separators, else 4 significant digits.
func fmtAxis(x float64) string {
	if x != float64(int64(x)) || x < 0 {
		return fmtNum(x)
	}
	s := strconv.FormatInt(int64(x), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// atJudge gathers what judgeClaim needs for a claim's per-seed values:
// the final values (claimValue) for a claim at equal steps, the
// interpolated ones for a claim with At, with the points and where each
// value came from for the verdict's note.
type atJudge struct {
	points []float64
	lines  []string
}

// values is a seed's value of c for arm runs a (c.Better) and b (c.Than),
// or why there is none. runs supplies the base evaluations.
func (j *atJudge) values(c Claim, a, b *armRun, runs map[string][]*armRun) (va, vb float64, miss string) {
	if c.At == "" {
		va, okA := claimValue(a, c)
		vb, okB := claimValue(b, c)
		if !okA || !okB {
			return 0, 0, "metric missing"
		}
		return va, vb, ""
	}
	var base *armRun
	for _, r := range runs[BaseArm] {
		if r.Seed == a.Seed {
			base = r
		}
	}
	ca, okA := computeCurve(a, base, c.Metric, c.At)
	cb, okB := computeCurve(b, base, c.Metric, c.At)
	switch {
	case !okA:
		return 0, 0, fmt.Sprintf("%s: its metrics do not give %s", c.Better, atAxes[c.At])
	case !okB:
		return 0, 0, fmt.Sprintf("%s: its metrics do not give %s", c.Than, atAxes[c.At])
	case len(ca) == 0 || len(cb) == 0:
		return 0, 0, "metric missing"
	}
	lo := max(ca[0].x, cb[0].x)
	hi := min(ca[len(ca)-1].x, cb[len(cb)-1].x)
	x := hi
	if c.AtValue != nil {
		x = *c.AtValue
	}
	if lo > hi || x < lo || x > hi {
		span := "the arms' evaluations do not overlap: " + fmt.Sprintf("%s [%s, %s], %s [%s, %s]", c.Better,
			fmtAxis(ca[0].x), fmtAxis(ca[len(ca)-1].x), c.Than, fmtAxis(cb[0].x), fmtAxis(cb[len(cb)-1].x))
		if lo <= hi {
			span = fmt.Sprintf("both arms have evaluations in [%s, %s] only", fmtAxis(lo), fmtAxis(hi))
		}
		return 0, 0, fmt.Sprintf("no value at %s %s (%s; a claim at equal compute is never extrapolated)", fmtAxis(x), atAxes[c.At], span)
	}
	va, fromA, _ := interpolate(ca, x)
	vb, fromB, _ := interpolate(cb, x)
	j.points = append(j.points, x)
	j.lines = append(j.lines, fmt.Sprintf("seed %d at %s: %s %s (%s), %s %s (%s)", a.Seed, fmtAxis(x),
		c.Better, fmtNum(va), fromA, c.Than, fmtNum(vb), fromB))
	return va, vb, ""
}

// note says, for a claim with At, where its seeds were judged.
func (j *atJudge) note(c Claim) string {
	if c.At == "" || len(j.lines) == 0 {
		return ""
	}
	point := "the most " + atAxes[c.At] + " both arms reached (the earlier of their last evaluations)"
	if c.AtValue != nil {
		point = fmtAxis(*c.AtValue) + " " + atAxes[c.At]
	}
	return fmt.Sprintf("judged at equal %s, at %s: each seed's value is its evaluations linearly interpolated there (x: %s before the step evaluated; "+
		"the shared base's evaluation at 0); %s", atAxes[c.At], point, atAxes[c.At], strings.Join(j.lines, "; "))
}

// atPerSeed is the Claims section's per-seed values of arm for claim c:
// the final values (perSeed); for a claim with At the values it was
// judged on are in the verdict's note.
func atPerSeed(c Claim, runs map[string][]*armRun, arm string) string {
	if c.At == "" {
		return perSeed(runs[arm], c.Metric)
	}
	return "at the points in the note"
}

// parseClaimAt reads a claim's at and at_value (docs/bench.md, "Claims at
// equal compute"). at: steps is the default spelled out: cl.At stays "",
// so the claim is the one it was without the key.
func parseClaimAt(p *core.Params, cl *Claim) {
	at := p.OneOf("at", "steps", "steps", AtResponses, AtTokens, AtWall)
	if at != "steps" {
		cl.At = at
	}
	if p.Has("at_value") {
		x := p.Float("at_value", 0)
		p.Check(x > 0 && !math.IsInf(x, 0), "at_value", "want a finite point > 0 on the at axis, got %v", x)
		p.Check(cl.At != "", "at_value", "needs at: %s, %s or %s (a claim at equal steps is judged at the final values)", AtResponses, AtTokens, AtWall)
		cl.AtValue = &x
	}
	if cl.At == "" {
		return
	}
	p.Check(cl.Window <= 1, "window", "a claim at equal %s compares one interpolated value per seed: drop window (got %d)", atAxes[cl.At], cl.Window)
	p.Check(strings.HasPrefix(cl.Metric, "val/"), "at", "judges evaluations (val/* metrics) at equal compute; %s is not one", cl.Metric)
}
