package ppl

import (
	"math"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/core/strategytest"
)

const tol = 1e-12

func build(t *testing.T, m map[string]any) *PPL {
	t.Helper()
	s, err := core.NewStrategy("ppl", core.NewParams("strategies[0]", m), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s.(*PPL)
}

func seq(reward float64, logProbs ...float64) core.Sequence {
	return core.Sequence{Reward: reward, LogProbs: logProbs, Response: make([]int32, len(logProbs))}
}

// batch: four responses with hand-computed B_actor = mean NLL.
//
//	A: r = +1, logp [-0.1, -0.3]        B = (0.1+0.3)/2      = 0.2
//	B: r = +1, logp [-1, -2]            B = (1+2)/2          = 1.5
//	C: r = -1, logp [-0.6]              B = 0.6
//	D: r = -1, logp [-0.25, -0.05, -0.3] B = (0.25+0.05+0.3)/3 = 0.2
func batch() *core.Rollout {
	return &core.Rollout{Seqs: []core.Sequence{
		seq(1, -0.1, -0.3),
		seq(1, -1, -2),
		seq(-1, -0.6),
		seq(-1, -0.25, -0.05, -0.3),
	}}
}

func check(t *testing.T, what string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d bonuses, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Abs(got[i]-want[i]) > tol {
			t.Errorf("%s: bonus[%d] = %v, want %v", what, i, got[i], want[i])
		}
	}
}

func TestDefaults(t *testing.T) {
	s := build(t, nil)
	if s.Kappa != 3 || s.Alpha != 1 {
		t.Fatalf("defaults: %+v", s)
	}
	if s.Needs() != (core.Needs{LogProbs: true}) {
		t.Errorf("needs %+v", s.Needs())
	}
	// kappa = 3, alpha = 1, w = 1; |r|/kappa = 1/3 for every response:
	//	A: min(1/3, 0.2) = 0.2     (perplexity branch)
	//	B: min(1/3, 1.5) = 1/3     (cap branch)
	//	C: min(1/3, 0.6) = 1/3     (negative reward: |r| = 1, bonus still >= 0)
	//	D: min(1/3, 0.2) = 0.2     (negative reward, perplexity branch)
	got, err := s.RewardBonus(core.StepInfo{Step: 0, TotalSteps: 10}, batch())
	if err != nil {
		t.Fatal(err)
	}
	check(t, "defaults", got, []float64{0.2, 1.0 / 3, 1.0 / 3, 0.2})

	// Observe: B and C were capped -> clip_frac 2/4.
	m, err := s.Observe(core.StepInfo{Step: 0, TotalSteps: 10}, batch())
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 || m["explore/ppl/clip_frac"] != 0.5 {
		t.Errorf("metrics %v", m)
	}
}

func TestKappaAlpha(t *testing.T) {
	s := build(t, map[string]any{"kappa": 2, "alpha": 0.5})
	// |r|/kappa = 1/2; alpha * B = B/2:
	//	A: min(0.5, 0.1)  = 0.1
	//	B: min(0.5, 0.75) = 0.5
	//	C: min(0.5, 0.3)  = 0.3
	//	D: min(0.5, 0.1)  = 0.1
	got, err := s.RewardBonus(core.StepInfo{}, batch())
	if err != nil {
		t.Fatal(err)
	}
	check(t, "kappa 2 alpha 0.5", got, []float64{0.1, 0.5, 0.3, 0.1})

	// A reward of 0 caps the bonus at 0/kappa = 0; a reward of 0.3 with
	// B = 1.5 and kappa 2 caps at 0.15.
	r := &core.Rollout{Seqs: []core.Sequence{seq(0, -1, -2), seq(0.3, -1, -2)}}
	got, _ = s.RewardBonus(core.StepInfo{}, r)
	check(t, "small rewards", got, []float64{0, 0.15})
}

func TestLengthMismatch(t *testing.T) {
	s := build(t, nil)
	r := &core.Rollout{Seqs: []core.Sequence{{Reward: 1, LogProbs: []float64{-1}, Response: make([]int32, 2)}}}
	if _, err := s.RewardBonus(core.StepInfo{}, r); err == nil {
		t.Error("1 log-prob for 2 tokens: no error")
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		m    map[string]any
		want string
	}{
		{map[string]any{"kappa": 0}, "config: strategies[0].kappa: must be > 0"},
		{map[string]any{"kappa": -1}, "config: strategies[0].kappa: must be > 0"},
		{map[string]any{"alpha": 0}, "config: strategies[0].alpha: must be > 0"},
		{map[string]any{"kappa": "three"}, "config: strategies[0].kappa: want a number"},
		{map[string]any{"kapa": 3}, "config: strategies[0].kapa: unknown key"},
		// The entry's weight is the trainer's (session.BuildStrategies
		// reads it), never the strategy's.
		{map[string]any{"weight": map[string]any{"w0": 2}}, "config: strategies[0].weight: unknown key"},
	}
	for _, tc := range tests {
		_, err := core.NewStrategy("ppl", core.NewParams("strategies[0]", tc.m), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want %q", tc.m, err, tc.want)
		}
	}
}

func TestConformance(t *testing.T) {
	for _, algo := range []string{"grpo", "ppo"} {
		t.Run(algo, func(t *testing.T) {
			strategytest.Run(t, func() core.Strategy {
				return build(t, map[string]any{"kappa": 2})
			}, strategytest.Options{Algorithm: algo, Seed: 11})
		})
	}
}
