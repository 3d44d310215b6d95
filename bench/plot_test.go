package bench

import (
	"math"
	"slices"
	"testing"
)

// Worked by hand. Window 3 (2 at the ends): the spike 100 is never the
// median of its window. Window 5 over (4, 1, 3, 2): the windows are
// (4, 1, 3), all four, all four, (1, 3, 2): medians 3, 2.5, 2.5, 2.
func TestRollingMedian(t *testing.T) {
	for _, c := range []struct {
		ys   []float64
		w    int
		want []float64
	}{
		{[]float64{1, 2, 100, 3, 4}, 3, []float64{1.5, 2, 3, 4, 3.5}},
		{[]float64{5, 1, 3}, 1, []float64{5, 1, 3}},
		{[]float64{4, 1, 3, 2}, 5, []float64{3, 2.5, 2.5, 2}},
	} {
		if got := rollingMedian(c.ys, c.w); !slices.Equal(got, c.want) {
			t.Errorf("rollingMedian(%v, %d) = %v, want %v", c.ys, c.w, got, c.want)
		}
	}
}

// The calibration line is PPL(incorrect)/PPL(correct) per row; the
// held-out line starts at the base's step-0 value of the same seed, and an
// arm at 0 after the base is left out.
func TestSeedBandOfBaseAndRatio(t *testing.T) {
	rows := func(vals ...[3]float64) []map[string]float64 {
		var out []map[string]float64
		for _, v := range vals {
			out = append(out, map[string]float64{"step": v[0], "calib/ppl_incorrect": v[1], "calib/ppl_correct": v[2]})
		}
		return out
	}
	rs := []*armRun{
		{Seed: 1, Rows: rows([3]float64{1, 3, 2}, [3]float64{2, 4, 2})},
		{Seed: 2, Rows: rows([3]float64{1, 1, 1}, [3]float64{2, 6, 2})},
	}
	b := seedBandOf(rs, ratioValue("calib/ppl_incorrect", "calib/ppl_correct"), 1, false, nil)
	// step 1: 1.5 and 1; step 2: 2 and 3.
	if !slices.Equal(b.X, []float64{1, 2}) || !slices.Equal(b.Mean, []float64{1.25, 2.5}) || !slices.Equal(b.Lo, []float64{1, 2}) || !slices.Equal(b.Hi, []float64{1.5, 3}) {
		t.Errorf("ratio band %+v", b)
	}
	base := func(seed uint64) (float64, bool) { return float64(seed) / 10, true }
	b = seedBandOf(rs, metricValue("calib/ppl_correct"), 1, false, base)
	if !slices.Equal(b.X, []float64{0, 1, 2}) || math.Abs(b.Mean[0]-0.15) > 1e-15 || b.Lo[0] != 0.1 || b.Hi[0] != 0.2 {
		t.Errorf("band with base %+v", b)
	}
	for _, c := range []struct {
		b    band
		want bool
	}{
		{band{X: []float64{0, 100, 200}, Lo: []float64{0.09, 0, 0}, Hi: []float64{0.09, 0, 0}}, true},
		{band{X: []float64{0, 100, 200}, Lo: []float64{0.09, 0, 0}, Hi: []float64{0.09, 0.01, 0}}, false},
		{band{X: []float64{0}, Lo: []float64{0}, Hi: []float64{0}}, false},
	} {
		if got := allZeroAfterBase(c.b); got != c.want {
			t.Errorf("allZeroAfterBase(%+v) = %v", c.b, got)
		}
	}
}
