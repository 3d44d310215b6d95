// Package drgrpo implements the advantage of Dr. GRPO (docs/algorithms.md),
// registered as algorithm "dr_grpo": Liu et al. 2025, "Understanding
// R1-Zero-Like Training: A Critical Perspective", arXiv 2503.20783.
//
// For response i of a prompt group g with G responses and shaped rewards r~:
//
//	A_i = r~_i - mean_g
//
// GRPO's division by the group's std is removed (the paper's "question-level
// difficulty bias"); a group of one, and a group whose rewards are all
// equal, get A = 0. A_i is copied to every valid token; Returns are set
// equal to the advantages, as grpo does (there is no critic). Never
// whitened: Finalize is a no-op. This is grpo with norm_by_std: false,
// under its own name.
//
// Only the advantage half of Dr. GRPO is here. The paper's other change,
// summing each response's token losses and dividing by a constant (the
// generation budget) instead of by the response's length, is the actor's
// loss aggregation, a train key shared by every algorithm:
// `train.loss_agg_mode: seq-mean-token-sum-norm` (the token-loss sum over
// the minibatch's responses x rollout.max_response_tokens; see
// core.AggSeqMeanTokenSumNorm). Choosing dr_grpo does not set it: the
// paper's method is
//
//	algorithm: {name: dr_grpo}
//	train: {loss_agg_mode: seq-mean-token-sum-norm}
//
// Config keys (`algorithm:` mapping, besides name): none. Another
// algorithm's key (norm_by_std or eps of grpo, ...) is an error naming that
// algorithm.
package drgrpo

import (
	"github.com/cde-rl/cde/algos/internal/outcome"
	"github.com/cde-rl/cde/core"
)

func init() {
	core.RegisterAlgorithm("dr_grpo", New) // no keys besides name
}

// DrGRPO is the group-centred (no std) advantage estimator.
type DrGRPO struct{}

// New builds Dr. GRPO from the `algorithm:` params (it reads none).
func New(p *core.Params) (core.Algorithm, error) {
	return &DrGRPO{}, nil
}

// Name returns "dr_grpo".
func (a *DrGRPO) Name() string { return "dr_grpo" }

// NeedsCritic is false: Dr. GRPO reads no values.
func (a *DrGRPO) NeedsCritic() bool { return false }

// Advantages sets every token of sequence i to A_i = r~_i - mean_g and
// Returns equal to Advantages.
func (a *DrGRPO) Advantages(r *core.Rollout) error {
	rewards, err := outcome.ShapedRewards("dr_grpo", r)
	if err != nil {
		return err
	}
	adv := outcome.GroupAdvantages(rewards, r.Groups(), false, 0)
	outcome.Broadcast(r, adv, adv)
	return nil
}

// Finalize is a no-op: Dr. GRPO advantages are never whitened.
func (a *DrGRPO) Finalize(r *core.Rollout) error { return nil }
