// Package outcome holds what the outcome-reward estimators (the algorithms
// that give every token of a response one advantage, such as grpo, rloo and
// dr_grpo; not ppo, whose GAE works per token) share: reading one finite
// shaped reward per sequence (ShapedRewards), copying one number per
// sequence onto every valid token (Broadcast), and reading back the
// per-token advantages in Finalize (TokenAdvantages); and the two formulas
// more than one estimator uses: the group-centred (optionally
// std-normalised) advantage of grpo, dr_grpo and reinforce_pp_baseline
// (GroupAdvantages), and the batch whitening of reinforce_pp,
// reinforce_pp_baseline and ppo's Finalize (Whiten). A formula only one
// algorithm uses lives in its package; algos/grpo is the shortest user. A
// new algorithm under algos/ imports this package; one outside this module
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
// Returns[t] = returns[i] on each of its T valid tokens (fresh columns,
// core.Rollout.NewColumn; a sequence of no tokens gets empty windows). adv
// and returns hold one number per sequence.
func Broadcast(r *core.Rollout, adv, returns []float64) {
	r.NewColumn(1, func(s *core.Sequence) *[]float64 { return &s.Advantages })
	r.NewColumn(1, func(s *core.Sequence) *[]float64 { return &s.Returns })
	for i := range r.Seqs {
		s := &r.Seqs[i]
		for t := range s.Len() {
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

// GroupAdvantages returns one advantage per reward. groups lists the indices
// of rewards that share a prompt (as Rollout.Groups does); indices in no group
// get 0. A group of one gets 0. With normByStd the centred reward is divided
// by (sample std + eps); a zero denominator (all rewards equal and eps = 0)
// gives 0, since the numerator is then 0 too.
func GroupAdvantages(rewards []float64, groups [][]int, normByStd bool, eps float64) []float64 {
	adv := make([]float64, len(rewards))
	for _, idx := range groups {
		n := len(idx)
		if n < 2 {
			continue
		}
		group := make([]float64, n)
		for j, i := range idx {
			group[j] = rewards[i]
		}
		mean, std := core.Mean(group), core.SampleStd(group)
		for _, i := range idx {
			a := rewards[i] - mean
			if normByStd {
				den := std + eps
				if den == 0 {
					a = 0
				} else {
					a /= den
				}
			}
			adv[i] = a
		}
	}
	return adv
}

// WhitenEps is added to the variance before the square root in Whiten.
const WhitenEps = 1e-8

// Whiten normalises, in place, all entries of advs together:
// A = (A - mean) / sqrt(var + 1e-8), with var the sample variance (n-1).
// With no entries it does nothing; with a single entry the variance is taken
// as 0, so the entry becomes 0 (verl raises an error in that case).
func Whiten(advs [][]float64) {
	var all []float64
	for _, row := range advs {
		all = append(all, row...)
	}
	if len(all) == 0 {
		return
	}
	mean, variance := core.Mean(all), core.SampleVar(all)
	scale := 1 / math.Sqrt(variance+WhitenEps)
	for _, row := range advs {
		for t := range row {
			row[t] = (row[t] - mean) * scale
		}
	}
}
