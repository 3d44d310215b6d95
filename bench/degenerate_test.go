package bench

import (
	"math"
	"testing"
)

// Rounding residues are 0 and a claim without spread is inconclusive,
// whatever the residue's sign. Each case's exact values are worked out as
// rationals by hand.
func TestPairedIntervalRoundingAndNoSpread(t *testing.T) {
	same := func(S int, a, b [][]float64) []PairedSeed {
		var out []PairedSeed
		for s := range S {
			out = append(out, PairedSeed{Seed: uint64(s + 1), A: a, B: b})
		}
		return out
	}
	// Per seed, differences d (in tenths) of three problems, A = 0.3 + d/10
	// and B = 0.3: rows [0 1 0], [1 0 0], [1 0 0]. Every seed's effect is
	// 1/30; problem means 2/3, 1/3, 0 about 1/3 give MS_P = 3 (2/9) / 2 =
	// 1/3 (in tenths squared); the residuals -2/3, 2/3, 0 and twice 1/3,
	// -1/3, 0 give MS_R = (12/9) / 4 = 1/3. So V_s = 0 and V_p = 0 exactly,
	// while floats leave MS_P - MS_R at +1.3e-18, which made the
	// interval 1/30 -/+ 4e-10 and the claim "held".
	tenths := func(rows [][]float64) []PairedSeed {
		var out []PairedSeed
		for s, r := range rows {
			a, b := make([]float64, len(r)), make([]float64, len(r))
			for p, d := range r {
				a[p], b[p] = 0.3+d/10, 0.3
			}
			out = append(out, PairedSeed{Seed: uint64(s + 1), A: [][]float64{a}, B: [][]float64{b}})
		}
		return out
	}
	for _, c := range []struct {
		name   string
		seeds  []PairedSeed
		design Design
		delta  float64 // exact
		point  bool    // no spread: SE 0 up to rounding
	}{
		// (0.1 + 0.2)/2 - (0.3 + 0)/2 is 0, and 2.8e-17 in floats: the point
		// interval above 0 read as "held".
		{"exact zero, seeds", same(3, [][]float64{{0.1, 0.2}}, [][]float64{{0.3, 0}}), Nested, 0, true},
		// distinct@32 of dapo on the transfer bench, one value per seed:
		// -23/200 + 7/100 - 3/40 + 19/200 + 1/40 = 0, stored as 6.661e-17.
		{"exact zero, five seeds", []PairedSeed{
			{Seed: 1, A: [][]float64{{0.2}}, B: [][]float64{{0.315}}}, {Seed: 2, A: [][]float64{{0.31}}, B: [][]float64{{0.24}}},
			{Seed: 3, A: [][]float64{{0.2}}, B: [][]float64{{0.275}}}, {Seed: 4, A: [][]float64{{0.3}}, B: [][]float64{{0.205}}},
			{Seed: 5, A: [][]float64{{0.2}}, B: [][]float64{{0.175}}}}, Nested, 0, false},
		{"mean squares equal as rationals", tenths([][]float64{{0, 1, 0}, {1, 0, 0}, {1, 0, 0}}), Crossed, 1.0 / 30, true},
		// Every per-problem difference 0 on every seed.
		{"identical", same(3, [][]float64{{0.25, 1, 0}}, [][]float64{{0.25, 1, 0}}), Crossed, 0, true},
		// A solves everything, B nothing, on every seed: the point 1.
		{"same nonzero effect", same(3, [][]float64{{1, 1}}, [][]float64{{0, 0}}), Crossed, 1, true},
	} {
		iv, err := PairedInterval(c.seeds, 0.95, c.design)
		if err != nil {
			t.Fatal(err)
		}
		if c.delta == 0 && iv.Delta != 0 {
			t.Errorf("%s: Delta %v, want exactly 0", c.name, iv.Delta)
		}
		if !closeTo(iv.Delta, c.delta, 1e-12) {
			t.Errorf("%s: Delta %v, want %v", c.name, iv.Delta, c.delta)
		}
		if !c.point {
			if iv.Degenerate() || iv.SE <= 0 {
				t.Errorf("%s: %+v, want a spread", c.name, iv)
			}
			continue
		}
		if iv.SE != 0 || iv.VarSeeds != 0 || iv.VarProblems != 0 || iv.DFProblems != 0 || !iv.Degenerate() {
			t.Errorf("%s: %+v, want the point %v with SE 0", c.name, iv, c.delta)
		}
		for _, d := range iv.PerSeed {
			if c.delta == 0 && d != 0 {
				t.Errorf("%s: per-seed effects %v, want exactly 0", c.name, iv.PerSeed)
			}
		}
		if v := Verdict(iv.Low, iv.High, 0); v != "inconclusive" {
			t.Errorf("%s: verdict %s, want inconclusive", c.name, v)
		}
		if v := Verdict(iv.Low, iv.High, 0.5); v != "inconclusive" {
			t.Errorf("%s: verdict with a margin %s, want inconclusive", c.name, v)
		}
		if p := Tests(iv, 0.5); p.Two != 1 || p.Equiv != 1 {
			t.Errorf("%s: p %+v, want no test (1, 1)", c.name, p)
		}
	}
	// A real spread is kept, however small beside the values: effects
	// 1e-9 apart on values near 1 give VarSeeds = (1e-9)^2 / 3 / 3 (the
	// sample variance of 0, 1e-9, 2e-9 is 1e-18, over S = 3).
	var seeds []PairedSeed
	for i := range 3 {
		seeds = append(seeds, PairedSeed{Seed: uint64(i + 1), A: [][]float64{{0.5 + float64(i)*1e-9}}, B: [][]float64{{0.5}}})
	}
	iv, _ := PairedInterval(seeds, 0.95, Nested)
	if iv.Degenerate() || !closeTo(iv.VarSeeds, 1e-18/3, 1e-6) || !closeTo(iv.Delta, 1e-9, 1e-6) {
		t.Errorf("small spread: %+v, want Delta 1e-9, VarSeeds %v", iv, 1e-18/3)
	}
}

// The tolerance: |x| <= 1e-12 max(1, scale).
func TestBelowRounding(t *testing.T) {
	for _, c := range []struct {
		x, scale float64
		want     bool
	}{
		{0, 0, true},
		{6.661338147750939e-17, 0.3, true},
		{1e-12, 0.5, true},
		{1.1e-12, 0.5, false},
		{-1e-9, 1000, true}, // 1e-12 x 1000
		{-2e-9, 1000, false},
		{math.NaN(), 1, false},
	} {
		if got := belowRounding(c.x, c.scale); got != c.want {
			t.Errorf("belowRounding(%v, %v) = %v, want %v", c.x, c.scale, got, c.want)
		}
	}
}
