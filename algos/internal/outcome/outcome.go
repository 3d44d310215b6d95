// Package outcome holds what the outcome-reward estimators (the algorithms
// that give every token of a response one advantage, such as grpo, rloo and
// dr_grpo; not ppo, whose GAE works per token) share: reading one finite
// shaped reward per sequence (ShapedRewards), copying one number per
// sequence onto every valid token (Broadcast), and reading back the
// per-token advantages in Finalize (TokenAdvantages). The formulas
// themselves live in each algorithm's package; algos/grpo is the shortest
// user. A new algorithm under algos/ imports it; one outside this module
// cannot (it is internal) and copies the few lines instead.
package outcome

import (
	"fmt"
	"math"

	"github.com/cde-rl/cde/core"
)

// ShapedRewards returns r~_i = Seqs[i].ShapedReward for every sequence; a
// NaN or infinite one is an error naming the algorithm and the sequence.
func ShapedRewards(algo string, r *core.Rollout) ([]float64, error) {
	rewards := make([]float64, len(r.Seqs))
	for i := range r.Seqs {
		rw := r.Seqs[i].ShapedReward
		if math.IsNaN(rw) || math.IsInf(rw, 0) {
			return nil, fmt.Errorf("%s: sequence %d: shaped reward %v is not finite", algo, i, rw)
		}
		rewards[i] = rw
	}
	return rewards, nil
}

// Broadcast sets, for every sequence i, Advantages[t] = adv[i] and
// Returns[t] = returns[i] on each of its T valid tokens (fresh slices of
// length T; a sequence of no tokens gets empty ones). adv and returns hold
// one number per sequence.
func Broadcast(r *core.Rollout, adv, returns []float64) {
	for i := range r.Seqs {
		s := &r.Seqs[i]
		T := s.Len()
		s.Advantages = make([]float64, T)
		s.Returns = make([]float64, T)
		for t := range T {
			s.Advantages[t] = adv[i]
			s.Returns[t] = returns[i]
		}
	}
}

// TokenAdvantages returns every sequence's Advantages, checking that each
// holds one entry per valid token (as Finalize expects after Advantages and
// the strategies' bonuses); the error names the algorithm and the sequence.
func TokenAdvantages(algo string, r *core.Rollout) ([][]float64, error) {
	advs := make([][]float64, len(r.Seqs))
	for i := range r.Seqs {
		s := &r.Seqs[i]
		if len(s.Advantages) != s.Len() {
			return nil, fmt.Errorf("%s: sequence %d: %d advantages for %d tokens", algo, i, len(s.Advantages), s.Len())
		}
		advs[i] = s.Advantages
	}
	return advs, nil
}
