package drgrpo

import (
	"math"
	"strings"
	"testing"

	_ "github.com/cde-rl/cde/algos/grpo" // registers grpo, whose keys dr_grpo rejects by name
	_ "github.com/cde-rl/cde/algos/ppo"  // registers ppo, whose keys dr_grpo rejects by name
	"github.com/cde-rl/cde/core"
)

const tol = 1e-12

func near(a, b float64) bool { return math.Abs(a-b) <= tol }

func seq(group, tokens int, shaped float64) core.Sequence {
	return core.Sequence{Group: group, Response: make([]int32, tokens), ShapedReward: shaped}
}

func TestAdvantages(t *testing.T) {
	tests := []struct {
		name string
		seqs []core.Sequence
		want []float64 // per sequence, on each of its tokens
	}{
		{
			name: "no std division",
			// [1, -1]: mean 0 -> ±1 (grpo would give ±1/(sqrt 2 + 1e-6)).
			seqs: []core.Sequence{seq(0, 2, 1), seq(0, 3, -1)},
			want: []float64{1, -1},
		},
		{
			name: "interleaved groups, mixed lengths, an empty response",
			// Group 4: [2, 0, 1] (2, 1 and 0 tokens), mean 1 -> 1, -1, 0.
			// Group 9: [0.5, -0.5] -> 0.5, -0.5.
			seqs: []core.Sequence{seq(4, 2, 2), seq(9, 1, 0.5), seq(4, 1, 0), seq(9, 4, -0.5), seq(4, 0, 1)},
			want: []float64{1, 0.5, -1, -0.5, 0},
		},
		{
			name: "group of one",
			seqs: []core.Sequence{seq(0, 2, 3), seq(1, 1, -1), seq(1, 1, 1)},
			want: []float64{0, -1, 1},
		},
		{
			name: "all equal",
			seqs: []core.Sequence{seq(0, 2, -1), seq(0, 1, -1), seq(0, 3, -1)},
			want: []float64{0, 0, 0},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := core.NewAlgorithm("dr_grpo", core.NewParams("algorithm", map[string]any{"name": "dr_grpo"}))
			if err != nil {
				t.Fatal(err)
			}
			if a.Name() != "dr_grpo" || a.NeedsCritic() {
				t.Fatalf("Name %q NeedsCritic %v", a.Name(), a.NeedsCritic())
			}
			r := &core.Rollout{Seqs: tc.seqs}
			for i := range r.Seqs {
				r.Seqs[i].Reward = 100 // must not be read: r~ is ShapedReward
			}
			if err := a.Advantages(r); err != nil {
				t.Fatal(err)
			}
			if err := a.Finalize(r); err != nil {
				t.Fatal(err)
			}
			for i, s := range r.Seqs {
				if len(s.Advantages) != s.Len() || len(s.Returns) != s.Len() {
					t.Fatalf("seq %d: %d advantages, %d returns for %d tokens", i, len(s.Advantages), len(s.Returns), s.Len())
				}
				for k := range s.Advantages {
					if !near(s.Advantages[k], tc.want[i]) || s.Returns[k] != s.Advantages[k] {
						t.Errorf("seq %d tok %d: A %v R %v, want %v", i, k, s.Advantages[k], s.Returns[k], tc.want[i])
					}
				}
			}
		})
	}
}

func TestErrors(t *testing.T) {
	a, err := core.NewAlgorithm("dr_grpo", core.NewParams("algorithm", nil))
	if err != nil {
		t.Fatal(err)
	}
	r := &core.Rollout{Seqs: []core.Sequence{seq(0, 1, 1), seq(0, 1, math.Inf(1))}}
	if err := a.Advantages(r); err == nil || !strings.Contains(err.Error(), "dr_grpo: sequence 1") {
		t.Fatalf("err = %v, want one naming dr_grpo and sequence 1", err)
	}
	for _, tc := range []struct {
		m    map[string]any
		want string
	}{
		// Dr. GRPO has no std, so grpo's keys are refused rather than ignored.
		{map[string]any{"norm_by_std": true}, "config: algorithm.norm_by_std: not a key of dr_grpo (it belongs to grpo)"},
		{map[string]any{"eps": 1e-6}, "config: algorithm.eps: not a key of dr_grpo (it belongs to grpo)"},
		{map[string]any{"lambda": 0.9}, "config: algorithm.lambda: not a key of dr_grpo (it belongs to ppo)"},
		{map[string]any{"loss_agg_mode": "seq-mean-token-sum-norm"}, "config: algorithm.loss_agg_mode: unknown key (the keys of dr_grpo: name)"},
	} {
		_, err := core.NewAlgorithm("dr_grpo", core.NewParams("algorithm", tc.m))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %s", tc.m, err, tc.want)
		}
	}
}
