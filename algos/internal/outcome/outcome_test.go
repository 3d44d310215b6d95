package outcome

import (
	"math"
	"testing"
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

func TestGroupAdvantages(t *testing.T) {
	// Group [1,-1,-1,1]: mean 0, squared deviations 1+1+1+1 = 4,
	// sample var 4/3, std = 2/sqrt(3) = 1.1547005383792517.
	// A = ±1 / (2/sqrt(3) + 1e-6) ≈ ±0.866024654.
	s4 := 2 / math.Sqrt(3)
	a4 := 1 / (s4 + 1e-6)
	// Group [3,1] with eps 0: mean 2, ss = 1+1 = 2, var 2/1, std sqrt(2);
	// A = ±1/sqrt(2).
	tests := []struct {
		name    string
		rewards []float64
		groups  [][]int
		norm    bool
		eps     float64
		want    []float64
	}{
		{
			name:    "two groups, second constant",
			rewards: []float64{1, -1, -1, 1, 1, 1, 1},
			groups:  [][]int{{0, 1, 2, 3}, {4, 5, 6}},
			norm:    true, eps: 1e-6,
			// [1,1,1]: mean 1, every numerator 1-1 = 0 -> A = 0.
			want: []float64{a4, -a4, -a4, a4, 0, 0, 0},
		},
		{
			name:    "interleaved groups",
			rewards: []float64{3, 1, 1},
			groups:  [][]int{{0, 2}, {1}},
			norm:    true, eps: 0,
			// group {0,2} = [3,1] -> ±1/sqrt(2); group of one -> 0.
			want: []float64{1 / math.Sqrt(2), 0, -1 / math.Sqrt(2)},
		},
		{
			name:    "group of one",
			rewards: []float64{0.5},
			groups:  [][]int{{0}},
			norm:    true, eps: 1e-6,
			want: []float64{0},
		},
		{
			name:    "norm_by_std false",
			rewards: []float64{2, 0, 1, 5},
			groups:  [][]int{{0, 1, 2}, {3}},
			norm:    false, eps: 1e-6,
			// mean (2+0+1)/3 = 1 -> [1, -1, 0]; group of one -> 0.
			want: []float64{1, -1, 0, 0},
		},
		{
			name:    "constant group, eps 0",
			rewards: []float64{-1, -1},
			groups:  [][]int{{0, 1}},
			norm:    true, eps: 0,
			// numerator 0 and std 0: defined as 0, not NaN.
			want: []float64{0, 0},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := GroupAdvantages(tc.rewards, tc.groups, tc.norm, tc.eps)
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

func TestWhiten(t *testing.T) {
	s := 1 / math.Sqrt(1+1e-8)
	r := 2 / math.Sqrt(8+1e-8)
	tests := []struct {
		name string
		in   [][]float64
		want [][]float64
	}{
		{
			// entries 1,2,3: mean 2, ss = 1+0+1 = 2, var = 2/(3-1) = 1
			// -> (A-2)/sqrt(1+1e-8); the empty sequence stays empty.
			name: "three tokens over two sequences",
			in:   [][]float64{{1, 2}, {}, {3}},
			want: [][]float64{{-s, 0}, {}, {s}},
		},
		{
			// 0,4: mean 2, ss = 4+4 = 8, var = 8/1 = 8 -> ±2/sqrt(8+1e-8)
			name: "two tokens",
			in:   [][]float64{{0, 4}},
			want: [][]float64{{-r, r}},
		},
		{
			// one token: variance taken as 0, mean subtracted -> 0
			name: "single token",
			in:   [][]float64{{5}},
			want: [][]float64{{0}},
		},
		{name: "empty", in: [][]float64{{}, nil}, want: [][]float64{{}, nil}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			Whiten(tc.in)
			for i := range tc.want {
				eqs(t, "row", tc.in[i], tc.want[i])
			}
		})
	}
}
