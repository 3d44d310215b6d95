// Package simhash implements the SimHash count bonus (docs/algorithms.md,
// "The exploration bonuses"), a reward hook registered as strategy "simhash".
//
// Each response's pooled last-layer hidden state h (length d, pooled by
// `last`, `second_last` or `mean` over response tokens by the backend) is
// hashed to a k-bit code
//
//	code(h) = sign(A h),  bit i = 1 when (A h)_i >= 0,
//
// with A a k x d Gaussian (N(0,1)) or Rademacher (±1) matrix drawn once
// from projection_seed (d is fixed at first use). Codes are packed into a
// uint64 (bit i of the code is bit i of the integer). The counts n of every
// code persist across steps and in checkpoints. In batch order, for each
// response b:
//
//	n[code(h_b)] += 1
//	bonus_b = w_t * beta / sqrt(n[code(h_b)])
//
// so two identical responses in one batch get beta/1 and beta/sqrt(2).
// Counts advance even when w_t = 0.
//
// That is the paper's form. Under GRPO it can collapse training: in a group
// whose responses are all wrong, the count bonus is the only thing that
// differs between them, and the group's std normalisation turns it, however
// small, into the whole advantage (on the countdown testbed every arm at
// beta 1 and 0.1 went to 0% on every seed, docs/results/paper-countdown).
// Two options, off by default, bound it (ours, modelled on the PPL bonus's
// |r|/kappa cap):
//
//	kappa > 0:     bonus_b = w_t * min(beta / sqrt(n), |r_b| / kappa)
//	correct_only:  bonus_b = 0 for a response the verifier judged wrong
//
// (counts advance for every response either way). correct_only removes the
// mechanism above: an all-wrong group gets no bonus, so no advantage.
//
// Config keys: bits (integer in 1..64, default 16), beta (number > 0,
// default 1), projection (gaussian | rademacher, default gaussian),
// pooling (last | second_last | mean, default last), projection_seed
// (integer >= 0, default 1), kappa (number >= 0, default 0: no cap),
// correct_only (bool, default false), and the entry's weight (a schedule,
// default constant 1), which the trainer applies to what the strategy
// returns.
//
// Metrics (Observe): simhash/occupied_cells (distinct codes seen so far),
// simhash/max_count (largest count).
package simhash

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/cde-rl/cde/core"
)

func init() {
	core.RegisterStrategy("simhash", New)
}

// Projections and Poolings list the accepted values of those keys.
var (
	Projections = []string{"gaussian", "rademacher"}
	Poolings    = []string{"last", "second_last", "mean"}
)

// SimHash is the count-based bonus. It is Stateful: the counts (and d) are
// saved in checkpoints. Not safe for concurrent use.
type SimHash struct {
	// Bits is k, the code length.
	Bits int
	// Beta scales the bonus beta / sqrt(n).
	Beta float64
	// Projection is "gaussian" or "rademacher"; ProjectionSeed draws A.
	Projection     string
	ProjectionSeed uint64
	// Pooling is the embedding pooling asked of the backend.
	Pooling string
	// Kappa > 0 caps the bonus at |r|/Kappa (0: the paper's uncapped form).
	Kappa float64
	// CorrectOnly pays the bonus to correct responses only.
	CorrectOnly bool

	proj   [][]float64 // k x d; nil until the first embedding is seen
	fixed  bool        // proj given explicitly (NewWithProjection)
	counts map[uint64]int
}

