// Package klcov implements KL-Cov, registered as strategy "kl_cov" (Cui et
// al. 2025, "The Entropy Mechanism of Reinforcement Learning for Reasoning
// Language Models", arXiv 2505.22617, section 4.2): the tokens of highest
// log-prob/advantage covariance get a KL penalty that holds them near the
// sampling policy.
//
// Per valid token of the batch (N tokens), with log pi the sampling
// policy's log-prob and A the final advantage (strategies/internal/tokencov):
//
//	Cov(y) = (log pi(y) - mean log pi) * (A(y) - mean A)
//	k = max(1, floor(ratio * N))
//	penalised = the k tokens of largest Cov (ties: the earlier token in
//	            batch order first)
//
// and the token-loss hook returns AbsKLCoef = kl_coef at the penalised
// tokens, 0 elsewhere (core.TokenLoss), so each of them adds
//
//	kl_coef * |log pi_theta(y) - log pi_old(y)|
//
// to its policy loss, aggregated with the configured loss_agg_mode (verl's
// kl_cov uses this |log-ratio| form of the paper's KL term).
//
// Where this differs from the paper: the paper's KL-Cov objective has no
// PPO clip (the surrogate is ratio * A on every token); here the configured
// clip (train.clip_low, clip_high) stays on; set them wide to drop it. The
// covariance is computed once per step over the whole batch from the
// sampling policy's log-probs (the paper and verl: per minibatch, current
// log-probs). The penalty's gradient is sign(log-ratio), which is 0 at the
// first on-policy update: with train.minibatches = ppo_epochs = 1 KL-Cov
// has no effect at all; it acts from the second minibatch or epoch on.
//
// Config keys: ratio (the fraction k/N, number in (0, 1], default 2e-4)
// and kl_coef (number > 0, default 0.1): verl's defaults for its KL-Cov
// loss (PolicyLossConfig kl_cov_ratio, ppo_kl_coef). The paper tunes both
// per model; set them from its tables for a faithful reproduction.
package klcov

import (
	"math"
	"sort"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/strategies/internal/tokencov"
)

func init() {
	core.RegisterStrategy("kl_cov", New)
}

// KLCov penalises the drift of the highest-covariance tokens. It keeps no
// state across steps.
type KLCov struct {
	// Ratio is the fraction of the batch's tokens penalised.
	Ratio float64
	// KLCoef is the penalty's coefficient (the paper's beta).
	KLCoef float64
}

// New builds KLCov from a `strategies:` entry; it works with any algorithm.
func New(p *core.Params, _ core.Algorithm) (core.Strategy, error) {
	s := &KLCov{Ratio: p.Float("ratio", 2e-4), KLCoef: p.Float("kl_coef", 0.1)}
	p.Check(s.Ratio > 0 && s.Ratio <= 1, "ratio", "must be in (0, 1], got %v", s.Ratio)
	p.Check(s.KLCoef > 0, "kl_coef", "must be > 0, got %v", s.KLCoef)
	if err := p.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

// Name returns "kl_cov".
func (s *KLCov) Name() string { return "kl_cov" }

// Needs asks for the log-probs (always computed).
func (s *KLCov) Needs() core.Needs { return core.Needs{LogProbs: true} }

// TokenLoss returns AbsKLCoef = kl_coef at the k highest-covariance tokens.
func (s *KLCov) TokenLoss(_ core.StepInfo, r *core.Rollout) (core.TokenLoss, error) {
	cov, n, err := tokencov.Covariances(r)
	if err != nil {
		return core.TokenLoss{}, err
	}
	_, c := r.TokenRows(1) // one column (core/columns.go); cov[i] has T_i entries
	var all []tokencov.Token
	for i, row := range cov {
		for t := range row {
			all = append(all, tokencov.Token{Seq: i, T: t})
		}
	}
	sort.SliceStable(all, func(a, b int) bool { return cov[all[a].Seq][all[a].T] > cov[all[b].Seq][all[b].T] })
	k := min(max(1, int(math.Floor(s.Ratio*float64(n)))), n)
	for _, tok := range all[:k] {
		c[tok.Seq][tok.T] = s.KLCoef
	}
	return core.TokenLoss{AbsKLCoef: c}, nil
}

// Unweighted marks that the strategy takes no `weight:` (core.Unweighted).
func (s *KLCov) Unweighted() {}
