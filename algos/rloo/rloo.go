// Package rloo implements REINFORCE Leave-One-Out advantages
// (docs/algorithms.md), registered as algorithm "rloo": Ahmadian et al.
// 2024, "Back to Basics: Revisiting REINFORCE Style Optimization for
// Learning from Human Feedback in LLMs", arXiv 2402.14740 (their RLOO
// estimator, after Kool et al. 2019, "Buy 4 REINFORCE Samples, Get a
// Baseline for Free!").
//
// For response i of a prompt group g with G responses and shaped rewards r~,
// the baseline of i is the mean of the other G-1 rewards of its group:
//
//	A_i = r~_i - 1/(G-1) * sum_{j in g, j != i} r~_j     (G >= 2)
//	A_i = 0                                                (G = 1)
//
// (equivalently A_i = G/(G-1) * (r~_i - mean_g): RLOO is the group-centred
// reward scaled by G/(G-1), without any std division). A_i is copied to
// every valid token of the response, and Returns are set equal to the
// advantages, as grpo does (there is no critic). RLOO advantages are never
// whitened: Finalize is a no-op.
//
// Config keys (`algorithm:` mapping, besides name): none. Another
// algorithm's key (norm_by_std of grpo, gamma of ppo, ...) is an error
// naming that algorithm.
package rloo

import (
	"github.com/cde-rl/cde/algos/internal/outcome"
	"github.com/cde-rl/cde/core"
)

func init() {
	core.RegisterAlgorithm("rloo", New) // no keys besides name
}

// RLOO is the leave-one-out advantage estimator.
type RLOO struct{}

// New builds RLOO from the `algorithm:` params (it reads none).
func New(p *core.Params) (core.Algorithm, error) {
	return &RLOO{}, nil
}

// Name returns "rloo".
func (a *RLOO) Name() string { return "rloo" }

// NeedsCritic is false: RLOO reads no values.
func (a *RLOO) NeedsCritic() bool { return false }

// Advantages sets every token of sequence i to A_i (see the package doc)
// and Returns equal to Advantages.
func (a *RLOO) Advantages(r *core.Rollout) error {
	rewards, err := outcome.ShapedRewards("rloo", r)
	if err != nil {
		return err
	}
	adv := LeaveOneOut(rewards, r.Groups())
	outcome.Broadcast(r, adv, adv)
	return nil
}

// Finalize is a no-op: RLOO advantages are never whitened.
func (a *RLOO) Finalize(r *core.Rollout) error { return nil }

// LeaveOneOut returns one advantage per reward: the reward minus the mean of
// the other rewards of its group, computed as the mean difference
// sum_{j != i} (r~_i - r~_j) / (G-1) so that equal rewards give exactly 0.
// groups lists the indices of rewards that share a prompt (as
// Rollout.Groups does); indices in no group, and groups of one, get 0.
func LeaveOneOut(rewards []float64, groups [][]int) []float64 {
	adv := make([]float64, len(rewards))
	for _, idx := range groups {
		n := len(idx)
		if n < 2 {
			continue
		}
		// sum_{j != i} (r~_i - r~_j) / (G-1): differences first, so that
		// equal rewards give exactly 0.
		for _, i := range idx {
			d := 0.0
			for _, j := range idx {
				if j != i {
					d += rewards[i] - rewards[j]
				}
			}
			adv[i] = d / float64(n-1)
		}
	}
	return adv
}
