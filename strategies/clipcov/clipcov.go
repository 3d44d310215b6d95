// Package clipcov implements Clip-Cov, registered as strategy "clip_cov"
// (Cui et al. 2025, "The Entropy Mechanism of Reinforcement Learning for
// Reasoning Language Models", arXiv 2505.22617, section 4.2): the policy
// gradient of a few tokens whose log-prob/advantage covariance is high,
// the tokens that drive entropy down, is detached.
//
// Per valid token of the batch (N tokens), with log pi the sampling
// policy's log-prob and A the final advantage (strategies/internal/tokencov):
//
//	Cov(y) = (log pi(y) - mean log pi) * (A(y) - mean A)
//	candidates = { y : cov_lb < Cov(y) < cov_ub }
//	n = max(1, floor(ratio * N))
//	detached = min(n, |candidates|) candidates drawn uniformly without
//	           replacement
//
// and the token-loss hook returns PGWeight 0 at the detached tokens, 1
// elsewhere (core.TokenLoss): their clipped-surrogate term stays out of the
// gradient while the aggregation's denominators are unchanged, as the
// paper's loss (and verl's clip_cov) detach it.
//
// Where this differs from the paper's setting: the covariance is computed
// once per step over the whole batch from the sampling policy's log-probs,
// which equal the current policy's at the first (on-policy) update; with
// train.minibatches > 1 or ppo_epochs > 1 the paper (and verl) recompute
// it per minibatch from the current log-probs and also exclude tokens the
// PPO clip already clipped. The draw is seeded from the run seed and the
// step (core.Mix), so a run is reproducible.
//
// Config keys: ratio (the fraction r of tokens detached, number in (0, 1],
// default 2e-4), cov_lb and cov_ub (the covariance band, numbers with
// cov_lb < cov_ub, defaults 1 and 5): the paper's and verl's defaults.
package clipcov

import (
	"math"
	"math/rand/v2"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/strategies/internal/tokencov"
)

func init() {
	core.RegisterStrategy("clip_cov", New)
}

// seedLabel separates Clip-Cov's draws from every other use of the run seed.
const seedLabel = 0xc11bc0f

// ClipCov detaches the gradient of random high-covariance tokens. It
// keeps no state across steps.
type ClipCov struct {
	// Ratio is r, the fraction of the batch's tokens detached.
	Ratio float64
	// CovLow and CovHigh bound the covariance band (exclusive).
	CovLow, CovHigh float64
}

// New builds ClipCov from a `strategies:` entry; it works with any algorithm.
func New(p *core.Params, _ core.Algorithm) (core.Strategy, error) {
	s := &ClipCov{Ratio: p.Float("ratio", 2e-4), CovLow: p.Float("cov_lb", 1), CovHigh: p.Float("cov_ub", 5)}
	p.Check(s.Ratio > 0 && s.Ratio <= 1, "ratio", "must be in (0, 1], got %v", s.Ratio)
	p.Check(s.CovLow < s.CovHigh, "cov_ub", "must be > cov_lb (%v), got %v", s.CovLow, s.CovHigh)
	if err := p.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

// Name returns "clip_cov".
func (s *ClipCov) Name() string { return "clip_cov" }

// Needs asks for the log-probs (always computed).
func (s *ClipCov) Needs() core.Needs { return core.Needs{LogProbs: true} }

// TokenLoss returns PGWeight 0 at the detached tokens, 1 elsewhere.
func (s *ClipCov) TokenLoss(info core.StepInfo, r *core.Rollout) (core.TokenLoss, error) {
	cov, n, err := tokencov.Covariances(r)
	if err != nil {
		return core.TokenLoss{}, err
	}
	_, w := r.TokenRows(1) // one column (core/columns.go); cov[i] has T_i entries
	var cand []tokencov.Token
	for i, row := range cov {
		for t, c := range row {
			w[i][t] = 1
			if c > s.CovLow && c < s.CovHigh {
				cand = append(cand, tokencov.Token{Seq: i, T: t})
			}
		}
	}
	k := min(max(1, int(math.Floor(s.Ratio*float64(n)))), len(cand))
	rng := rand.New(rand.NewPCG(core.Mix(info.Seed, seedLabel, uint64(info.Step)), 0))
	// A partial Fisher-Yates shuffle: the first k are a uniform draw.
	for j := range k {
		m := j + rng.IntN(len(cand)-j)
		cand[j], cand[m] = cand[m], cand[j]
		w[cand[j].Seq][cand[j].T] = 0
	}
	return core.TokenLoss{PGWeight: w}, nil
}

// Unweighted marks that the strategy takes no `weight:` (core.Unweighted).
func (s *ClipCov) Unweighted() {}
