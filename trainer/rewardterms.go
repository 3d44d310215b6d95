package trainer

import (
	"fmt"
	"math"

	"github.com/cde-rl/cde/core"
)

// OverlongPenalty is DAPO's overlong soft punishment (Yu et al. 2025,
// "DAPO: An Open-Source LLM Reinforcement Learning System at Scale", arXiv
// 2503.14476, "Soft Overlong Punishment"), added to the reward of a response of L tokens with
// Lmax = rollout.max_response_tokens and L_cache = buffer:
//
//	0                                         if L <= Lmax - L_cache
//	(Lmax - L_cache - L) / L_cache * penalty  if Lmax - L_cache < L <= Lmax
//
// so it falls linearly from 0 to -penalty at L = Lmax. The paper's third
// case (-1 for L > Lmax) cannot happen here: generation stops at Lmax. The
// paper has penalty = 1; the factor is verl's overlong_penalty_factor.
// buffer = 0 is off (0 for every L).
func OverlongPenalty(L, maxLen, buffer int, penalty float64) float64 {
	if buffer <= 0 || L <= maxLen-buffer {
		return 0
	}
	return float64(maxLen-buffer-L) / float64(buffer) * penalty
}

// KLRewardPenalty is the reward term of train.kl_mode: reward, as verl's
// use_kl_in_reward: -kl_coef * sum_t k(old_t, ref_t), the chosen estimator
// (KLEstimators) of KL(pi_old || pi_ref) at each token of the response,
// between the sampling policy's log-probs (LogProbs) and the reference's
// (RefLogProbs), summed over the response. verl subtracts the per-token
// estimate from each token's reward; with outcome estimators (grpo, rloo,
// ...), which read only the summed reward, that is the same; with ppo's
// GAE it differs: here every token's return carries the whole response's
// penalty, there only the penalties of the tokens after it.
func KLRewardPenalty(s *core.Sequence, estimator string, coef float64) (float64, error) {
	if len(s.RefLogProbs) != len(s.LogProbs) {
		return 0, fmt.Errorf("%d reference log-probs for %d log-probs", len(s.RefLogProbs), len(s.LogProbs))
	}
	sum := 0.0
	for t := range s.LogProbs {
		logR, _ := core.ClampLogRatio(s.RefLogProbs[t] - s.LogProbs[t])
		k, _ := core.KLEstimate(estimator, logR)
		sum += k
	}
	if math.IsNaN(sum) {
		return 0, fmt.Errorf("unknown KL estimator %q (known: k1, k2, k3)", estimator)
	}
	return -coef * sum, nil
}

// RewardPenalties sets every sequence's RewardPenalty from the train
// section (overlong punishment; the KL penalty when kl_mode is reward and
// kl_coef > 0, which needs RefLogProbs) and adds their means to m as
// reward/overlong_penalty and reward/kl_penalty. Errors name the sequence.
func RewardPenalties(c *Config, r *core.Rollout, m map[string]float64) error {
	tc := c.Train
	klOn := tc.KLMode == "reward" && tc.KLCoef > 0
	var over, kl float64
	for i := range r.Seqs {
		s := &r.Seqs[i]
		o := OverlongPenalty(s.Len(), c.Rollout.MaxResponseTokens, tc.Overlong.Buffer, tc.Overlong.Penalty)
		k := 0.0
		if klOn {
			if s.RefLogProbs == nil {
				return fmt.Errorf("sequences[%d]: train.kl_mode: reward needs reference log-probs (ref_logprobs in a rollout file)", i)
			}
			var err error
			if k, err = KLRewardPenalty(s, tc.KLEstimator, tc.KLCoef); err != nil {
				return fmt.Errorf("sequences[%d]: train.kl_mode: reward: %w", i, err)
			}
		}
		s.RewardPenalty = o + k
		over += o
		kl += k
	}
	n := float64(max(len(r.Seqs), 1))
	if tc.Overlong.Buffer > 0 {
		m["reward/overlong_penalty"] = over / n
	}
	if klOn {
		m["reward/kl_penalty"] = kl / n
	}
	return nil
}

// KeepInformativeGroups is DAPO's dynamic-sampling filter: it returns the
// groups of r (as Rollout.Groups gives them, in order) whose verifier
// rewards are not all equal, and the number dropped. A group of one is
// dropped (its rewards are trivially equal).
func KeepInformativeGroups(r *core.Rollout) (keep [][]int, dropped int) {
	for _, idx := range r.Groups() {
		varied := false
		for _, i := range idx[1:] {
			varied = varied || r.Seqs[i].Reward != r.Seqs[idx[0]].Reward
		}
		if varied {
			keep = append(keep, idx)
		} else {
			dropped++
		}
	}
	return keep, dropped
}
