package ppo

import (
	"math"
	"strings"
	"testing"

	_ "github.com/cde-rl/cde/algos/grpo" // registers grpo, whose keys ppo rejects by name
	"github.com/cde-rl/cde/core"
)

const tol = 1e-12

func near(a, b float64) bool { return math.Abs(a-b) <= tol }

func eqs(t *testing.T, what string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: len %d, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !near(got[i], want[i]) {
			t.Errorf("%s[%d] = %.15g, want %.15g", what, i, got[i], want[i])
		}
	}
}

// T = 3, K = 2: values [[1,3],[0,2],[2,2]] -> Vbar = [2, 1, 2], Vbar[3] = 0;
// r = [0, 0, 1].
// vals holds 3 tokens x 2 heads, flat: rows [1 3], [0 2], [2 2].
var vals = []float64{1, 3, 0, 2, 2, 2}

func TestGAE(t *testing.T) {
	tests := []struct {
		name          string
		gamma, lambda float64
		adv, ret      []float64
	}{
		{
			name: "gamma=lambda=1", gamma: 1, lambda: 1,
			// delta_2 = 1 + 1*0 - 2 = -1
			// delta_1 = 0 + 1*2 - 1 = 1
			// delta_0 = 0 + 1*1 - 2 = -1
			// A_2 = -1; A_1 = 1 + (-1) = 0; A_0 = -1 + 0 = -1
			// returns = A + Vbar = [-1+2, 0+1, -1+2] = [1, 1, 1] (= r~ undiscounted)
			adv: []float64{-1, 0, -1},
			ret: []float64{1, 1, 1},
		},
		{
			name: "gamma=0.9 lambda=0.8", gamma: 0.9, lambda: 0.8,
			// gamma*lambda = 0.72
			// delta_2 = 1 + 0.9*0 - 2 = -1
			// delta_1 = 0 + 0.9*2 - 1 = 0.8
			// delta_0 = 0 + 0.9*1 - 2 = -1.1
			// A_2 = -1
			// A_1 = 0.8 + 0.72*(-1) = 0.08
			// A_0 = -1.1 + 0.72*0.08 = -1.1 + 0.0576 = -1.0424
			// returns = [-1.0424+2, 0.08+1, -1+2] = [0.9576, 1.08, 1]
			adv: []float64{-1.0424, 0.08, -1},
			ret: []float64{0.9576, 1.08, 1},
		},
		{
			name: "gamma=0", gamma: 0, lambda: 1,
			// delta_t = r_t - Vbar[t] = [-2, -1, 1-2]; A = delta (no bootstrapping)
			adv: []float64{-2, -1, -1},
			ret: []float64{0, 0, 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			adv, ret := GAE(1, vals, 2, tc.gamma, tc.lambda)
			eqs(t, "adv", adv, tc.adv)
			eqs(t, "ret", ret, tc.ret)
		})
	}
	if adv, ret := GAE(1, nil, 2, 1, 1); len(adv) != 0 || len(ret) != 0 {
		t.Fatalf("T=0: %v %v", adv, ret)
	}
}

