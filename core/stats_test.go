package core

import (
	"math"
	"testing"
)

// Hand-worked: [1, 2, 3, 6] has mean 12/4 = 3, deviations -2, -1, 0, 3,
// squares 4 + 1 + 0 + 9 = 14: population variance 14/4 = 3.5, sample
// variance 14/3. [2, 4, 4, 4, 5, 5, 7, 9] has mean 40/8 = 5, squared
// deviations 9+1+1+1+0+0+4+16 = 32: population std sqrt(32/8) = 2, sample
// std sqrt(32/7).
func TestStats(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name              string
		xs                []float64
		mean, pop, sample float64
		sampleVar         float64
	}{
		{"none", nil, nan, nan, nan, nan},
		{"one value", []float64{5}, 5, 0, 0, 0},
		{"pair", []float64{0.5, -0.5}, 0, 0.5, math.Sqrt(0.5), 0.5},
		{"four", []float64{1, 2, 3, 6}, 3, math.Sqrt(3.5), math.Sqrt(14.0 / 3), 14.0 / 3},
		{"eight", []float64{2, 4, 4, 4, 5, 5, 7, 9}, 5, 2, math.Sqrt(32.0 / 7), 32.0 / 7},
		{"constant", []float64{-1, -1, -1}, -1, 0, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range []struct {
				what      string
				got, want float64
			}{
				{"Mean", Mean(tc.xs), tc.mean},
				{"PopStd", PopStd(tc.xs), tc.pop},
				{"SampleStd", SampleStd(tc.xs), tc.sample},
				{"SampleVar", SampleVar(tc.xs), tc.sampleVar},
			} {
				if !closeTo(c.got, c.want) {
					t.Errorf("%s(%v) = %v, want %v", c.what, tc.xs, c.got, c.want)
				}
			}
		})
	}
}

func closeTo(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return math.Abs(a-b) <= 1e-15*math.Max(1, math.Abs(b))
}

func TestHeadStd(t *testing.T) {
	seq := func(values ...[]float64) Sequence {
		var flat []float64
		for _, v := range values {
			flat = append(flat, v...)
		}
		return Sequence{Response: make([]int32, len(values)), Values: flat}
	}
	tests := []struct {
		name string
		r    *Rollout
		want float64
		ok   bool
	}{
		// Row stds (population, over heads): [1,3] -> 1, [2,2] -> 0,
		// [0,4] -> 2; mean over the three rows (1+0+2)/3 = 1.
		{"three rows", &Rollout{ValueHeads: 2, Seqs: []Sequence{seq([]float64{1, 3}, []float64{2, 2}), seq([]float64{0, 4})}}, 1, true},
		// [1,2,3,6] -> sqrt(3.5) (see TestStats); [0,0,0,2] -> mean 0.5,
		// squares 0.25*3 + 2.25 = 3, sqrt(3/4); mean of the two rows.
		{"four heads", &Rollout{ValueHeads: 4, Seqs: []Sequence{seq([]float64{1, 2, 3, 6}, []float64{0, 0, 0, 2})}}, (math.Sqrt(3.5) + math.Sqrt(0.75)) / 2, true},
		// A sequence without values is not scored by the critic: skipped.
		{"sequence without values skipped", &Rollout{ValueHeads: 2, Seqs: []Sequence{seq([]float64{1, 3}), {Response: []int32{4, 5}}}}, 1, true},
		{"one head", &Rollout{ValueHeads: 1, Seqs: []Sequence{seq([]float64{7}, []float64{-3})}}, 0, true},
		{"no values", &Rollout{Seqs: []Sequence{{Response: []int32{1, 2}}}}, 0, false},
		{"no sequences", &Rollout{}, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := HeadStd(tc.r)
			if ok != tc.ok || !closeTo(got, tc.want) {
				t.Fatalf("HeadStd = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// Explained variance worked by hand: head means V = 1, 2, 3 (heads (0, 2),
// (2, 2), (3, 3)), returns 1, 3, 5: R - V = 0, 1, 2 with variance 2/3;
// Var(R) = 8/3; EV = 1 - (2/3)/(8/3) = 0.75. Constant returns: none.
func TestExplainedVariance(t *testing.T) {
	r := &Rollout{ValueHeads: 2, Seqs: []Sequence{
		{Response: []int32{1, 2}, Values: []float64{0, 2, 2, 2}, Returns: []float64{1, 3}},
		{Response: []int32{1}, Values: []float64{3, 3}, Returns: []float64{5}},
	}}
	if ev, ok := ExplainedVariance(r); !ok || math.Abs(ev-0.75) > 1e-15 {
		t.Errorf("EV %v %v, want 0.75", ev, ok)
	}
	r.Seqs[0].Returns, r.Seqs[1].Returns = []float64{2, 2}, []float64{2}
	if _, ok := ExplainedVariance(r); ok {
		t.Error("EV of constant returns")
	}
}
