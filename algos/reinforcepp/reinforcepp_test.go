package reinforcepp

import (
	"math"
	"strings"
	"testing"

	_ "github.com/cde-rl/cde/algos/grpo" // registers grpo, whose keys reinforce_pp rejects by name
	_ "github.com/cde-rl/cde/algos/ppo"  // registers ppo, whose keys reinforce_pp rejects by name
	"github.com/cde-rl/cde/core"
)

const tol = 1e-12

func near(a, b float64) bool { return math.Abs(a-b) <= tol*(1+math.Abs(b)) }

func build(t *testing.T, m map[string]any) core.Algorithm {
	t.Helper()
	a, err := core.NewAlgorithm("reinforce_pp", core.NewParams("algorithm", m))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func seq(group, tokens int, shaped float64) core.Sequence {
	return core.Sequence{Group: group, Response: make([]int32, tokens), ShapedReward: shaped}
}

func TestAdvantagesAndWhitening(t *testing.T) {
	// Mixed lengths: the whitening runs over valid tokens, so a 3-token
	// response weighs three times a 1-token one.
	s1730 := 1 / math.Sqrt(17.0/30+1e-8)
	tests := []struct {
		name     string
		seqs     []core.Sequence
		raw      [][]float64 // advantages (= returns) before Finalize
		whitened [][]float64
	}{
		{
			name: "mixed lengths, groups ignored",
			// Tokens: [1, 1], [-1], [0, 0, 0], [] -> n = 6, sum 1, mean 1/6.
			// Deviations 5/6, 5/6, -7/6, -1/6 x3; squares 50/36 + 49/36 + 3/36
			// = 102/36 = 17/6; sample var (17/6)/5 = 17/30.
			// A = dev / sqrt(17/30 + 1e-8). The empty response adds nothing
			// (its reward 5 would move a per-sequence mean).
			seqs:     []core.Sequence{seq(0, 2, 1), seq(0, 1, -1), seq(1, 3, 0), seq(1, 0, 5)},
			raw:      [][]float64{{1, 1}, {-1}, {0, 0, 0}, {}},
			whitened: [][]float64{{5.0 / 6 * s1730, 5.0 / 6 * s1730}, {-7.0 / 6 * s1730}, {-1.0 / 6 * s1730, -1.0 / 6 * s1730, -1.0 / 6 * s1730}, {}},
		},
		{
			name: "groups of one",
			// Tokens [2], [-2]: mean 0, sample var (4+4)/1 = 8.
			seqs:     []core.Sequence{seq(0, 1, 2), seq(1, 1, -2)},
			raw:      [][]float64{{2}, {-2}},
			whitened: [][]float64{{2 / math.Sqrt(8+1e-8)}, {-2 / math.Sqrt(8+1e-8)}},
		},
		{
			name: "all equal",
			// var 0: (1 - 1) / sqrt(1e-8) = 0.
			seqs:     []core.Sequence{seq(0, 2, 1), seq(0, 1, 1)},
			raw:      [][]float64{{1, 1}, {1}},
			whitened: [][]float64{{0, 0}, {0}},
		},
		{
			name:     "one token in the batch",
			seqs:     []core.Sequence{seq(0, 1, 3), seq(0, 0, -1)},
			raw:      [][]float64{{3}, {}},
			whitened: [][]float64{{0}, {}},
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
				if len(s.Advantages) != len(tc.raw[i]) || len(s.Returns) != len(tc.raw[i]) {
					t.Fatalf("seq %d: %d advantages, %d returns, want %d", i, len(s.Advantages), len(s.Returns), len(tc.raw[i]))
				}
				for k := range tc.raw[i] {
					if s.Advantages[k] != tc.raw[i][k] || s.Returns[k] != tc.raw[i][k] {
						t.Errorf("raw seq %d tok %d: A %v R %v, want %v", i, k, s.Advantages[k], s.Returns[k], tc.raw[i][k])
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
					if s.Returns[k] != tc.raw[i][k] {
						t.Errorf("seq %d tok %d: return %v changed by Finalize", i, k, s.Returns[k])
					}
				}
			}
		})
	}
}

func TestErrors(t *testing.T) {
	a := build(t, nil)
	r := &core.Rollout{Seqs: []core.Sequence{seq(0, 1, 1), seq(0, 2, math.Inf(-1))}}
	if err := a.Advantages(r); err == nil || !strings.Contains(err.Error(), "reinforce_pp: sequence 1") {
		t.Fatalf("err = %v, want one naming reinforce_pp and sequence 1", err)
	}
	// Finalize before Advantages: no advantages for the tokens.
	r = &core.Rollout{Seqs: []core.Sequence{seq(0, 2, 1)}}
	if err := a.Finalize(r); err == nil || !strings.Contains(err.Error(), "sequence 0: 0 advantages for 2 tokens") {
		t.Fatalf("err = %v, want one naming sequence 0", err)
	}
	for _, tc := range []struct {
		m    map[string]any
		want string
	}{
		{map[string]any{"gamma": 0.9}, "config: algorithm.gamma: not a key of reinforce_pp (it belongs to ppo)"},
		{map[string]any{"eps": 0}, "config: algorithm.eps: not a key of reinforce_pp (it belongs to grpo)"},
		{map[string]any{"bogus": 1}, "config: algorithm.bogus: unknown key (the keys of reinforce_pp: name)"},
	} {
		_, err := core.NewAlgorithm("reinforce_pp", core.NewParams("algorithm", tc.m))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %s", tc.m, err, tc.want)
		}
	}
}
