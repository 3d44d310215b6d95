package core

import (
	"math"
	"strings"
	"testing"
)

func TestPassAtK(t *testing.T) {
	tests := []struct {
		n, c, k int
		want    float64
	}{
		// 1 - C(3,1)/C(5,1) = 1 - 3/5 = 0.4; product form (1-1/4)(1-1/5) = 0.6.
		{5, 2, 1, 0.4},
		// 1 - C(3,2)/C(5,2) = 1 - 3/10 = 0.7; product form (1-2/4)(1-2/5) = 0.3.
		{5, 2, 2, 0.7},
		{5, 0, 3, 0}, // no correct sample
		{5, 5, 1, 1}, // all correct
		{4, 1, 4, 1}, // n-c = 3 < k = 4: every draw contains the correct one
		// 1 - C(7,5)/C(10,5) = 1 - 21/252 = 11/12
		{10, 3, 5, 11.0 / 12},
		{1, 1, 1, 1},
		{1, 0, 1, 0},
	}
	for _, tc := range tests {
		got, err := PassAtK(tc.n, tc.c, tc.k)
		if err != nil || math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("PassAtK(%d,%d,%d) = %v, %v; want %v", tc.n, tc.c, tc.k, got, err, tc.want)
		}
	}
	// Large n stays finite and in [0, 1] (no binomial overflow).
	if got, err := PassAtK(2000, 3, 1000); err != nil || got < 0 || got > 1 || math.IsNaN(got) {
		t.Errorf("large: %v %v", got, err)
	}
	bad := [][3]int{{0, 0, 1}, {5, 2, 0}, {5, 2, 6}, {5, 6, 1}, {5, -1, 1}}
	for _, b := range bad {
		if _, err := PassAtK(b[0], b[1], b[2]); err == nil {
			t.Errorf("PassAtK%v: want an error", b)
		}
	}
}

func TestAvgAtK(t *testing.T) {
	if got := AvgAtK([]bool{true, false, true, false}); got != 0.5 {
		t.Errorf("got %v, want 2/4", got)
	}
	if got := AvgAtK([]bool{false}); got != 0 {
		t.Errorf("got %v", got)
	}
	if !math.IsNaN(AvgAtK(nil)) {
		t.Error("empty: want NaN")
	}
}

func TestEvalSummary(t *testing.T) {
	probs := [][]bool{
		{true, false, true, false, false}, // n=5, c=2: avg 0.4, pass@1 0.4, pass@2 0.7
		{false, false, false, false, false},
		{true, true, true}, // n=3, c=3: avg 1, pass@k 1
	}
	tests := []struct {
		k         int
		avg, pass float64
	}{
		// avg = (0.4 + 0 + 1)/3 = 1.4/3; pass@1 = (0.4 + 0 + 1)/3
		{1, 1.4 / 3, 1.4 / 3},
		// pass@2 = (0.7 + 0 + 1)/3 = 1.7/3
		{2, 1.4 / 3, 1.7 / 3},
	}
	for _, tc := range tests {
		avg, pass, err := EvalSummary(probs, tc.k)
		if err != nil || math.Abs(avg-tc.avg) > 1e-12 || math.Abs(pass-tc.pass) > 1e-12 {
			t.Errorf("k=%d: %v %v %v; want %v %v", tc.k, avg, pass, err, tc.avg, tc.pass)
		}
	}
	// k = 4 > 3 samples of problem 2.
	if _, _, err := EvalSummary(probs, 4); err == nil || !strings.Contains(err.Error(), "problem 2") {
		t.Errorf("err = %v, want one naming problem 2", err)
	}
	if _, _, err := EvalSummary(nil, 1); err == nil {
		t.Error("no problems: want an error")
	}
}

func TestAUROC(t *testing.T) {
	tests := []struct {
		name   string
		scores []float64
		pos    []bool
		want   float64
	}{
		{"perfect", []float64{3, 2, 1, 0}, []bool{true, true, false, false}, 1},
		{"reversed", []float64{0, 1, 2, 3}, []bool{true, true, false, false}, 0},
		{"all tied", []float64{1, 1, 1}, []bool{true, false, false}, 0.5},
		// pairs (pos, neg): 0.9>0.5 1, 0.9>0.1 1, 0.5=0.5 1/2, 0.5>0.1 1
		// -> 3.5 / (2*2) = 0.875
		{"ties", []float64{0.9, 0.5, 0.5, 0.1}, []bool{true, true, false, false}, 0.875},
		// unsorted input; pos {-2, 4}, neg {-2, 1, 5}:
		// -2: vs -2 tie 1/2, vs 1 lose, vs 5 lose -> 0.5
		//  4: vs -2 win, vs 1 win, vs 5 lose     -> 2
		// -> 2.5 / 6
		{"mixed", []float64{1, -2, 5, 4, -2}, []bool{false, true, false, true, false}, 2.5 / 6},
	}
	for _, tc := range tests {
		if got := AUROC(tc.scores, tc.pos); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		s []float64
		p []bool
	}{
		{[]float64{1, 2}, []bool{true, true}},
		{[]float64{1, 2}, []bool{false, false}},
		{nil, nil},
		{[]float64{math.NaN(), 1}, []bool{true, false}},
	} {
		if got := AUROC(tc.s, tc.p); !math.IsNaN(got) {
			t.Errorf("AUROC(%v, %v) = %v, want NaN", tc.s, tc.p, got)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("length mismatch: want a panic")
		}
	}()
	AUROC([]float64{1}, nil)
}
