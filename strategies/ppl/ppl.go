// Package ppl implements the perplexity reward bonus of the CDE paper
// (docs/algorithms.md, "The exploration bonuses"), registered as strategy
// "ppl". It works with any algorithm.
//
// For a response of T valid tokens with old-policy log-probs logp_old(o_t)
// and verifier reward r:
//
//	B_actor = -(1/T) sum_t logp_old(o_t)          (the mean NLL, log perplexity)
//	bonus   = w_t * min(|r| / kappa, alpha * B_actor)
//	r~      = r + bonus
//
// so the bonus rewards uncertain (high-perplexity) responses, clipped at a
// fraction |r|/kappa of the reward. w_t is the weight schedule at
// (step, total_steps). A response with no tokens has B_actor = 0.
//
// Config keys: kappa (number > 0, default 3), alpha (number > 0, default 1),
// and the entry's weight (a schedule,
// default constant 1), which the trainer applies to what the strategy
// returns.
//
// Metrics (Observe): explore/ppl/clip_frac (fraction of responses whose
// bonus hit the |r|/kappa cap, i.e. |r|/kappa < alpha * B_actor); the
// trainer logs w_t as explore/ppl/weight.
package ppl

import (
	"fmt"
	"math"

	"github.com/cde-rl/cde/core"
)

func init() {
	core.RegisterStrategy("ppl", New)
}

// PPL is the perplexity bonus strategy. It keeps no state across steps.
type PPL struct {
	// Kappa scales the cap |r|/Kappa of the bonus.
	Kappa float64
	// Alpha scales the perplexity term alpha * B_actor.
	Alpha float64
}

// New builds PPL from a `strategies:` entry. It works with any algorithm.
func New(p *core.Params, _ core.Algorithm) (core.Strategy, error) {
	s := &PPL{
		Kappa: p.Float("kappa", 3),
		Alpha: p.Float("alpha", 1),
	}
	p.Check(s.Kappa > 0, "kappa", "must be > 0, got %v", s.Kappa)
	p.Check(s.Alpha > 0, "alpha", "must be > 0, got %v", s.Alpha)
	if err := p.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

// Name returns "ppl".
func (s *PPL) Name() string { return "ppl" }

// Needs asks for the old log-probs.
func (s *PPL) Needs() core.Needs { return core.Needs{LogProbs: true} }

// ActorBonus is B_actor = -(1/T) sum_t logProbs[t], 0 for T = 0.
func ActorBonus(logProbs []float64) float64 {
	if len(logProbs) == 0 {
		return 0
	}
	nll := 0.0
	for _, lp := range logProbs {
		nll -= lp
	}
	return nll / float64(len(logProbs))
}

// Bonus is min(|reward| / kappa, alpha * B_actor), before the weight, and
// whether the |reward|/kappa cap was the smaller term.
func (s *PPL) Bonus(reward float64, logProbs []float64) (bonus float64, capped bool) {
	limit := math.Abs(reward) / s.Kappa
	b := s.Alpha * ActorBonus(logProbs)
	if limit < b {
		return limit, true
	}
	return b, false
}

// RewardBonus returns min(|r_i| / kappa, alpha * B_actor,i) for every
// sequence i (the trainer multiplies it by w_t).
func (s *PPL) RewardBonus(info core.StepInfo, r *core.Rollout) ([]float64, error) {
	out := make([]float64, len(r.Seqs))
	for i := range r.Seqs {
		q := &r.Seqs[i]
		if len(q.LogProbs) != q.Len() {
			return nil, fmt.Errorf("ppl: sequence %d: %d log-probs for %d tokens", i, len(q.LogProbs), q.Len())
		}
		b, _ := s.Bonus(q.Reward, q.LogProbs)
		out[i] = b
	}
	return out, nil
}

// Observe reports the fraction of responses whose bonus was capped at
// |r|/kappa (the trainer logs the weight, explore/ppl/weight).
func (s *PPL) Observe(info core.StepInfo, r *core.Rollout) (map[string]float64, error) {
	m := map[string]float64{}
	if len(r.Seqs) > 0 {
		capped := 0
		for i := range r.Seqs {
			if _, c := s.Bonus(r.Seqs[i].Reward, r.Seqs[i].LogProbs); c {
				capped++
			}
		}
		m["explore/ppl/clip_frac"] = float64(capped) / float64(len(r.Seqs))
	}
	return m, nil
}
