package rloo

import (
	"math"
	"strings"
	"testing"

	_ "github.com/cde-rl/cde/algos/grpo" // registers grpo, whose keys rloo rejects by name
	_ "github.com/cde-rl/cde/algos/ppo"  // registers ppo, likewise
	"github.com/cde-rl/cde/core"
)

const tol = 1e-12

func near(a, b float64) bool { return math.Abs(a-b) <= tol }

func TestLeaveOneOut(t *testing.T) {
	tests := []struct {
		name    string
		rewards []float64
		groups  [][]int
		want    []float64
	}{
		{
			name:    "binary group of four",
			rewards: []float64{1, -1, -1, 1},
			groups:  [][]int{{0, 1, 2, 3}},
			// i=0: others [-1,-1,1], mean -1/3 -> 1 + 1/3 = 4/3.
			// i=1: others [1,-1,1], mean 1/3 -> -1 - 1/3 = -4/3.
			want: []float64{4.0 / 3, -4.0 / 3, -4.0 / 3, 4.0 / 3},
		},
		{
			name:    "group of three",
			rewards: []float64{3, 0, 6},
			groups:  [][]int{{0, 1, 2}},
			// i=0: (0+6)/2 = 3 -> 0; i=1: (3+6)/2 = 4.5 -> -4.5;
			// i=2: (3+0)/2 = 1.5 -> 4.5.
			want: []float64{0, -4.5, 4.5},
		},
		{
			name:    "interleaved groups and a group of one",
			rewards: []float64{2, 7, -1},
			groups:  [][]int{{0, 2}, {1}},
			// {0,2}: 2 - (-1) = 3 and -1 - 2 = -3; {1} alone -> 0.
			want: []float64{3, 0, -3},
		},
		{
			name:    "all equal",
			rewards: []float64{0.1, 0.1, 0.1},
			groups:  [][]int{{0, 1, 2}},
			want:    []float64{0, 0, 0},
		},
		{
			name:    "group of one",
			rewards: []float64{5},
			groups:  [][]int{{0}},
			want:    []float64{0},
		},
		{
			name:    "index in no group",
			rewards: []float64{5, 1, 3},
			groups:  [][]int{{1, 2}},
			// 1 - 3 = -2, 3 - 1 = 2; index 0 is in no group -> 0.
			want: []float64{0, -2, 2},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := LeaveOneOut(tc.rewards, tc.groups)
			if len(got) != len(tc.want) {
				t.Fatalf("len %d, want %d", len(got), len(tc.want))
			}
			for i := range got {
				if !near(got[i], tc.want[i]) {
					t.Errorf("A[%d] = %v, want %v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func build(t *testing.T, m map[string]any) core.Algorithm {
	t.Helper()
	a, err := core.NewAlgorithm("rloo", core.NewParams("algorithm", m))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestAdvantagesRollout(t *testing.T) {
	a := build(t, map[string]any{"name": "rloo"})
	if a.Name() != "rloo" || a.NeedsCritic() {
		t.Fatalf("Name %q NeedsCritic %v", a.Name(), a.NeedsCritic())
	}
	// Reward is deliberately wrong: RLOO must read ShapedReward. Responses
	// have 3, 1, 2, 0 and 2 valid tokens: each gets exactly that many
	// advantages (per-token slices hold valid tokens only; there is no padding).
	// Group 7: shaped [2, 0, 4]: i=0: 2 - (0+4)/2 = 0; i=2: 0 - (2+4)/2 = -3;
	// i=4: 4 - (2+0)/2 = 3. Group 3: shaped [5, 5] (one of them empty) -> 0.
	r := &core.Rollout{Seqs: []core.Sequence{
		{Group: 7, Response: []int32{1, 2, 3}, Reward: 100, ShapedReward: 2},
		{Group: 3, Response: []int32{1}, ShapedReward: 5},
		{Group: 7, Response: []int32{1, 2}, Reward: -100, ShapedReward: 0},
		{Group: 3, Response: []int32{}, ShapedReward: 5},
		{Group: 7, Response: []int32{4, 4}, ShapedReward: 4},
	}}
	if err := a.Advantages(r); err != nil {
		t.Fatal(err)
	}
	want := []float64{0, 0, -3, 0, 3}
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
	if err := a.Finalize(r); err != nil || r.Seqs[2].Advantages[0] != -3 {
		t.Fatalf("Finalize changed advantages or failed: %v", err)
	}
}

func TestAdvantagesNonFinite(t *testing.T) {
	a := build(t, nil)
	for _, bad := range []float64{math.NaN(), math.Inf(1)} {
		r := &core.Rollout{Seqs: []core.Sequence{{ShapedReward: 1}, {ShapedReward: bad}}}
		err := a.Advantages(r)
		if err == nil || !strings.Contains(err.Error(), "rloo: sequence 1") {
			t.Fatalf("%v: err = %v, want one naming rloo and sequence 1", bad, err)
		}
	}
}

func TestFactory(t *testing.T) {
	bad := []struct {
		m    map[string]any
		want string
	}{
		{map[string]any{"bogus": 1}, "config: algorithm.bogus: unknown key (the keys of rloo: name)"},
		{map[string]any{"norm_by_std": false}, "config: algorithm.norm_by_std: not a key of rloo (it belongs to grpo)"},
		{map[string]any{"whiten": true}, "config: algorithm.whiten: not a key of rloo (it belongs to ppo)"},
	}
	for _, tc := range bad {
		_, err := core.NewAlgorithm("rloo", core.NewParams("algorithm", tc.m))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %s", tc.m, err, tc.want)
		}
	}
}
