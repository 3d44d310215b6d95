package bench

import "math"

// RoundingTol is the claim rule's rounding tolerance, relative to the
// scale of the values it compares (docs/bench.md, "The claim rule"): an
// effect, a standard error or a variance part within RoundingTol x
// max(1, scale) of 0 is a rounding residue and is taken as exactly 0.
// Eval metrics are ratios of small integers (a pass@k of 7/20, a
// distinct@k of 23/200) whose differences, exactly 0 as rationals, come
// out of float arithmetic as 1e-17 or so; a double's relative rounding
// error is about 1e-16 per operation, so 1e-12 leaves room for thousands
// of them and is still far below any effect a bench could resolve.
const RoundingTol = 1e-12

// belowRounding reports whether x is 0 up to rounding for values of the
// given scale (the largest magnitude among the values x was computed
// from): |x| <= RoundingTol x max(1, scale).
func belowRounding(x, scale float64) bool {
	return math.Abs(x) <= RoundingTol*max(1, math.Abs(scale))
}

// zeroBelowRounding is x, or 0 when x is 0 up to rounding at scale.
func zeroBelowRounding(x, scale float64) float64 {
	if belowRounding(x, scale) {
		return 0
	}
	return x
}

// valueScale is the largest magnitude among a claim's per-unit values of
// both arms: the scale its effects and standard errors are rounded at.
func valueScale(seeds []PairedSeed) float64 {
	m := 0.0
	for _, s := range seeds {
		for _, sets := range [][][]float64{s.A, s.B} {
			for _, xs := range sets {
				for _, x := range xs {
					m = max(m, math.Abs(x))
				}
			}
		}
	}
	return m
}

// Degenerate reports whether the interval has no spread: SE is 0 (after
// rounding residues are taken as 0), so the interval is the point
// [Delta, Delta]. Every seed's effect is then the same and the problems
// add no spread (every per-problem difference 0 on every seed, say), and
// the data give no measure of the effect's error: the claim rule calls
// such a claim inconclusive whatever Delta's sign (Verdict does, from the
// point interval), and it has no p value.
func (iv Interval) Degenerate() bool { return iv.SE == 0 }

// effectOf is a verdicts.json entry's effect, 0 when it is 0 up to
// rounding at the scale of its per-seed effects and interval ends (files
// written before the rounding rule store an exact rational 0 as a residue
// such as 6.661e-17); NaN when it has none.
func effectOf(v ClaimVerdict) float64 {
	if v.DeltaMean == nil {
		return math.NaN()
	}
	scale := 0.0
	for _, d := range v.PerSeed {
		scale = max(scale, math.Abs(d))
	}
	for _, p := range []*float64{v.CILow, v.CIHigh} {
		if p != nil && !math.IsNaN(*p) && !math.IsInf(*p, 0) {
			scale = max(scale, math.Abs(*p))
		}
	}
	return zeroBelowRounding(*v.DeltaMean, scale)
}
