package simhash

import (
	"math"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/core/strategytest"
)

const tol = 1e-12

func build(t *testing.T, m map[string]any) *SimHash {
	t.Helper()
	s, err := core.NewStrategy("simhash", core.NewParams("strategies[0]", m), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s.(*SimHash)
}

func batch(hs ...[]float64) *core.Rollout {
	r := &core.Rollout{}
	for _, h := range hs {
		r.Seqs = append(r.Seqs, core.Sequence{Reward: 1, Embedding: h, Response: []int32{1}, LogProbs: []float64{-1}})
	}
	return r
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

// The hand-made 2-bit projection A = [[1,0,0],[0,1,0]] reads the first two
// coordinates of h: bit 0 = (h0 >= 0), bit 1 = (h1 >= 0).
var (
	proj = [][]float64{{1, 0, 0}, {0, 1, 0}}
	h1   = []float64{0.5, -2, 7}  // A h = (0.5, -2)  -> bits 1,0 -> code 0b01 = 1
	h2   = []float64{-1, 3, 0}    // A h = (-1, 3)    -> bits 0,1 -> code 0b10 = 2
	h3   = []float64{0, 0, 5}     // A h = (0, 0)     -> >= 0 is 1 -> code 0b11 = 3
	h4   = []float64{2, -0.1, -9} // A h = (2, -0.1)  -> code 1, h1's cell
	h5   = []float64{-3, -3, 1}   // A h = (-3, -3)   -> code 0
)

func TestHandProjection(t *testing.T) {
	s, err := NewWithProjection(proj, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		h    []float64
		code uint64
	}{{h1, 1}, {h2, 2}, {h3, 3}, {h4, 1}, {h5, 0}} {
		if got := s.Code(c.h); got != c.code {
			t.Errorf("Code(%v) = %d, want %d", c.h, got, c.code)
		}
	}

	// Step 0 of 4, beta = 2. Batch order h1, h2, h1, h4, h3:
	//	h1: n[1] = 1 -> 2/sqrt(1) = 2
	//	h2: n[2] = 1 -> 2
	//	h1: n[1] = 2 -> 2/sqrt(2) = sqrt(2)
	//	h4: n[1] = 3 -> 2/sqrt(3)
	//	h3: n[3] = 1 -> 2
	got, err := s.RewardBonus(core.StepInfo{Step: 0, TotalSteps: 4}, batch(h1, h2, h1, h4, h3))
	if err != nil {
		t.Fatal(err)
	}
	check(t, "step 0", got, []float64{2, 2, math.Sqrt2, 2 / math.Sqrt(3), 2})
	m, _ := s.Observe(core.StepInfo{}, nil)
	if m["simhash/occupied_cells"] != 3 || m["simhash/max_count"] != 3 {
		t.Errorf("metrics after step 0: %v", m)
	}

	// Step 2 of 4; counts persist:
	//	h2: n[2] = 2 -> 2/sqrt(2) = sqrt(2)
	//	h3: n[3] = 2 -> sqrt(2)
	got, _ = s.RewardBonus(core.StepInfo{Step: 2, TotalSteps: 4}, batch(h2, h3))
	check(t, "step 2", got, []float64{math.Sqrt2, math.Sqrt2})
	// Step 4 of 4: h5's cell is new: 2. (The entry's weight w_t, which the
	// trainer applies, never stops the counting.)
	got, _ = s.RewardBonus(core.StepInfo{Step: 4, TotalSteps: 4}, batch(h5))
	check(t, "step 4", got, []float64{2})

	// Counts now: code 1 -> 3, 2 -> 2, 3 -> 2, 0 -> 1.
	if cc := s.CellCounts(); len(cc) != 4 || cc[0] != 3 || cc[1] != 2 || cc[2] != 2 || cc[3] != 1 {
		t.Errorf("CellCounts = %v, want [3 2 2 1]", cc)
	}
	if h := s.Histogram(); len(h) != 4 || h[0] != 1 || h[1] != 3 || h[2] != 2 || h[3] != 2 {
		t.Errorf("Histogram = %v", h)
	}

	// State: JSON with cells [code, count] sorted by code.
	st, err := s.SaveState()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"version":1,"bits":2,"projection":"explicit","projection_seed":0,"dim":3,"cells":[[0,1],[1,3],[2,2],[3,2]]}`
	if string(st) != want {
		t.Errorf("state %s\nwant  %s", st, want)
	}
	restored, _ := NewWithProjection(proj, 2)
	if err := restored.LoadState(st); err != nil {
		t.Fatal(err)
	}
	// One more h4 at step 0 (w = 1): n[1] = 4 -> 2/sqrt(4) = 1, in both.
	for name, x := range map[string]*SimHash{"original": s, "restored": restored} {
		got, _ = x.RewardBonus(core.StepInfo{Step: 0, TotalSteps: 4}, batch(h4))
		check(t, name+" after round trip", got, []float64{1})
	}

	// A later embedding of another length is an error, and counts nothing.
	if _, err := s.RewardBonus(core.StepInfo{}, batch(h2, []float64{1, 2})); err == nil || !strings.Contains(err.Error(), "d = 3") {
		t.Errorf("d mismatch: %v", err)
	}
	if s.Histogram()[2] != 2 {
		t.Errorf("a failed call changed the counts: %v", s.Histogram())
	}
}

// The bounded forms, by hand, with the 2-bit projection, beta 2, w 1 and
// the batch h1 (r 1, correct), h1 (r -1, wrong), h1 (r 0.5, correct), h2
// (r -1, wrong). Uncapped: 2, 2/sqrt(2), 2/sqrt(3), 2. kappa 4 caps at
// |r|/4 = 0.25, 0.25, 0.125, 0.25, all below the uncapped bonus.
// correct_only zeroes the wrong ones. Counts advance for every response.
func TestBoundedBonus(t *testing.T) {
	rs := []struct {
		h       []float64
		reward  float64
		correct bool
	}{{h1, 1, true}, {h1, -1, false}, {h1, 0.5, true}, {h2, -1, false}}
	for _, c := range []struct {
		name        string
		kappa       float64
		correctOnly bool
		want        []float64
	}{
		{"paper's form", 0, false, []float64{2, math.Sqrt2, 2 / math.Sqrt(3), 2}},
		{"kappa 4", 4, false, []float64{0.25, 0.25, 0.125, 0.25}},
		{"correct_only", 0, true, []float64{2, 0, 2 / math.Sqrt(3), 0}},
		{"both", 4, true, []float64{0.25, 0, 0.125, 0}},
	} {
		s, err := NewWithProjection(proj, 2)
		if err != nil {
			t.Fatal(err)
		}
		s.Kappa, s.CorrectOnly = c.kappa, c.correctOnly
		r := &core.Rollout{}
		for _, x := range rs {
			r.Seqs = append(r.Seqs, core.Sequence{Reward: x.reward, Correct: x.correct, Embedding: x.h, Response: []int32{1}, LogProbs: []float64{-1}})
		}
		got, err := s.RewardBonus(core.StepInfo{Step: 0, TotalSteps: 4}, r)
		if err != nil {
			t.Fatal(err)
		}
		check(t, c.name, got, c.want)
		if h := s.Histogram(); h[1] != 3 || h[2] != 1 {
			t.Errorf("%s: counts %v, want every response counted", c.name, h)
		}
	}
	// The keys reach the fields.
	if s := build(t, map[string]any{"kappa": 3.0, "correct_only": true}); s.Kappa != 3 || !s.CorrectOnly {
		t.Errorf("kappa %v correct_only %v", s.Kappa, s.CorrectOnly)
	}
}

func TestSeededProjection(t *testing.T) {
	s := build(t, nil)
	if s.Bits != 16 || s.Beta != 1 || s.Projection != "gaussian" || s.Pooling != "last" || s.ProjectionSeed != 1 {
		t.Fatalf("defaults %+v", s)
	}
	if s.Needs() != (core.Needs{Pooling: "last"}) {
		t.Errorf("needs %+v", s.Needs())
	}
	// Same embedding twice in one batch: beta/1 then beta/sqrt(2); a third
	// time in the next step: beta/sqrt(3).
	h := []float64{0.3, -1.2, 0.8, 2.0, -0.5}
	got, err := s.RewardBonus(core.StepInfo{Step: 0, TotalSteps: 10}, batch(h, h))
	if err != nil {
		t.Fatal(err)
	}
	check(t, "twice", got, []float64{1, 1 / math.Sqrt2})
	got, _ = s.RewardBonus(core.StepInfo{Step: 1, TotalSteps: 10}, batch(h))
	check(t, "third", got, []float64{1 / math.Sqrt(3)})
	if s.Dim() != 5 {
		t.Errorf("Dim = %d", s.Dim())
	}
	if _, err := s.RewardBonus(core.StepInfo{}, batch([]float64{1, 2, 3})); err == nil {
		t.Error("d 5 then 3: no error")
	}
	if _, err := s.RewardBonus(core.StepInfo{}, batch(nil)); err == nil {
		t.Error("missing embedding: no error")
	}
	if _, err := s.RewardBonus(core.StepInfo{}, batch([]float64{1, 2, math.NaN(), 4, 5})); err == nil {
		t.Error("NaN embedding: no error")
	}

	// Same seed, same codes; the state restores the projection from the seed.
	st, _ := s.SaveState()
	b := build(t, nil)
	if err := b.LoadState(st); err != nil {
		t.Fatal(err)
	}
	if b.Dim() != 5 || b.Code(h) != s.Code(h) {
		t.Errorf("restored projection differs")
	}
	// Mismatched settings refuse the state.
	if err := build(t, map[string]any{"bits": 8}).LoadState(st); err == nil || !strings.Contains(err.Error(), "bits") {
		t.Errorf("bits mismatch: %v", err)
	}
	if err := build(t, map[string]any{"projection_seed": 2}).LoadState(st); err == nil {
		t.Error("seed mismatch: no error")
	}
	if err := b.LoadState([]byte("{")); err == nil {
		t.Error("bad JSON: no error")
	}

	// Rademacher entries are ±1; 64 bits use the top bit of the code.
	r := build(t, map[string]any{"projection": "rademacher", "bits": 64, "pooling": "mean"})
	if _, err := r.RewardBonus(core.StepInfo{}, batch(h)); err != nil {
		t.Fatal(err)
	}
	for _, row := range r.proj {
		for _, a := range row {
			if a != 1 && a != -1 {
				t.Fatalf("rademacher entry %v", a)
			}
		}
	}
	// code(-h) flips every bit whose (A h)_i != 0, so code(h) XOR code(-h)
	// is all ones when no projection is exactly 0.
	neg := make([]float64, len(h))
	for i := range h {
		neg[i] = -h[i]
	}
	if x := r.Code(h) ^ r.Code(neg); x != math.MaxUint64 {
		t.Errorf("code(h) xor code(-h) = %x, want all 64 bits", x)
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		m    map[string]any
		want string
	}{
		{map[string]any{"bits": 0}, "config: strategies[0].bits: must be in 1..64"},
		{map[string]any{"bits": 65}, "config: strategies[0].bits: must be in 1..64"},
		{map[string]any{"bits": 2.5}, "config: strategies[0].bits: want an integer"},
		{map[string]any{"beta": 0}, "config: strategies[0].beta: must be > 0"},
		{map[string]any{"pooling": "max"}, "config: strategies[0].pooling: unknown value \"max\""},
		{map[string]any{"projection": "uniform"}, "config: strategies[0].projection: unknown value \"uniform\""},
		{map[string]any{"projection_seed": -1}, "config: strategies[0].projection_seed: must be >= 0"},
		{map[string]any{"seed": 3}, "config: strategies[0].seed: unknown key"},
		{map[string]any{"kappa": -1}, "config: strategies[0].kappa: must be a finite number >= 0"},
		{map[string]any{"correct_only": "yes"}, "config: strategies[0].correct_only"},
		{map[string]any{"weight": map[string]any{"w0": 2}}, "config: strategies[0].weight: unknown key"},
	}
	for _, tc := range tests {
		_, err := core.NewStrategy("simhash", core.NewParams("strategies[0]", tc.m), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want %q", tc.m, err, tc.want)
		}
	}
	if _, err := NewWithProjection([][]float64{{1, 2}, {3}}, 1); err == nil {
		t.Error("ragged projection: no error")
	}
}

func TestConformance(t *testing.T) {
	for _, m := range []map[string]any{
		nil,
		{"bits": 4, "projection": "rademacher", "pooling": "mean"},
		{"bits": 64, "beta": 0.5, "projection_seed": 9},
		{"kappa": 3.0, "correct_only": true},
	} {
		strategytest.Run(t, func() core.Strategy { return build(t, m) }, strategytest.Options{Seed: 5, Steps: 4})
	}
	// The explicit-projection constructor conforms too (embedding dim 3).
	strategytest.Run(t, func() core.Strategy {
		s, err := NewWithProjection(proj, 1)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, strategytest.Options{EmbeddingDim: 3, Seed: 8})
}