func build(t *testing.T, m map[string]any) core.Algorithm {
	t.Helper()
	a, err := core.NewAlgorithm("ppo", core.NewParams("algorithm", m))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestRollout(t *testing.T) {
	a := build(t, nil)
	if a.Name() != "ppo" || !a.NeedsCritic() {
		t.Fatalf("Name %q NeedsCritic %v", a.Name(), a.NeedsCritic())
	}
	// seq 0: the T=3 example above with r~ = 1 (Reward ignored): A = [-1, 0, -1],
	// returns [1, 1, 1].
	// seq 1: T=1, values [[0.5, 1.5]] -> Vbar 1, r~ = -1: A = -1 + 0 - 1 = -2, ret -1.
	r := &core.Rollout{ValueHeads: 2, Seqs: []core.Sequence{
		{Response: []int32{1, 2, 3}, Reward: 7, ShapedReward: 1, Values: vals},
		{Response: []int32{4}, ShapedReward: -1, Values: []float64{0.5, 1.5}},
		{Response: nil, ShapedReward: 1}, // T = 0: no values needed
	}}
	if err := a.Advantages(r); err != nil {
		t.Fatal(err)
	}
	eqs(t, "A0", r.Seqs[0].Advantages, []float64{-1, 0, -1})
	eqs(t, "R0", r.Seqs[0].Returns, []float64{1, 1, 1})
	eqs(t, "A1", r.Seqs[1].Advantages, []float64{-2})
	eqs(t, "R1", r.Seqs[1].Returns, []float64{-1})
	// Whitening over -1, 0, -1, -2: mean -1, ss = 0+1+0+1 = 2, var = 2/3.
	// A = (A+1)/sqrt(2/3+1e-8) -> [0, k, 0, -k] with k = 1/sqrt(2/3+1e-8).
	if err := a.Finalize(r); err != nil {
		t.Fatal(err)
	}
	k := 1 / math.Sqrt(2.0/3+1e-8)
	eqs(t, "A0 whitened", r.Seqs[0].Advantages, []float64{0, k, 0})
	eqs(t, "A1 whitened", r.Seqs[1].Advantages, []float64{-k})
	eqs(t, "R0 not whitened", r.Seqs[0].Returns, []float64{1, 1, 1})

	// whiten: false leaves advantages alone.
	b := build(t, map[string]any{"whiten": false})
	r.Seqs[1].Advantages = []float64{3}
	if err := b.Finalize(r); err != nil || r.Seqs[1].Advantages[0] != 3 {
		t.Fatalf("whiten false: %v %v", err, r.Seqs[1].Advantages)
	}
	// A length mismatch is reported.
	r.Seqs[1].Advantages = nil
	if err := a.Finalize(r); err == nil || !strings.Contains(err.Error(), "sequence 1") {
		t.Fatalf("err = %v", err)
	}
}

func TestValuesErrors(t *testing.T) {
	a := build(t, nil)
	// Sequence 0 has no tokens, so it is valid whatever ValueHeads says.
	good := core.Sequence{ShapedReward: 1}
	tests := []struct {
		name  string
		heads int
		bad   core.Sequence
		want  string
	}{
		{"missing", 0, core.Sequence{Response: []int32{1, 2}}, "missing"},
		{"too few values", 0, core.Sequence{Response: []int32{1, 2}, Values: []float64{1}}, "1 entries for 2 tokens, want at least one head"},
		{"not a multiple of T", 0, core.Sequence{Response: []int32{1, 2}, Values: []float64{1, 2, 3}}, "3 entries, want 2 tokens x 1 heads = 2"},
		{"heads mismatch", 3, core.Sequence{Response: []int32{1}, Values: []float64{1, 2}}, "2 entries, want 1 tokens x 3 heads = 3"},
		{"values without tokens", 0, core.Sequence{Values: []float64{1}}, "1 entries for a response of no tokens"},
		{"nan at token 1 head 0", 2, core.Sequence{Response: []int32{1, 2}, Values: []float64{1, 2, math.NaN(), 3}}, "Values[1][0] = NaN is not finite"},
		{"reward inf", 0, core.Sequence{Response: []int32{1}, Values: []float64{1}, ShapedReward: math.Inf(1)}, "not finite"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &core.Rollout{ValueHeads: tc.heads, Seqs: []core.Sequence{good, tc.bad}}
			err := a.Advantages(r)
			if err == nil || !strings.Contains(err.Error(), "sequence 1") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming sequence 1 and %q", err, tc.want)
			}
		})
	}
}

func TestFactory(t *testing.T) {
	p := build(t, map[string]any{"name": "ppo", "gamma": 0.99, "lambda": 0.95, "whiten": false}).(*PPO)
	if p.Gamma != 0.99 || p.Lambda != 0.95 || p.Whiten {
		t.Fatalf("got %+v", p)
	}
	if d := build(t, nil).(*PPO); d.Gamma != 1 || d.Lambda != 1 || !d.Whiten {
		t.Fatalf("defaults %+v", d)
	}
	bad := []struct {
		m    map[string]any
		want string
	}{
		{map[string]any{"gamma": 1.5}, "algorithm.gamma"},
		{map[string]any{"lambda": -0.1}, "algorithm.lambda"},
		{map[string]any{"whiten": "maybe"}, "algorithm.whiten"},
		// grpo's keys are not ppo's, whatever their value.
		{map[string]any{"eps": 1e-6}, "config: algorithm.eps: not a key of ppo (it belongs to grpo)"},
		{map[string]any{"norm_by_std": true}, "config: algorithm.norm_by_std: not a key of ppo (it belongs to grpo)"},
		{map[string]any{"bogus": 1}, "config: algorithm.bogus: unknown key (the keys of ppo: gamma, lambda, name, whiten)"},
	}
	for _, tc := range bad {
		_, err := core.NewAlgorithm("ppo", core.NewParams("algorithm", tc.m))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want it to name %s", tc.m, err, tc.want)
		}
	}
}