// New builds SimHash from a `strategies:` entry. It works with any algorithm.
func New(p *core.Params, _ core.Algorithm) (core.Strategy, error) {
	s := &SimHash{
		Bits:        p.Int("bits", 16),
		Beta:        p.Float("beta", 1),
		Projection:  p.OneOf("projection", "gaussian", Projections...),
		Pooling:     p.OneOf("pooling", "last", Poolings...),
		Kappa:       p.Float("kappa", 0),
		CorrectOnly: p.Bool("correct_only", false),
		counts:      map[uint64]int{},
	}
	p.Check(s.Kappa >= 0 && !math.IsInf(s.Kappa, 0), "kappa", "must be a finite number >= 0 (0: no cap), got %v", s.Kappa)
	p.Check(s.Bits >= 1 && s.Bits <= 64, "bits", "must be in 1..64, got %d", s.Bits)
	p.Check(s.Beta > 0, "beta", "must be > 0, got %v", s.Beta)
	seed := p.Int("projection_seed", 1)
	p.Check(seed >= 0, "projection_seed", "must be >= 0, got %d", seed)
	s.ProjectionSeed = uint64(max(seed, 0))
	if err := p.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

// NewWithProjection builds a SimHash with an explicit k x d projection
// matrix A (k = len(a) in 1..64, every row of the same length d >= 1),
// pooling "last". It is meant for tests and offline analysis.
func NewWithProjection(a [][]float64, beta float64) (*SimHash, error) {
	if len(a) < 1 || len(a) > 64 {
		return nil, fmt.Errorf("simhash: projection has %d rows, want 1..64", len(a))
	}
	d := len(a[0])
	if d < 1 {
		return nil, fmt.Errorf("simhash: projection rows are empty")
	}
	proj := make([][]float64, len(a))
	for i, row := range a {
		if len(row) != d {
			return nil, fmt.Errorf("simhash: projection row %d has %d columns, want %d", i, len(row), d)
		}
		proj[i] = slices.Clone(row)
	}
	if !(beta > 0) {
		return nil, fmt.Errorf("simhash: beta must be > 0, got %v", beta)
	}
	return &SimHash{Bits: len(a), Beta: beta, Projection: "explicit", Pooling: "last",
		proj: proj, fixed: true, counts: map[uint64]int{}}, nil
}

// Name returns "simhash".
func (s *SimHash) Name() string { return "simhash" }

// Needs asks for embeddings pooled by s.Pooling and, with correct_only,
// the verifier's verdicts.
func (s *SimHash) Needs() core.Needs { return core.Needs{Pooling: s.Pooling, Correct: s.CorrectOnly} }

// Dim is d, the embedding length the projection was fixed to (0 before the
// first use).
func (s *SimHash) Dim() int {
	if s.proj == nil {
		return 0
	}
	return len(s.proj[0])
}

// projection draws the k x d matrix A from ProjectionSeed, row by row. The
// Gaussian entries use Box-Muller on PCG output (both fixed algorithms), so
// A does not depend on the Go release's NormFloat64.
func projection(kind string, seed uint64, k, d int) [][]float64 {
	rng := rand.New(rand.NewPCG(seed, 0x51a5a5))
	unit := func() float64 { return (float64(rng.Uint64()>>11) + 1) / (1 << 53) } // (0, 1]
	a := make([][]float64, k)
	for i := range a {
		a[i] = make([]float64, d)
		for j := range a[i] {
			if kind == "rademacher" {
				a[i][j] = float64(int(rng.Uint64()>>63)*2 - 1)
			} else {
				a[i][j] = math.Sqrt(-2*math.Log(unit())) * math.Cos(2*math.Pi*unit())
			}
		}
	}
	return a
}

// ensure fixes the projection for embeddings of length d.
func (s *SimHash) ensure(d int) error {
	if d == 0 {
		return fmt.Errorf("empty embedding (the backend must pool hidden states by %q)", s.Pooling)
	}
	if s.proj == nil {
		s.proj = projection(s.Projection, s.ProjectionSeed, s.Bits, d)
		return nil
	}
	if got := s.Dim(); got != d {
		return fmt.Errorf("embedding of length %d, but the projection was fixed to d = %d", d, got)
	}
	return nil
}

// Code returns the packed k-bit code of h: bit i is 1 when (A h)_i >= 0.
// The projection must be fixed for len(h) (see RewardBonus).
func (s *SimHash) Code(h []float64) uint64 {
	var code uint64
	for i, row := range s.proj {
		dot := 0.0
		for j, a := range row {
			dot += a * h[j]
		}
		if dot >= 0 {
			code |= 1 << uint(i)
		}
	}
	return code
}

// RewardBonus hashes every embedding, counts it, and returns
// w_t * beta / sqrt(n) with n the updated count of its code, in batch order
// (capped at w_t * |r|/kappa when kappa > 0; 0 for a wrong response with
// correct_only). On an error no count is changed.
func (s *SimHash) RewardBonus(info core.StepInfo, r *core.Rollout) ([]float64, error) {
	codes := make([]uint64, len(r.Seqs))
	for i := range r.Seqs {
		h := r.Seqs[i].Embedding
		if err := s.ensure(len(h)); err != nil {
			return nil, fmt.Errorf("simhash: sequence %d: %w", i, err)
		}
		for j, x := range h {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, fmt.Errorf("simhash: sequence %d: embedding[%d] = %v is not finite", i, j, x)
			}
		}
		codes[i] = s.Code(h)
	}
	out := make([]float64, len(r.Seqs))
	for i, c := range codes {
		s.counts[c]++
		b := s.Beta / math.Sqrt(float64(s.counts[c]))
		if s.Kappa > 0 {
			b = min(b, math.Abs(r.Seqs[i].Reward)/s.Kappa)
		}
		if s.CorrectOnly && !r.Seqs[i].Correct {
			b = 0
		}
		out[i] = b
	}
	return out, nil
}

