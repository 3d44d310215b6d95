package forking

import (
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/core/strategytest"
)

func build(t *testing.T, m map[string]any) *Forking {
	t.Helper()
	s, err := core.NewStrategy("forking_tokens", core.NewParams("strategies[0]", m), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s.(*Forking)
}

// entBatch: N = 10 tokens with entropies
//
//	s0: 0.1, 2.0, 0.3, 0.05
//	s1: 1.5, 0.2, 0.7
//	s2: 0.9, 0.4, 1.5
//
// sorted: 2.0, 1.5, 1.5, 0.9, 0.7, 0.4, 0.3, 0.2, 0.1, 0.05.
func entBatch() *core.Rollout {
	return &core.Rollout{Seqs: []core.Sequence{
		{Response: make([]int32, 4), Entropies: []float64{0.1, 2.0, 0.3, 0.05}},
		{Response: make([]int32, 3), Entropies: []float64{1.5, 0.2, 0.7}},
		{Response: make([]int32, 3), Entropies: []float64{0.9, 0.4, 1.5}},
	}}
}

func TestKeepsTopEntropyTokens(t *testing.T) {
	cases := []struct {
		m    map[string]any
		want [][]float64
	}{
		// Default rho 0.2: k = ceil(2) = 2, tau = 1.5: kept 2.0 and both
		// 1.5s (tied at tau): 3 tokens.
		{nil, [][]float64{{0, 1, 0, 0}, {1, 0, 0}, {0, 0, 1}}},
		// rho 0.1: k = 1, tau = 2.0.
		{map[string]any{"rho": 0.1}, [][]float64{{0, 1, 0, 0}, {0, 0, 0}, {0, 0, 0}}},
		// rho 0.45: k = ceil(4.5) = 5, tau = 0.7: 2.0, 1.5, 1.5, 0.9, 0.7.
		{map[string]any{"rho": 0.45}, [][]float64{{0, 1, 0, 0}, {1, 0, 1}, {1, 0, 1}}},
		// rho 1: every token.
		{map[string]any{"rho": 1}, [][]float64{{1, 1, 1, 1}, {1, 1, 1}, {1, 1, 1}}},
	}
	for _, c := range cases {
		tl, err := build(t, c.m).TokenLoss(core.StepInfo{}, entBatch())
		if err != nil {
			t.Fatal(err)
		}
		if tl.AbsKLCoef != nil || tl.EntropyCoef != 0 {
			t.Fatalf("%v: only PGWeight expected: %+v", c.m, tl)
		}
		for i := range c.want {
			for k := range c.want[i] {
				if tl.PGWeight[i][k] != c.want[i][k] {
					t.Fatalf("%v: got %v, want %v", c.m, tl.PGWeight, c.want)
				}
			}
		}
	}
}

func TestMissingEntropies(t *testing.T) {
	r := entBatch()
	r.Seqs[1].Entropies = nil
	if _, err := build(t, nil).TokenLoss(core.StepInfo{}, r); err == nil || !strings.Contains(err.Error(), "sequence 1: 0 entropies for 3 tokens") {
		t.Errorf("got %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		m    map[string]any
		want string
	}{
		{map[string]any{"rho": 0}, "config: strategies[0].rho: must be in (0, 1]"},
		{map[string]any{"rho": 1.2}, "config: strategies[0].rho: must be in (0, 1]"},
		{map[string]any{"top": 0.2}, "config: strategies[0].top: unknown key"},
	} {
		_, err := core.NewStrategy("forking_tokens", core.NewParams("strategies[0]", c.m), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want %q", c.m, err, c.want)
		}
	}
}

func TestConformance(t *testing.T) {
	strategytest.Run(t, func() core.Strategy { return build(t, nil) }, strategytest.Options{Seed: 11})
}
