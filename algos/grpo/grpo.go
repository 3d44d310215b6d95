// Package grpo implements Group Relative Policy Optimization advantages
// (docs/algorithms.md), registered as algorithm "grpo".
//
// For response i of a prompt group g with G responses and shaped rewards r~:
//
//	A_i = (r~_i - mean_g) / (std_g + eps)   (norm_by_std: true, the default)
//	A_i =  r~_i - mean_g                    (norm_by_std: false)
//
// where std_g is the sample standard deviation (divisor G-1) of the group's
// shaped rewards and eps defaults to 1e-6. A group of one response gets A = 0.
// A_i is copied to every valid token of the response.
//
// Config keys (`algorithm:` mapping, besides name): norm_by_std (bool,
// true), eps (number, 1e-6). GRPO advantages are never whitened and there
// is no per-token discounting, so another algorithm's key (gamma, lambda,
// whiten of ppo) is an error naming that algorithm.
package grpo

import (
	"github.com/cde-rl/cde/algos/internal/outcome"
	"github.com/cde-rl/cde/core"
)

func init() {
	core.RegisterAlgorithm("grpo", New, "norm_by_std", "eps") // its keys besides name
}

// GRPO is the group-normalised advantage estimator.
type GRPO struct {
	NormByStd bool
	Eps       float64
}

// New builds GRPO from the `algorithm:` params.
func New(p *core.Params) (core.Algorithm, error) {
	g := &GRPO{
		NormByStd: p.Bool("norm_by_std", true),
		Eps:       p.Float("eps", 1e-6),
	}
	p.Check(g.Eps >= 0, "eps", "must be >= 0, got %v", g.Eps)
	if err := p.Err(); err != nil {
		return nil, err
	}
	return g, nil
}

// Name returns "grpo".
func (g *GRPO) Name() string { return "grpo" }

// NeedsCritic is false: GRPO reads no values.
func (g *GRPO) NeedsCritic() bool { return false }

// Advantages sets every token of sequence i to A_i (see the package doc).
// Returns are set equal to Advantages (GRPO has no critic; the slice exists
// only so that downstream code can rely on it being populated). The shaped
// rewards are read, and A_i copied onto the tokens, by algos/internal/outcome,
// as every outcome-reward estimator does; the formula is
// outcome.GroupAdvantages.
func (g *GRPO) Advantages(r *core.Rollout) error {
	rewards, err := outcome.ShapedRewards("grpo", r)
	if err != nil {
		return err
	}
	adv := outcome.GroupAdvantages(rewards, r.Groups(), g.NormByStd, g.Eps)
	outcome.Broadcast(r, adv, adv)
	return nil
}

// Finalize is a no-op: GRPO advantages are never whitened.
func (g *GRPO) Finalize(r *core.Rollout) error { return nil }