// Observe reports simhash/occupied_cells and simhash/max_count.
func (s *SimHash) Observe(info core.StepInfo, r *core.Rollout) (map[string]float64, error) {
	most := 0
	for _, n := range s.counts {
		most = max(most, n)
	}
	return map[string]float64{
		"simhash/occupied_cells": float64(len(s.counts)),
		"simhash/max_count":      float64(most),
	}, nil
}

// Histogram returns a copy of the counts by code.
func (s *SimHash) Histogram() map[uint64]int {
	out := make(map[uint64]int, len(s.counts))
	for c, n := range s.counts {
		out[c] = n
	}
	return out
}

// CellCounts returns the count of every occupied cell, sorted descending.
func (s *SimHash) CellCounts() []int {
	out := make([]int, 0, len(s.counts))
	for _, n := range s.counts {
		out = append(out, n)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(out)))
	return out
}

// state is the checkpointed form: the settings that determine the codes
// (checked on load) and the counts sorted by code.
type state struct {
	Version    int         `json:"version"`
	Bits       int         `json:"bits"`
	Projection string      `json:"projection"`
	Seed       uint64      `json:"projection_seed"`
	Dim        int         `json:"dim"`
	Cells      [][2]uint64 `json:"cells"` // [code, count], sorted by code
}

// SaveState serialises the counts and d as JSON, cells sorted by code.
func (s *SimHash) SaveState() ([]byte, error) {
	st := state{Version: 1, Bits: s.Bits, Projection: s.Projection, Seed: s.ProjectionSeed, Dim: s.Dim(),
		Cells: make([][2]uint64, 0, len(s.counts))}
	for c, n := range s.counts {
		st.Cells = append(st.Cells, [2]uint64{c, uint64(n)})
	}
	sort.Slice(st.Cells, func(i, j int) bool { return st.Cells[i][0] < st.Cells[j][0] })
	return json.Marshal(st)
}

// LoadState restores counts saved by SaveState. The saved bits, projection
// and projection_seed must match the configuration: otherwise the codes
// would mean different cells.
func (s *SimHash) LoadState(data []byte) error {
	var st state
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("simhash: state: %w", err)
	}
	if st.Version != 1 {
		return fmt.Errorf("simhash: state version %d, want 1", st.Version)
	}
	if st.Bits != s.Bits || st.Projection != s.Projection || st.Seed != s.ProjectionSeed {
		return fmt.Errorf("simhash: state was saved with bits %d, projection %s, projection_seed %d; configured: bits %d, projection %s, projection_seed %d",
			st.Bits, st.Projection, st.Seed, s.Bits, s.Projection, s.ProjectionSeed)
	}
	if st.Dim < 0 {
		return fmt.Errorf("simhash: state dim %d", st.Dim)
	}
	counts := make(map[uint64]int, len(st.Cells))
	for _, cell := range st.Cells {
		if cell[1] == 0 || cell[1] > uint64(math.MaxInt) {
			return fmt.Errorf("simhash: state: count %d of cell %d out of range", cell[1], cell[0])
		}
		if _, dup := counts[cell[0]]; dup {
			return fmt.Errorf("simhash: state: cell %d listed twice", cell[0])
		}
		counts[cell[0]] = int(cell[1])
	}
	switch {
	case s.fixed:
		if st.Dim != 0 && st.Dim != s.Dim() {
			return fmt.Errorf("simhash: state has d = %d, projection has d = %d", st.Dim, s.Dim())
		}
	case st.Dim == 0:
		s.proj = nil
	default:
		s.proj = projection(s.Projection, s.ProjectionSeed, s.Bits, st.Dim)
	}
	s.counts = counts
	return nil
}
