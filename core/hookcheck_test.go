package core

import (
	"math"
	"testing"
)

// wantCheck fails unless err is nil when want is "", or has exactly the
// message want.
func wantCheck(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("err = %v, want nil", err)
	case want != "" && err == nil:
		t.Fatalf("err = nil, want %q", want)
	case want != "" && err.Error() != want:
		t.Fatalf("err = %q, want %q", err, want)
	}
}

func TestCheckRewardBonus(t *testing.T) {
	tests := []struct {
		name  string
		n     int
		bonus []float64
		want  string
	}{
		{"ok", 3, []float64{0, -1.5, 2}, ""},
		{"empty batch", 0, nil, ""},
		{"short", 3, []float64{1, 2}, "2 bonuses for 3 sequences"},
		{"long", 1, []float64{1, 2}, "2 bonuses for 1 sequences"},
		{"nan", 2, []float64{0, math.NaN()}, "non-finite bonus NaN for sequence 1"},
		{"inf", 3, []float64{math.Inf(-1), 0, math.Inf(1)}, "non-finite bonus -Inf for sequence 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { wantCheck(t, CheckRewardBonus(tc.n, tc.bonus), tc.want) })
	}
}

func TestCheckAdvantageBonus(t *testing.T) {
	lens := []int{2, 0, 3}
	tests := []struct {
		name string
		rows [][]float64
		want string
	}{
		{"ok", [][]float64{{1, 2}, nil, {0, 0, -3}}, ""},
		{"empty row as slice", [][]float64{{1, 2}, {}, {0, 0, -3}}, ""},
		{"missing row", [][]float64{{1, 2}, nil}, "2 rows for 3 sequences"},
		{"short row", [][]float64{{1, 2}, nil, {0, 0}}, "sequence 2: 2 bonuses for 3 tokens"},
		{"row for an empty sequence", [][]float64{{1, 2}, {5}, {0, 0, 0}}, "sequence 1: 1 bonuses for 0 tokens"},
		{"nan", [][]float64{{1, 2}, nil, {0, math.NaN(), 0}}, "non-finite bonus NaN at sequence 2 token 1"},
		{"inf first", [][]float64{{math.Inf(1), 2}, nil, {0, 0, 0}}, "non-finite bonus +Inf at sequence 0 token 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { wantCheck(t, CheckAdvantageBonus(lens, tc.rows), tc.want) })
	}
}

func TestCheckHeadMasks(t *testing.T) {
	lens := []int{2, 1}
	tests := []struct {
		name  string
		masks [][]float64
		k     int
		want  string
	}{
		{"ok", [][]float64{{1, 0, 0, 1}, {0.5, 2}}, 2, ""},
		{"nil mask: every head", [][]float64{nil, {1, 1}}, 2, ""},
		{"one mask missing", [][]float64{{1, 0, 0, 1}}, 2, "1 masks for 2 sequences"},
		{"short mask", [][]float64{{1, 0}, {1, 1}}, 2, "sequence 0: 2 entries for 2 tokens x K = 2 heads"},
		{"K-1 for the last token", [][]float64{{1, 0, 0, 1}, {1}}, 2, "sequence 1: 1 entries for 1 tokens x K = 2 heads"},
		{"one entry too many", [][]float64{{1, 0, 0, 1, 1}, nil}, 2, "sequence 0: 5 entries for 2 tokens x K = 2 heads"},
		{"negative", [][]float64{{1, 0, 0, -1}, nil}, 2, "sequence 0 token 1 head 1: -1 is not a finite weight >= 0"},
		{"nan", [][]float64{nil, {1, math.NaN()}}, 2, "sequence 1 token 0 head 1: NaN is not a finite weight >= 0"},
		{"inf", [][]float64{nil, {math.Inf(1), 0}}, 2, "sequence 1 token 0 head 0: +Inf is not a finite weight >= 0"},
		{"negative zero is a weight", [][]float64{nil, {math.Copysign(0, -1), 0}}, 2, ""},
		{"token 1 head 0 of K = 3", [][]float64{{1, 1, 1, -2, 1, 1}, nil}, 3, "sequence 0 token 1 head 0: -2 is not a finite weight >= 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { wantCheck(t, CheckHeadMasks(lens, tc.masks, tc.k), tc.want) })
	}
}

func TestCheckLossTerms(t *testing.T) {
	tests := []struct {
		coef float64
		want string
	}{
		{0, ""},
		{0.001, ""},
		{-2, ""}, // a sign is the strategy's business; only finiteness is checked
		{math.NaN(), "non-finite entropy coefficient NaN"},
		{math.Inf(-1), "non-finite entropy coefficient -Inf"},
	}
	for _, tc := range tests {
		wantCheck(t, CheckLossTerms(LossTerms{EntropyCoef: tc.coef}), tc.want)
	}
}

func TestCheckObserve(t *testing.T) {
	tests := []struct {
		name string
		m    map[string]float64
		want string
	}{
		{"nil", nil, ""},
		{"ok", map[string]float64{"explore/x/a": 1, "b": -0.5}, ""},
		{"empty name", map[string]float64{"": 1, "a": 2}, "empty metric name"},
		{"nan", map[string]float64{"a": 1, "b": math.NaN()}, "metric b = NaN is not finite"},
		// Sorted order: "a" is reported before "z" whatever the map order.
		{"first in sorted order", map[string]float64{"z": math.Inf(1), "a": math.Inf(-1)}, "metric a = -Inf is not finite"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { wantCheck(t, CheckObserve(tc.m), tc.want) })
	}
}

func TestSeqLens(t *testing.T) {
	r := &Rollout{Seqs: []Sequence{{Response: []int32{1, 2, 3}}, {}, {Response: []int32{4}}}}
	got := r.SeqLens()
	if len(got) != 3 || got[0] != 3 || got[1] != 0 || got[2] != 1 {
		t.Fatalf("SeqLens = %v, want [3 0 1]", got)
	}
}
