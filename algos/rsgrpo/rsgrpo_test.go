package rsgrpo

import (
	"math"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
)

// Worked by hand. Two responses r = 1, -1: w = 2/(1+e^-2), 2e^-2/(1+e^-2),
// so A = +-(1-e^-2)/(1+e^-2) / beta = +-tanh(beta)/beta (beta 1 and 2
// below). One correct of four, beta 1: A = (3-3e^-2)/(1+3e^-2) and
// (e^-2-1)/(1+3e^-2), which sum to 0. beta -> 0 gives r - mean: 1.5 and
// -0.5. Rewards 1000 apart do not overflow: w = 2 and 0, A = 1 and -1.
func TestEstimate(t *testing.T) {
	e2 := math.Exp(-2)
	for _, c := range []struct {
		name    string
		rewards []float64
		groups  [][]int
		beta    float64
		want    []float64
		tol     float64
	}{
		{"pair beta 1", []float64{1, -1}, [][]int{{0, 1}}, 1, []float64{math.Tanh(1), -math.Tanh(1)}, 1e-15},
		{"pair beta 2", []float64{1, -1}, [][]int{{0, 1}}, 2, []float64{math.Tanh(2) / 2, -math.Tanh(2) / 2}, 1e-15},
		{"one of four", []float64{1, -1, -1, -1}, [][]int{{0, 1, 2, 3}}, 1,
			[]float64{(3 - 3*e2) / (1 + 3*e2), (e2 - 1) / (1 + 3*e2), (e2 - 1) / (1 + 3*e2), (e2 - 1) / (1 + 3*e2)}, 1e-15},
		{"beta to 0", []float64{1, -1, -1, -1}, [][]int{{0, 1, 2, 3}}, 1e-9, []float64{1.5, -0.5, -0.5, -0.5}, 1e-6},
		{"no overflow", []float64{1000, 0}, [][]int{{0, 1}}, 1, []float64{1, -1}, 1e-15},
		{"equal", []float64{0.3, 0.3}, [][]int{{0, 1}}, 3, []float64{0, 0}, 0},
		{"groups", []float64{1, 5, -1, 9}, [][]int{{0, 2}, {1}}, 1, []float64{math.Tanh(1), 0, -math.Tanh(1), 0}, 1e-15},
	} {
		got := Estimate(c.rewards, c.groups, c.beta)
		for i := range got {
			if math.Abs(got[i]-c.want[i]) > c.tol || math.IsNaN(got[i]) {
				t.Errorf("%s: A[%d] = %.17g, want %.17g", c.name, i, got[i], c.want[i])
			}
		}
	}
}

func TestFactory(t *testing.T) {
	a, err := core.NewAlgorithm("rs_grpo", core.NewParams("algorithm", map[string]any{"beta": 2.0}))
	if err != nil || a.(*RSGRPO).Beta != 2 || a.Name() != "rs_grpo" || a.NeedsCritic() {
		t.Fatalf("%+v %v", a, err)
	}
	d, _ := core.NewAlgorithm("rs_grpo", core.NewParams("algorithm", nil))
	if d.(*RSGRPO).Beta != 1 {
		t.Errorf("default beta %v", d.(*RSGRPO).Beta)
	}
	for _, bad := range []any{0.0, -1.0, math.Inf(1)} {
		if _, err := core.NewAlgorithm("rs_grpo", core.NewParams("algorithm", map[string]any{"beta": bad})); err == nil || !strings.Contains(err.Error(), "algorithm.beta: must be") {
			t.Errorf("beta %v: %v", bad, err)
		}
	}
}
