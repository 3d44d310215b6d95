// Package reinforceppbaseline implements REINFORCE++-baseline advantages
// (docs/algorithms.md), registered as algorithm "reinforce_pp_baseline": Hu
// et al. 2025, REINFORCE++, arXiv 2501.03262 ("REINFORCE++ w/ baseline",
// the variant for groups of responses to one prompt: group-mean subtraction,
// then global batch normalisation).
//
// For response i of a prompt group g with G responses and shaped rewards r~:
//
//	A'_i    = r~_i - mean_g                           (group baseline)
//	A_{i,t} = (A'_i - mu) / sqrt(var + 1e-8)           (batch whitening)
//
// where A'_i is first copied to every valid token, and mu and var are the
// mean and the sample variance (divisor n-1) of all n valid tokens of the
// batch (ppo's whitening, verl's masked_whiten). A group of one has
// mean_g = r~_i, so A'_i = 0 (verl instead takes a baseline of 0 for a group
// of one, which leaves A'_i = r~_i; we keep r~_i - mean_g, as
// docs/algorithms.md states). There is no std division inside the group.
// The whitening runs in Finalize, after the strategies' advantage bonuses,
// as for ppo; a batch of one token whitens to 0.
//
// Returns are set to the return r~_i on every token (no baseline, no
// whitening; there is no critic to regress on them). The paper's per-token
// KL penalty in the reward is not part of this estimator (issue #15 item 2).
//
// Config keys (`algorithm:` mapping, besides name): none. Another
// algorithm's key is an error naming that algorithm.
package reinforceppbaseline

import (
	"github.com/cde-rl/cde/algos/internal/outcome"
	"github.com/cde-rl/cde/core"
)

func init() {
	core.RegisterAlgorithm("reinforce_pp_baseline", New) // no keys besides name
}

// ReinforcePPBaseline is REINFORCE++ with a group-mean baseline.
type ReinforcePPBaseline struct{}

// New builds REINFORCE++-baseline from the `algorithm:` params (it reads
// none).
func New(p *core.Params) (core.Algorithm, error) {
	return &ReinforcePPBaseline{}, nil
}

// Name returns "reinforce_pp_baseline".
func (a *ReinforcePPBaseline) Name() string { return "reinforce_pp_baseline" }

// NeedsCritic is false: it reads no values.
func (a *ReinforcePPBaseline) NeedsCritic() bool { return false }

// Advantages sets every token of sequence i to A'_i = r~_i - mean_g (before
// whitening) and its return to r~_i.
func (a *ReinforcePPBaseline) Advantages(r *core.Rollout) error {
	rewards, err := outcome.ShapedRewards("reinforce_pp_baseline", r)
	if err != nil {
		return err
	}
	centred := outcome.GroupAdvantages(rewards, r.Groups(), false, 0)
	outcome.Broadcast(r, centred, rewards)
	return nil
}

// Finalize whitens the advantages over all valid tokens of the batch.
func (a *ReinforcePPBaseline) Finalize(r *core.Rollout) error {
	advs, err := outcome.TokenAdvantages("reinforce_pp_baseline", r)
	if err != nil {
		return err
	}
	outcome.Whiten(advs)
	return nil
}
