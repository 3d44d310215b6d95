// Package entropy implements the entropy bonus (docs/algorithms.md, "The
// exploration bonuses"), a loss hook registered as strategy "entropy": the
// actor loss gets
//
//	loss -= w_t * coef * mean token entropy
//
// i.e. LossTerms.EntropyCoef = w_t * coef, with w_t the weight schedule at
// (step, total_steps). The backend computes the entropy inside the actor
// update; the strategy itself reads nothing from the rollout.
//
// Config keys: coef (number >= 0, default 0.001), and the entry's weight (a schedule,
// default constant 1), which the trainer applies to what the strategy
// returns.
package entropy

import (
	"github.com/cde-rl/cde/core"
)

func init() {
	core.RegisterStrategy("entropy", New)
}

// Entropy is the entropy-bonus strategy. It keeps no state across steps.
type Entropy struct {
	// Coef is the entropy coefficient before the weight.
	Coef float64
}

// New builds Entropy from a `strategies:` entry. It works with any algorithm.
func New(p *core.Params, _ core.Algorithm) (core.Strategy, error) {
	s := &Entropy{Coef: p.Float("coef", 0.001)}
	p.Check(s.Coef >= 0, "coef", "must be >= 0, got %v", s.Coef)
	if err := p.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

// Name returns "entropy".
func (s *Entropy) Name() string { return "entropy" }

// Needs asks for the per-token entropies.
func (s *Entropy) Needs() core.Needs { return core.Needs{Entropies: true} }

// LossTerms returns EntropyCoef = w_t * coef.
func (s *Entropy) LossTerms(info core.StepInfo) (core.LossTerms, error) {
	return core.LossTerms{EntropyCoef: s.Coef}, nil
}
