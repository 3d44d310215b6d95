// Package ppo implements PPO advantages with GAE over a K-head critic
// (docs/algorithms.md), registered as algorithm "ppo".
//
// For a response of T valid tokens with shaped reward r~, let
// Vbar[t] = mean over the K heads of Values[t] (the value of the state in
// which token t is chosen), Vbar[T] = 0, and r_t = 0 except r_{T-1} = r~:
//
//	delta_t   = r_t + gamma * Vbar[t+1] - Vbar[t]
//	A_t       = delta_t + gamma * lambda * A_{t+1}      (A_T = 0)
//	returns_t = A_t + Vbar[t]
//
// Finalize (after the strategies' advantage bonuses) whitens the advantages
// over all valid tokens of the batch when `whiten` is on (verl's
// masked_whiten): A = (A - mean) / sqrt(var + 1e-8), var the sample variance
// (divisor n-1). The mean stays subtracted. Returns are not whitened.
//
// Config keys (`algorithm:` mapping, besides name): gamma (1.0), lambda
// (1.0), whiten (true). Another algorithm's key (norm_by_std or eps of
// grpo) is an error naming that algorithm.
package ppo

import (
	"fmt"
	"math"

	"github.com/cde-rl/cde/algos/internal/outcome"
	"github.com/cde-rl/cde/core"
)

func init() {
	core.RegisterAlgorithm("ppo", New, "gamma", "lambda", "whiten") // its keys besides name
}

// PPO computes GAE advantages from the critic's values.
type PPO struct {
	Gamma, Lambda float64
	Whiten        bool
}

// New builds PPO from the `algorithm:` params.
func New(p *core.Params) (core.Algorithm, error) {
	a := &PPO{
		Gamma:  p.Float("gamma", 1),
		Lambda: p.Float("lambda", 1),
		Whiten: p.Bool("whiten", true),
	}
	p.Check(a.Gamma >= 0 && a.Gamma <= 1, "gamma", "must be in [0, 1], got %v", a.Gamma)
	p.Check(a.Lambda >= 0 && a.Lambda <= 1, "lambda", "must be in [0, 1], got %v", a.Lambda)
	if err := p.Err(); err != nil {
		return nil, err
	}
	return a, nil
}

// Name returns "ppo".
func (a *PPO) Name() string { return "ppo" }

// NeedsCritic is true: GAE reads Sequence.Values.
func (a *PPO) NeedsCritic() bool { return true }

// Advantages sets the raw GAE advantages and the returns of every sequence.
// Values must hold T rows of K >= 1 finite numbers (K = r.ValueHeads when
// set); otherwise the error names the sequence.
func (a *PPO) Advantages(r *core.Rollout) error {
	for i := range r.Seqs {
		s := &r.Seqs[i]
		if err := checkValues(s, r.ValueHeads); err != nil {
			return fmt.Errorf("ppo: sequence %d: %w", i, err)
		}
		if math.IsNaN(s.ShapedReward) || math.IsInf(s.ShapedReward, 0) {
			return fmt.Errorf("ppo: sequence %d: shaped reward %v is not finite", i, s.ShapedReward)
		}
	}
	// One column each for the advantages and the returns (core/columns.go).
	r.NewColumn(1, func(s *core.Sequence) *[]float64 { return &s.Advantages })
	r.NewColumn(1, func(s *core.Sequence) *[]float64 { return &s.Returns })
	for i := range r.Seqs {
		s := &r.Seqs[i]
		GAEInto(s.Advantages, s.Returns, s.ShapedReward, s.Values, s.Heads(), a.Gamma, a.Lambda)
	}
	return nil
}

func checkValues(s *core.Sequence, heads int) error {
	T := s.Len()
	if T > 0 && s.Values == nil {
		return fmt.Errorf("missing critic values (Values is nil, want %d tokens x K heads)", T)
	}
	if T == 0 {
		if len(s.Values) != 0 {
			return fmt.Errorf("Values has %d entries for a response of no tokens", len(s.Values))
		}
		return nil
	}
	k := heads
	if k <= 0 {
		k = len(s.Values) / T
	}
	if k == 0 {
		return fmt.Errorf("Values has %d entries for %d tokens, want at least one head", len(s.Values), T)
	}
	if len(s.Values) != T*k {
		return fmt.Errorf("Values has %d entries, want %d tokens x %d heads = %d", len(s.Values), T, k, T*k)
	}
	for j, v := range s.Values {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("Values[%d][%d] = %v is not finite", j/k, j%k, v)
		}
	}
	return nil
}

// Finalize whitens the advantages of the whole batch when Whiten is set.
func (a *PPO) Finalize(r *core.Rollout) error {
	if !a.Whiten {
		return nil
	}
	advs := make([][]float64, len(r.Seqs))
	for i := range r.Seqs {
		s := &r.Seqs[i]
		if len(s.Advantages) != s.Len() {
			return fmt.Errorf("ppo: sequence %d: %d advantages for %d tokens", i, len(s.Advantages), s.Len())
		}
		advs[i] = s.Advantages
	}
	outcome.Whiten(advs)
	return nil
}

// GAE returns the per-token advantages and returns of one response (see the
// package doc). values holds k head values per token, flat (token t's are
// values[t*k : (t+1)*k]); k must be at least 1. gamma and lambda are not
// range-checked here.
func GAE(rewardLast float64, values []float64, k int, gamma, lambda float64) (adv, returns []float64) {
	T := len(values) / k
	adv, returns = make([]float64, T), make([]float64, T)
	GAEInto(adv, returns, rewardLast, values, k, gamma, lambda)
	return adv, returns
}

// GAEInto is GAE writing into adv and returns (each of T = len(values)/k
// entries).
func GAEInto(adv, returns []float64, rewardLast float64, values []float64, k int, gamma, lambda float64) {
	T := len(adv)
	next := 0.0  // Vbar[t+1]; Vbar[T] = 0
	nextA := 0.0 // A_{t+1}; A_T = 0
	for t := T - 1; t >= 0; t-- {
		vbar := 0.0
		for _, v := range values[t*k : (t+1)*k] {
			vbar += v
		}
		vbar /= float64(k)
		rt := 0.0
		if t == T-1 {
			rt = rewardLast
		}
		delta := rt + gamma*next - vbar
		adv[t] = delta + gamma*lambda*nextA
		returns[t] = adv[t] + vbar
		next, nextA = vbar, adv[t]
	}
}
