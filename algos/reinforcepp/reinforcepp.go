// Package reinforcepp implements REINFORCE++ advantages (docs/algorithms.md),
// registered as algorithm "reinforce_pp": Hu et al. 2025, REINFORCE++,
// arXiv 2501.03262 (first version: Hu, "REINFORCE++: A Simple and Efficient
// Approach for Aligning Large Language Models"; later versions retitled,
// e.g. "... Stabilizing Critic-Free Policy Optimization with Global
// Normalization").
//
// The reward is the outcome reward r~_i at the last token of response i, so
// with no discounting (gamma = 1) the return of every valid token is r~_i:
//
//	G_{i,t} = r~_i                                   for t = 0..T_i-1
//	A_{i,t} = (G_{i,t} - mu) / sqrt(var + 1e-8)      (batch whitening)
//
// where mu and var are the mean and the sample variance (divisor n-1) of
// all n valid tokens of the batch (every token of every response, so a
// long response weighs more than a short one), the same whitening as ppo's
// (verl's masked_whiten; the paper writes (A - mu) / sigma, and the 1e-8
// only matters when sigma is near 0). No group baseline is subtracted: see
// reinforce_pp_baseline for that. The whitening runs in Finalize, after the
// strategies' advantage bonuses, as for ppo; a batch of one token whitens to
// 0.
//
// Returns are set to the return G_{i,t} = r~_i (unwhitened; there is no
// critic to regress on them). The paper's token reward also carries a
// per-token KL penalty to the reference policy; that is not part of this
// estimator (the KL-as-reward-penalty option of issue #15 item 2 is where it
// belongs), and neither is a discount factor.
//
// Config keys (`algorithm:` mapping, besides name): none. Another
// algorithm's key (whiten or gamma of ppo, norm_by_std of grpo, ...) is an
// error naming that algorithm.
package reinforcepp

import (
	"github.com/cde-rl/cde/algos/internal/outcome"
	"github.com/cde-rl/cde/core"
)

func init() {
	core.RegisterAlgorithm("reinforce_pp", New) // no keys besides name
}

// ReinforcePP is the REINFORCE++ estimator: returns, then batch whitening.
type ReinforcePP struct{}

// New builds REINFORCE++ from the `algorithm:` params (it reads none).
func New(p *core.Params) (core.Algorithm, error) {
	return &ReinforcePP{}, nil
}

// Name returns "reinforce_pp".
func (a *ReinforcePP) Name() string { return "reinforce_pp" }

// NeedsCritic is false: REINFORCE++ reads no values.
func (a *ReinforcePP) NeedsCritic() bool { return false }

// Advantages sets every token of sequence i, and its return, to r~_i: the
// raw advantage before whitening.
func (a *ReinforcePP) Advantages(r *core.Rollout) error {
	rewards, err := outcome.ShapedRewards("reinforce_pp", r)
	if err != nil {
		return err
	}
	outcome.Broadcast(r, rewards, rewards)
	return nil
}

// Finalize whitens the advantages over all valid tokens of the batch.
func (a *ReinforcePP) Finalize(r *core.Rollout) error {
	advs, err := outcome.TokenAdvantages("reinforce_pp", r)
	if err != nil {
		return err
	}
	outcome.Whiten(advs)
	return nil
}
