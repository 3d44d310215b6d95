package klcov

import (
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/core/strategytest"
)

func build(t *testing.T, m map[string]any) *KLCov {
	t.Helper()
	s, err := core.NewStrategy("kl_cov", core.NewParams("strategies[0]", m), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s.(*KLCov)
}

// covBatch: N = 5 tokens; Cov = (lp - mean lp) * (A - mean A), mean lp = -3,
// mean A = 0.4 (see clipcov's test for the same batch):
//
//	s0: 3.2, 0, 1.6    s1: 4.8, 2.4
func covBatch() *core.Rollout {
	return &core.Rollout{Seqs: []core.Sequence{
		{Response: make([]int32, 3), LogProbs: []float64{-1, -3, -2}, Advantages: []float64{2, 2, 2}},
		{Response: make([]int32, 2), LogProbs: []float64{-5, -4}, Advantages: []float64{-2, -2}},
	}}
}

func TestPenalisesTopCovariance(t *testing.T) {
	cases := []struct {
		m    map[string]any
		want [][]float64
	}{
		// ratio 0.4: k = floor(2) = 2: 4.8 (s1 t0) and 3.2 (s0 t0), default coefficient 0.1.
		{map[string]any{"ratio": 0.4}, [][]float64{{0.1, 0, 0}, {0.1, 0}}},
		// ratio 0.6, kl_coef 0.5: k = 3: 4.8, 3.2, 2.4.
		{map[string]any{"ratio": 0.6, "kl_coef": 0.5}, [][]float64{{0.5, 0, 0}, {0.5, 0.5}}},
		// Defaults ratio 2e-4, kl_coef 0.1: k = max(1, 0) = 1: 4.8 only, coefficient 0.1.
		{nil, [][]float64{{0, 0, 0}, {0.1, 0}}},
		// ratio 1: every token.
		{map[string]any{"ratio": 1, "kl_coef": 2}, [][]float64{{2, 2, 2}, {2, 2}}},
	}
	for _, c := range cases {
		tl, err := build(t, c.m).TokenLoss(core.StepInfo{}, covBatch())
		if err != nil {
			t.Fatal(err)
		}
		if tl.PGWeight != nil || tl.EntropyCoef != 0 {
			t.Fatalf("%v: only AbsKLCoef expected: %+v", c.m, tl)
		}
		for i := range c.want {
			for k := range c.want[i] {
				if tl.AbsKLCoef[i][k] != c.want[i][k] {
					t.Fatalf("%v: got %v, want %v", c.m, tl.AbsKLCoef, c.want)
				}
			}
		}
	}
}

// Equal covariances: the earlier token in batch order goes first. All
// advantages but one equal: s0 = {A 1, lp -1}, s1 = {A 1, lp -1}, s2 =
// {A -2, lp -4}: mean A = 0, mean lp = -2; Cov = 1*1, 1*1, (-2)(-2) = 4:
// k = 2 picks s2 and then s0 (before s1).
func TestTiesInBatchOrder(t *testing.T) {
	r := &core.Rollout{Seqs: []core.Sequence{
		{Response: make([]int32, 1), LogProbs: []float64{-1}, Advantages: []float64{1}},
		{Response: make([]int32, 1), LogProbs: []float64{-1}, Advantages: []float64{1}},
		{Response: make([]int32, 1), LogProbs: []float64{-4}, Advantages: []float64{-2}},
	}}
	tl, err := build(t, map[string]any{"ratio": 0.7, "kl_coef": 1}).TokenLoss(core.StepInfo{}, r)
	if err != nil {
		t.Fatal(err)
	}
	if tl.AbsKLCoef[0][0] != 1 || tl.AbsKLCoef[1][0] != 0 || tl.AbsKLCoef[2][0] != 1 {
		t.Fatalf("got %v, want [[1] [0] [1]]", tl.AbsKLCoef)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		m    map[string]any
		want string
	}{
		{map[string]any{"ratio": -0.1}, "config: strategies[0].ratio: must be in (0, 1]"},
		{map[string]any{"kl_coef": 0}, "config: strategies[0].kl_coef: must be > 0"},
		{map[string]any{"beta": 1}, "config: strategies[0].beta: unknown key"},
	} {
		_, err := core.NewStrategy("kl_cov", core.NewParams("strategies[0]", c.m), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want %q", c.m, err, c.want)
		}
	}
}

func TestConformance(t *testing.T) {
	strategytest.Run(t, func() core.Strategy { return build(t, map[string]any{"ratio": 0.2}) }, strategytest.Options{Seed: 5})
	strategytest.Run(t, func() core.Strategy { return build(t, nil) }, strategytest.Options{Seed: 8, Algorithm: "rloo"})
}
