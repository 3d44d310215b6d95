package clipcov

import (
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/core/strategytest"
)

func build(t *testing.T, m map[string]any) *ClipCov {
	t.Helper()
	s, err := core.NewStrategy("clip_cov", core.NewParams("strategies[0]", m), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s.(*ClipCov)
}

// covBatch: 2 sequences, N = 5 tokens.
//
//	log-probs  s0: -1, -3, -2    s1: -5, -4     mean -15/5 = -3
//	advantages s0:  2,  2,  2    s1: -2, -2     mean  2/5 = 0.4
//	Cov = (lp + 3) * (A - 0.4):
//	  s0: 2 * 1.6 = 3.2,  0 * 1.6 = 0,  1 * 1.6 = 1.6
//	  s1: -2 * -2.4 = 4.8, -1 * -2.4 = 2.4
func covBatch() *core.Rollout {
	return &core.Rollout{Seqs: []core.Sequence{
		{Response: make([]int32, 3), LogProbs: []float64{-1, -3, -2}, Advantages: []float64{2, 2, 2}},
		{Response: make([]int32, 2), LogProbs: []float64{-5, -4}, Advantages: []float64{-2, -2}},
	}}
}

func zeros(w [][]float64) (out []string) {
	for i, row := range w {
		for t, x := range row {
			switch x {
			case 0:
				out = append(out, string(rune('a'+i))+string(rune('0'+t)))
			case 1:
			default:
				out = append(out, "bad")
			}
		}
	}
	return out
}

func TestDetachesInsideTheBand(t *testing.T) {
	cases := []struct {
		m    map[string]any
		want int      // how many tokens are detached
		band []string // the tokens that may be (a = s0, b = s1)
	}{
		// Band (1, 5): candidates 3.2 (a0), 1.6 (a2), 4.8 (b0), 2.4 (b1);
		// ratio 0.4: floor(0.4*5) = 2 of them.
		{map[string]any{"ratio": 0.4}, 2, []string{"a0", "a2", "b0", "b1"}},
		// Band (3, 4): only 3.2; n = floor(1*5) = 5 but one candidate.
		{map[string]any{"ratio": 1, "cov_lb": 3, "cov_ub": 4}, 1, []string{"a0"}},
		// Default ratio 2e-4: max(1, floor(0.001)) = 1 token from the 4.
		{nil, 1, []string{"a0", "a2", "b0", "b1"}},
		// Band (5, 9): no candidate, nothing detached.
		{map[string]any{"cov_lb": 5, "cov_ub": 9}, 0, nil},
		// The band is open: cov_lb = 1.6 excludes a2 exactly at it.
		{map[string]any{"ratio": 1, "cov_lb": 1.6, "cov_ub": 3.2}, 1, []string{"b1"}},
	}
	for _, c := range cases {
		s := build(t, c.m)
		seen := map[string]bool{}
		for step := range 20 {
			tl, err := s.TokenLoss(core.StepInfo{Step: step, Seed: 3}, covBatch())
			if err != nil {
				t.Fatal(err)
			}
			if tl.AbsKLCoef != nil || tl.EntropyCoef != 0 {
				t.Fatalf("%v: only PGWeight expected: %+v", c.m, tl)
			}
			z := zeros(tl.PGWeight)
			if len(z) != c.want {
				t.Fatalf("%v step %d: detached %v, want %d tokens", c.m, step, z, c.want)
			}
			for _, tok := range z {
				found := false
				for _, b := range c.band {
					found = found || b == tok
				}
				if !found {
					t.Fatalf("%v: detached %s outside the band %v", c.m, tok, c.band)
				}
				seen[tok] = true
			}
		}
		// Over 20 steps of fresh draws every candidate comes up when fewer
		// than all are drawn (probability of missing one < 4 * (3/4)^20).
		if c.want > 0 && c.want < len(c.band) && len(seen) != len(c.band) {
			t.Errorf("%v: over 20 steps only %v were detached, want every one of %v", c.m, seen, c.band)
		}
	}
}

// The same seed and step give the same draw; another step another draw
// (at some step).
func TestDrawIsSeeded(t *testing.T) {
	s := build(t, map[string]any{"ratio": 0.2})
	a, _ := s.TokenLoss(core.StepInfo{Step: 4, Seed: 9}, covBatch())
	b, _ := s.TokenLoss(core.StepInfo{Step: 4, Seed: 9}, covBatch())
	if strings.Join(zeros(a.PGWeight), ",") != strings.Join(zeros(b.PGWeight), ",") {
		t.Fatalf("same seed and step: %v vs %v", zeros(a.PGWeight), zeros(b.PGWeight))
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		m    map[string]any
		want string
	}{
		{map[string]any{"ratio": 0}, "config: strategies[0].ratio: must be in (0, 1]"},
		{map[string]any{"ratio": 1.5}, "config: strategies[0].ratio: must be in (0, 1]"},
		{map[string]any{"cov_lb": 5, "cov_ub": 5}, "config: strategies[0].cov_ub: must be > cov_lb"},
		{map[string]any{"cov_ub": "high"}, "config: strategies[0].cov_ub: want a number"},
		{map[string]any{"clip_ratio": 0.1}, "config: strategies[0].clip_ratio: unknown key"},
	} {
		_, err := core.NewStrategy("clip_cov", core.NewParams("strategies[0]", c.m), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want %q", c.m, err, c.want)
		}
	}
}

func TestConformance(t *testing.T) {
	strategytest.Run(t, func() core.Strategy { return build(t, map[string]any{"ratio": 0.1, "cov_lb": 0}) }, strategytest.Options{Seed: 5})
	strategytest.Run(t, func() core.Strategy { return build(t, nil) }, strategytest.Options{Seed: 6, Algorithm: "ppo"})
}
