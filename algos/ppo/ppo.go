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
		s.Advantages, s.Returns = GAE(s.ShapedReward, s.Values, a.Gamma, a.Lambda)
	}
	return nil
}

func checkValues(s *core.Sequence, heads int) error {
	T := s.Len()
	if T > 0 && s.Values == nil {
		return fmt.Errorf("missing critic values (Values is nil, want %d rows)", T)
	}
	if len(s.Values) != T {
		return fmt.Errorf("Values has %d rows, want one per token (%d)", len(s.Values), T)
	}
	if T == 0 {
		return nil
	}
	k := heads
	if k <= 0 {
		k = len(s.Values[0])
	}
	if k == 0 {
		return fmt.Errorf("Values[0] is empty, want at least one head")
	}
	for t, row := range s.Values {
		if len(row) != k {
			return fmt.Errorf("Values[%d] has %d heads, want %d", t, len(row), k)
		}
		for j, v := range row {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("Values[%d][%d] = %v is not finite", t, j, v)
			}
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
// package doc). values has one row per token; each row holds the K head
// values and must be non-empty. gamma and lambda are not range-checked here.
func GAE(rewardLast float64, values [][]float64, gamma, lambda float64) (adv, returns []float64) {
	T := len(values)
	adv = make([]float64, T)
	returns = make([]float64, T)
	next := 0.0  // Vbar[t+1]; Vbar[T] = 0
	nextA := 0.0 // A_{t+1}; A_T = 0
	for t := T - 1; t >= 0; t-- {
		vbar := 0.0
		for _, v := range values[t] {
			vbar += v
		}
		vbar /= float64(len(values[t]))
		rt := 0.0
		if t == T-1 {
			rt = rewardLast
		}
		delta := rt + gamma*next - vbar
		adv[t] = delta + gamma*lambda*nextA
		returns[t] = adv[t] + vbar
		next, nextA = vbar, adv[t]
	}
	return adv, returns
}
