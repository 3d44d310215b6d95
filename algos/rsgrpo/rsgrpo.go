// Package rsgrpo implements the risk-seeking advantage of RS-GRPO,
// registered as algorithm "rs_grpo": Jiang et al. 2025, "Risk-Sensitive RL
// for Alleviating Exploration Dilemmas in Large Language Models", arXiv
// 2509.24261 (ICLR 2026). It is the policy gradient of the objective
// (1/beta) log E[exp(beta r)], which moves from the mean reward (beta -> 0)
// toward the best reward of a group (beta -> infinity).
//
// For response i of a prompt group g with shaped reward r~_i:
//
//	w_i = exp(beta (r~_i - max_g r~)) / mean_g exp(beta (r~_j - max_g r~))
//	A_i = (w_i - 1) / beta
//
// (subtracting the group's maximum changes no w_i and keeps exp from
// overflowing). As beta -> 0, A_i -> r~_i - mean_g r~. A_i is copied to
// every valid token, Returns equal the advantages, and they are never
// whitened.
//
// Config keys (`algorithm:` mapping, besides name): beta (> 0, default 1).
// The authors recommend beta = 2 for rewards in {0, 1}; w depends on beta
// times reward differences, so with cde's default rewards of +1 and -1 (a
// range of 2) beta = 1 gives the same weights, and advantages twice as
// large, as every unnormalised estimator's scale with the reward range.
package rsgrpo

import (
	"math"

	"github.com/cde-rl/cde/algos/internal/outcome"
	"github.com/cde-rl/cde/core"
)

func init() {
	core.RegisterAlgorithm("rs_grpo", New, "beta") // its keys besides name
}

// RSGRPO is the risk-seeking estimator.
type RSGRPO struct {
	// Beta is the risk-seeking strength beta.
	Beta float64
}

// New builds RS-GRPO from the `algorithm:` params.
func New(p *core.Params) (core.Algorithm, error) {
	a := &RSGRPO{Beta: p.Float("beta", 1)}
	p.Check(a.Beta > 0 && !math.IsInf(a.Beta, 0), "beta", "must be a finite number > 0, got %v", a.Beta)
	if err := p.Err(); err != nil {
		return nil, err
	}
	return a, nil
}

// Name returns "rs_grpo".
func (a *RSGRPO) Name() string { return "rs_grpo" }

// NeedsCritic is false.
func (a *RSGRPO) NeedsCritic() bool { return false }

// Advantages sets every token of sequence i to A_i (the package doc) and
// Returns equal to Advantages.
func (a *RSGRPO) Advantages(r *core.Rollout) error {
	rewards, err := outcome.ShapedRewards("rs_grpo", r)
	if err != nil {
		return err
	}
	adv := Estimate(rewards, r.Groups(), a.Beta)
	outcome.Broadcast(r, adv, adv)
	return nil
}

// Finalize is a no-op: RS-GRPO advantages are never whitened.
func (a *RSGRPO) Finalize(r *core.Rollout) error { return nil }

// Estimate is A_i of the package doc for every reward; groups lists the
// indices of rewards that share a prompt; an index in no group gets 0.
func Estimate(rewards []float64, groups [][]int, beta float64) []float64 {
	adv := make([]float64, len(rewards))
	for _, idx := range groups {
		if len(idx) == 0 {
			continue
		}
		top := math.Inf(-1)
		for _, i := range idx {
			top = max(top, rewards[i])
		}
		e := make([]float64, len(idx))
		mean := 0.0
		for k, i := range idx {
			e[k] = math.Exp(beta * (rewards[i] - top))
			mean += e[k]
		}
		mean /= float64(len(idx))
		for k, i := range idx {
			adv[i] = (e[k]/mean - 1) / beta
		}
	}
	return adv
}
