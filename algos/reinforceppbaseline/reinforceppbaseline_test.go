package reinforceppbaseline

import (
	"math"
	"strings"
	"testing"

	_ "github.com/cde-rl/cde/algos/grpo" // registers grpo, whose keys reinforce_pp_baseline rejects by name
	_ "github.com/cde-rl/cde/algos/ppo"  // registers ppo, whose keys reinforce_pp_baseline rejects by name
	"github.com/cde-rl/cde/core"
)

const tol = 1e-12

func near(a, b float64) bool { return math.Abs(a-b) <= tol*(1+math.Abs(b)) }

func build(t *testing.T, m map[string]any) core.Algorithm {
	t.Helper()
	a, err := core.NewAlgorithm("reinforce_pp_baseline", core.NewParams("algorithm", m))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func seq(group, tokens int, shaped float64) core.Sequence {
	return core.Sequence{Group: group, Response: make([]int32, tokens), ShapedReward: shaped}
}

func TestAdvantagesAndWhitening(t *testing.T) {
	s := 1 / math.Sqrt(39.0/56+1e-8)
	tests := []struct {
		name     string
		seqs     []core.Sequence
		centred  [][]float64 // advantages before Finalize: r~_i - mean_g per token
		returns  [][]float64
		whitened [][]float64
	}{
		{
			name: "groups, a group of one, mixed lengths",
			// Group 0: shaped [1, -1, 0], mean 0 -> A' = 1, -1, 0 on 3, 1, 1 tokens.
			// Group 5 alone: shaped 3 -> A' = 0 on 2 tokens.
			// Group 7: shaped [2, 4] with 1 and 0 tokens, mean 3 -> A' = -1, (1 on no token).
			// Tokens: 1,1,1, -1, 0, 0,0, -1 -> n = 8, sum 1, mean 1/8.
			// Deviations 7/8 x3, -9/8 x2, -1/8 x3: squares (147 + 162 + 3)/64
			// = 312/64 = 39/8; sample var (39/8)/7 = 39/56.
			seqs:     []core.Sequence{seq(0, 3, 1), seq(0, 1, -1), seq(0, 1, 0), seq(5, 2, 3), seq(7, 1, 2), seq(7, 0, 4)},
			centred:  [][]float64{{1, 1, 1}, {-1}, {0}, {0, 0}, {-1}, {}},
			returns:  [][]float64{{1, 1, 1}, {-1}, {0}, {3, 3}, {2}, {}},
			whitened: [][]float64{{7.0 / 8 * s, 7.0 / 8 * s, 7.0 / 8 * s}, {-9.0 / 8 * s}, {-1.0 / 8 * s}, {-1.0 / 8 * s, -1.0 / 8 * s}, {-9.0 / 8 * s}, {}},
		},
		{
			name: "all-equal groups",
			// Every A' is 0, so the whitened advantages are (0 - 0) / sqrt(0 + 1e-8) = 0.
			seqs:     []core.Sequence{seq(0, 2, 1), seq(0, 1, 1), seq(1, 1, -1), seq(1, 3, -1)},
			centred:  [][]float64{{0, 0}, {0}, {0}, {0, 0, 0}},
			returns:  [][]float64{{1, 1}, {1}, {-1}, {-1, -1, -1}},
			whitened: [][]float64{{0, 0}, {0}, {0}, {0, 0, 0}},
		},
		{
			name: "equal group means, different lengths",
			// Group 0: [3, 1] -> A' = 1, -1 on 1 and 3 tokens; group 1: [0, -2] ->
			// 1, -1 on 2 and 2 tokens. Tokens 1, -1,-1,-1, 1,1, -1,-1: n = 8,
			// sum -2, mean -1/4; deviations 5/4 x3, -3/4 x5: squares
			// (75 + 45)/16 = 120/16 = 15/2; sample var (15/2)/7 = 15/14.
			seqs:     []core.Sequence{seq(0, 1, 3), seq(0, 3, 1), seq(1, 2, 0), seq(1, 2, -2)},
			centred:  [][]float64{{1}, {-1, -1, -1}, {1, 1}, {-1, -1}},
			returns:  [][]float64{{3}, {1, 1, 1}, {0, 0}, {-2, -2}},
			whitened: scaled([][]float64{{1.25}, {-0.75, -0.75, -0.75}, {1.25, 1.25}, {-0.75, -0.75}}, 1/math.Sqrt(15.0/14+1e-8)),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := build(t, nil)
			r := &core.Rollout{Seqs: tc.seqs}
			if err := a.Advantages(r); err != nil {
				t.Fatal(err)
			}
			for i, s := range r.Seqs {
				if len(s.Advantages) != len(tc.centred[i]) || len(s.Returns) != len(tc.centred[i]) {
					t.Fatalf("seq %d: %d advantages, %d returns, want %d", i, len(s.Advantages), len(s.Returns), len(tc.centred[i]))
				}
				for k := range tc.centred[i] {
					if !near(s.Advantages[k], tc.centred[i][k]) || s.Returns[k] != tc.returns[i][k] {
						t.Errorf("raw seq %d tok %d: A %v R %v, want %v and %v", i, k, s.Advantages[k], s.Returns[k], tc.centred[i][k], tc.returns[i][k])
					}
				}
			}
			if err := a.Finalize(r); err != nil {
				t.Fatal(err)
			}
			for i, s := range r.Seqs {
				for k := range tc.whitened[i] {
					if !near(s.Advantages[k], tc.whitened[i][k]) {
						t.Errorf("whitened seq %d tok %d: %.15g, want %.15g", i, k, s.Advantages[k], tc.whitened[i][k])
					}
				}
			}
		})
	}
}

func scaled(rows [][]float64, f float64) [][]float64 {
	for _, row := range rows {
		for k := range row {
			row[k] *= f
		}
	}
	return rows
}

func TestErrors(t *testing.T) {
	a := build(t, nil)
	r := &core.Rollout{Seqs: []core.Sequence{seq(0, 1, math.NaN())}}
	if err := a.Advantages(r); err == nil || !strings.Contains(err.Error(), "reinforce_pp_baseline: sequence 0") {
		t.Fatalf("err = %v, want one naming reinforce_pp_baseline and sequence 0", err)
	}
	r = &core.Rollout{Seqs: []core.Sequence{seq(0, 1, 1), seq(0, 2, 1)}}
	r.Seqs[0].Advantages = []float64{0}
	if err := a.Finalize(r); err == nil || !strings.Contains(err.Error(), "sequence 1: 0 advantages for 2 tokens") {
		t.Fatalf("err = %v, want one naming sequence 1", err)
	}
	for _, tc := range []struct {
		m    map[string]any
		want string
	}{
		{map[string]any{"norm_by_std": true}, "config: algorithm.norm_by_std: not a key of reinforce_pp_baseline (it belongs to grpo)"},
		{map[string]any{"whiten": false}, "config: algorithm.whiten: not a key of reinforce_pp_baseline (it belongs to ppo)"},
		{map[string]any{"bogus": 1}, "config: algorithm.bogus: unknown key (the keys of reinforce_pp_baseline: name)"},
	} {
		_, err := core.NewAlgorithm("reinforce_pp_baseline", core.NewParams("algorithm", tc.m))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %s", tc.m, err, tc.want)
		}
	}
}
