package grpo

import (
	"math"
	"strings"
	"testing"

	_ "github.com/cde-rl/cde/algos/ppo" // registers ppo, whose keys grpo rejects by name
	"github.com/cde-rl/cde/core"
)

const tol = 1e-12

func near(a, b float64) bool { return math.Abs(a-b) <= tol }

func build(t *testing.T, m map[string]any) core.Algorithm {
	t.Helper()
	a, err := core.NewAlgorithm("grpo", core.NewParams("algorithm", m))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestAdvantagesRollout(t *testing.T) {
	a := build(t, nil)
	if a.Name() != "grpo" || a.NeedsCritic() {
		t.Fatalf("Name %q NeedsCritic %v", a.Name(), a.NeedsCritic())
	}
	// Groups 7 and 3 interleaved. Reward is deliberately wrong: GRPO must read
	// ShapedReward. Group 7: shaped [2, 0] -> mean 1, std sqrt(2), A = ±1/(sqrt2+1e-6).
	// Group 3: shaped [5, 5] -> 0.
	r := &core.Rollout{Seqs: []core.Sequence{
		{Group: 7, Response: []int32{1, 2, 3}, Reward: 100, ShapedReward: 2},
		{Group: 3, Response: []int32{1}, ShapedReward: 5},
		{Group: 7, Response: []int32{1, 2}, Reward: -100, ShapedReward: 0},
		{Group: 3, Response: []int32{}, ShapedReward: 5},
	}}
	if err := a.Advantages(r); err != nil {
		t.Fatal(err)
	}
	x := 1 / (math.Sqrt(2) + 1e-6)
	want := []float64{x, 0, -x, 0}
	for i, s := range r.Seqs {
		if len(s.Advantages) != s.Len() || len(s.Returns) != s.Len() {
			t.Fatalf("seq %d: %d advantages, %d returns for %d tokens", i, len(s.Advantages), len(s.Returns), s.Len())
		}
		for tok := range s.Advantages {
			if !near(s.Advantages[tok], want[i]) || s.Returns[tok] != s.Advantages[tok] {
				t.Errorf("seq %d tok %d: A %v R %v, want %v", i, tok, s.Advantages[tok], s.Returns[tok], want[i])
			}
		}
	}
	before := r.Seqs[0].Advantages[0]
	if err := a.Finalize(r); err != nil || r.Seqs[0].Advantages[0] != before {
		t.Fatalf("Finalize changed advantages or failed: %v", err)
	}
}

func TestAdvantagesNonFinite(t *testing.T) {
	a := build(t, nil)
	r := &core.Rollout{Seqs: []core.Sequence{{ShapedReward: 1}, {ShapedReward: math.NaN()}}}
	err := a.Advantages(r)
	if err == nil || !strings.Contains(err.Error(), "sequence 1") {
		t.Fatalf("err = %v, want one naming sequence 1", err)
	}
}

func TestFactory(t *testing.T) {
	a := build(t, map[string]any{"name": "grpo", "norm_by_std": false, "eps": 0.1})
	g := a.(*GRPO)
	if g.NormByStd || g.Eps != 0.1 {
		t.Fatalf("got %+v", g)
	}
	if d := build(t, nil).(*GRPO); !d.NormByStd || d.Eps != 1e-6 {
		t.Fatalf("defaults %+v", d)
	}
	bad := []struct {
		m    map[string]any
		want string
	}{
		{map[string]any{"bogus": 1}, "algorithm.bogus"},
		{map[string]any{"norm_by_std": 1}, "algorithm.norm_by_std"},
		{map[string]any{"eps": -1}, "algorithm.eps"},
		// ppo's keys are not grpo's, whatever their value.
		{map[string]any{"gamma": "x"}, "config: algorithm.gamma: not a key of grpo (it belongs to ppo)"},
		{map[string]any{"lambda": 0.95}, "config: algorithm.lambda: not a key of grpo (it belongs to ppo)"},
		{map[string]any{"whiten": false}, "config: algorithm.whiten: not a key of grpo (it belongs to ppo)"},
		{map[string]any{"bogus": 1}, "config: algorithm.bogus: unknown key (the keys of grpo: eps, name, norm_by_std)"},
	}
	for _, tc := range bad {
		_, err := core.NewAlgorithm("grpo", core.NewParams("algorithm", tc.m))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want it to name %s", tc.m, err, tc.want)
		}
	}
}
