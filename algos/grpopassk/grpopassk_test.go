package grpopassk

import (
	"math"
	"strings"
	"testing"

	_ "github.com/cde-rl/cde/algos/grpo" // registers grpo, whose keys grpo_passk rejects by name
	"github.com/cde-rl/cde/core"
)

const tol = 1e-12

func near(a, b float64) bool { return math.Abs(a-b) <= tol*(1+math.Abs(b)) }

// bools turns "1001" into [true false false true].
func bools(s string) []bool {
	out := make([]bool, len(s))
	for i, ch := range s {
		out[i] = ch == '1'
	}
	return out
}

func TestGroupAdvantagesByHand(t *testing.T) {
	s5, s3 := math.Sqrt(5), math.Sqrt(3)
	tests := []struct {
		name    string
		correct string
		k       int
		want    []float64
	}{
		{
			// C(3,2)/C(4,2) = 3/6 -> Rbar = 1/2, sigma = 1/2; A_pos = (1/2)/(1/2) = 1;
			// C(2,1)/C(3,1) = 2/3 -> A_neg = (1 - 1/2 - 2/3)/(1/2) = -1/3.
			name: "N=4 c=1 k=2", correct: "0100", k: 2,
			want: []float64{-1.0 / 3, 1, -1.0 / 3, -1.0 / 3},
		},
		{
			// C(2,2)/C(4,2) = 1/6 -> Rbar = 5/6, sigma = sqrt(5/36) = sqrt5/6;
			// A_pos = (1/6)/(sqrt5/6) = 1/sqrt5; C(1,1)/C(3,1) = 1/3 ->
			// A_neg = (1/6 - 1/3)/(sqrt5/6) = -1/sqrt5.
			name: "N=4 c=2 k=2", correct: "1010", k: 2,
			want: []float64{1 / s5, -1 / s5, 1 / s5, -1 / s5},
		},
		{
			// C(4,4)/C(5,4) = 1/5 -> Rbar = 4/5, sigma = 2/5; A_pos = (1/5)/(2/5) = 1/2;
			// C(3,3)/C(4,3) = 1/4 -> A_neg = (1/5 - 1/4)/(2/5) = -1/8.
			name: "N=5 c=1 k=4 (default k)", correct: "00001", k: 4,
			want: []float64{-1.0 / 8, -1.0 / 8, -1.0 / 8, -1.0 / 8, 0.5},
		},
		{
			// k = 1: Rbar = c/N = 1/4, sigma = sqrt(3/16) = sqrt3/4; A_pos = (3/4)/(sqrt3/4)
			// = sqrt3; C(2,0)/C(3,0) = 1 -> A_neg = (3/4 - 1)/(sqrt3/4) = -1/sqrt3
			// (GRPO with the population std).
			name: "k=1 is GRPO with population std", correct: "0001", k: 1,
			want: []float64{-1 / s3, -1 / s3, -1 / s3, s3},
		},
		{
			// C(199,100)/C(200,100) = 100/200 -> Rbar = 1/2, sigma = 1/2, A_pos = 1;
			// C(198,99)/C(199,99) = 100/199 -> A_neg = (1/2 - 100/199)/(1/2) = -1/199.
			// (C(200,100) ~ 9e58: the products must not overflow.)
			name: "N=200 c=1 k=100", correct: "1" + strings.Repeat("0", 199), k: 100,
			want: append([]float64{1}, repeat(-1.0/199, 199)...),
		},
		{
			// N-c = 2 < k = 3: every subset holds a correct response, Rbar = 1, sigma = 0.
			name: "every subset passes", correct: "1100", k: 3,
			want: []float64{0, 0, 0, 0},
		},
		{name: "all correct", correct: "111", k: 2, want: []float64{0, 0, 0}},
		{name: "all incorrect", correct: "0000", k: 4, want: []float64{0, 0, 0, 0}},
		{name: "group of one, correct, k=1", correct: "1", k: 1, want: []float64{0}},
		{name: "group of one, incorrect, k=1", correct: "0", k: 1, want: []float64{0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := GroupAdvantages(bools(tc.correct), tc.k)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("len %d, want %d", len(got), len(tc.want))
			}
			for i := range got {
				if !near(got[i], tc.want[i]) {
					t.Errorf("A[%d] = %.15g, want %.15g", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func repeat(x float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = x
	}
	return out
}

// The definition the analytic form is derived from, as a plain loop: over
// all C(N,k) subsets S of the group, R_S = 1 if S holds a correct response;
// Rbar and sigma are their mean and population std; response i's advantage
// is the mean over the subsets holding i of (R_S - Rbar) / sigma (0 when
// sigma = 0).
func enumerated(correct []bool, k int) []float64 {
	n := len(correct)
	var subsets [][]int
	var rec func(start int, cur []int)
	rec = func(start int, cur []int) {
		if len(cur) == k {
			subsets = append(subsets, append([]int(nil), cur...))
			return
		}
		for i := start; i < n; i++ {
			rec(i+1, append(cur, i))
		}
	}
	rec(0, nil)
	reward := make([]float64, len(subsets))
	mean := 0.0
	for s, members := range subsets {
		for _, i := range members {
			if correct[i] {
				reward[s] = 1
			}
		}
		mean += reward[s]
	}
	mean /= float64(len(subsets))
	variance := 0.0
	for _, r := range reward {
		variance += (r - mean) * (r - mean)
	}
	std := math.Sqrt(variance / float64(len(subsets)))
	adv := make([]float64, n)
	if std == 0 {
		return adv
	}
	for i := range n {
		sum, count := 0.0, 0
		for s, members := range subsets {
			for _, m := range members {
				if m == i {
					sum += (reward[s] - mean) / std
					count++
				}
			}
		}
		adv[i] = sum / float64(count)
	}
	return adv
}

func TestGroupAdvantagesAgainstEnumeration(t *testing.T) {
	for n := 1; n <= 7; n++ {
		for c := 0; c <= n; c++ {
			// c correct responses, odd positions first, then even ones.
			var order []int
			for i := 1; i < n; i += 2 {
				order = append(order, i)
			}
			for i := 0; i < n; i += 2 {
				order = append(order, i)
			}
			correct := make([]bool, n)
			for _, i := range order[:c] {
				correct[i] = true
			}
			for k := 1; k <= n; k++ {
				got, err := GroupAdvantages(correct, k)
				if err != nil {
					t.Fatal(err)
				}
				want := enumerated(correct, k)
				for i := range got {
					if math.Abs(got[i]-want[i]) > 1e-9 {
						t.Errorf("N=%d correct=%v k=%d: A[%d] = %.15g, enumeration %.15g", n, correct, k, i, got[i], want[i])
					}
				}
			}
		}
	}
}

func TestAdvantagesRollout(t *testing.T) {
	a, err := core.NewAlgorithm("grpo_passk", core.NewParams("algorithm", map[string]any{"name": "grpo_passk", "k": 2}))
	if err != nil {
		t.Fatal(err)
	}
	if a.Name() != "grpo_passk" || a.NeedsCritic() || a.(*PassK).K != 2 {
		t.Fatalf("Name %q NeedsCritic %v %+v", a.Name(), a.NeedsCritic(), a)
	}
	// Group 8 (sequences 0, 2, 3, 5): correct 0,1,0,0 -> N=4 c=1 k=2: A_pos = 1,
	// A_neg = -1/3 (see TestGroupAdvantagesByHand). Group 1 (1, 4): both
	// incorrect -> 0. Reward and ShapedReward contradict Correct on purpose:
	// only the verdict counts. Lengths 2, 1, 3, 0, 1, 2.
	r := &core.Rollout{Seqs: []core.Sequence{
		{Group: 8, Response: make([]int32, 2), Reward: 1, ShapedReward: 1},
		{Group: 1, Response: make([]int32, 1), Reward: 1, ShapedReward: 1},
		{Group: 8, Response: make([]int32, 3), Correct: true, Reward: -1, ShapedReward: -1},
		{Group: 8, Response: nil, Reward: 1, ShapedReward: 1},
		{Group: 1, Response: make([]int32, 1), Reward: 1, ShapedReward: 1},
		{Group: 8, Response: make([]int32, 2), ShapedReward: math.NaN()},
	}}
	if err := a.Advantages(r); err != nil {
		t.Fatal(err)
	}
	if err := a.Finalize(r); err != nil {
		t.Fatal(err)
	}
	want := []float64{-1.0 / 3, 0, 1, -1.0 / 3, 0, -1.0 / 3}
	for i, s := range r.Seqs {
		if len(s.Advantages) != s.Len() || len(s.Returns) != s.Len() {
			t.Fatalf("seq %d: %d advantages, %d returns for %d tokens", i, len(s.Advantages), len(s.Returns), s.Len())
		}
		for k := range s.Advantages {
			if !near(s.Advantages[k], want[i]) || s.Returns[k] != s.Advantages[k] {
				t.Errorf("seq %d tok %d: A %v R %v, want %v", i, k, s.Advantages[k], s.Returns[k], want[i])
			}
		}
	}
}

func TestErrors(t *testing.T) {
	// The default k = 4 with a group of 3 (group 6) or of one (group 2).
	a, err := core.NewAlgorithm("grpo_passk", core.NewParams("algorithm", nil))
	if err != nil {
		t.Fatal(err)
	}
	if a.(*PassK).K != 4 {
		t.Fatalf("default k = %d, want 4", a.(*PassK).K)
	}
	for _, tc := range []struct {
		seqs []core.Sequence
		want string
	}{
		{[]core.Sequence{{Group: 6}, {Group: 6}, {Group: 6}}, "grpo_passk: group 6 (sequences [0 1 2]): algorithm.k = 4: must be in [1, N], N = 3"},
		{[]core.Sequence{{Group: 0}, {Group: 0}, {Group: 0}, {Group: 0}, {Group: 2}}, "grpo_passk: group 2 (sequences [4]): algorithm.k = 4: must be in [1, N], N = 1"},
	} {
		err := a.Advantages(&core.Rollout{Seqs: tc.seqs})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v, want %s", err, tc.want)
		}
	}
	for _, tc := range []struct {
		m    map[string]any
		want string
	}{
		{map[string]any{"k": 0}, "config: algorithm.k: must be >= 1"},
		{map[string]any{"k": -2}, "config: algorithm.k: must be >= 1"},
		{map[string]any{"k": 2.5}, "config: algorithm.k: want an integer"},
		{map[string]any{"k": "four"}, "config: algorithm.k: want an integer"},
		{map[string]any{"eps": 1e-6}, "config: algorithm.eps: not a key of grpo_passk (it belongs to grpo)"},
		{map[string]any{"n": 4}, "config: algorithm.n: unknown key (the keys of grpo_passk: k, name)"},
	} {
		_, err := core.NewAlgorithm("grpo_passk", core.NewParams("algorithm", tc.m))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %s", tc.m, err, tc.want)
		}
	}
}
