// Package forking implements the high-entropy forking-token rule,
// registered as strategy "forking_tokens" (Wang et al. 2025, "Beyond the
// 80/20 Rule: High-Entropy Minority Tokens Drive Effective Reinforcement
// Learning for LLM Reasoning", arXiv 2506.01939): the policy gradient is
// kept only at the top rho fraction of the batch's tokens by entropy, the
// "forking" tokens where the reasoning path branches.
//
// With H_i,t the entropy of the sampling distribution at token t of
// sequence i (Sequence.Entropies) and N the batch's valid tokens:
//
//	k   = max(1, ceil(rho * N))
//	tau = the k-th largest H over the batch
//	PGWeight_i,t = 1 if H_i,t >= tau, else 0
//
// so the paper's indicator I[H_i,t >= tau_rho^B] multiplies each token's
// clipped-surrogate term, and the loss aggregation (its denominators: the
// paper keeps the DAPO token-mean over all tokens) is unchanged. Tokens
// tied at tau are all kept, so slightly more than k tokens may be.
// Entropies are those of the sampling policy, which is the current policy
// at the first (on-policy) update; the paper computes them in the update.
//
// Config keys: rho (number in (0, 1], default 0.2, the paper's 20%).
package forking

import (
	"fmt"
	"math"
	"sort"

	"github.com/cde-rl/cde/core"
)

func init() {
	core.RegisterStrategy("forking_tokens", New)
}

// Forking keeps the policy gradient at high-entropy tokens only. It keeps
// no state across steps.
type Forking struct {
	// Rho is the fraction of the batch's tokens kept.
	Rho float64
}

// New builds Forking from a `strategies:` entry; it works with any algorithm.
func New(p *core.Params, _ core.Algorithm) (core.Strategy, error) {
	s := &Forking{Rho: p.Float("rho", 0.2)}
	p.Check(s.Rho > 0 && s.Rho <= 1, "rho", "must be in (0, 1], got %v", s.Rho)
	if err := p.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

// Name returns "forking_tokens".
func (s *Forking) Name() string { return "forking_tokens" }

// Needs asks for the per-token entropies.
func (s *Forking) Needs() core.Needs { return core.Needs{Entropies: true} }

// TokenLoss returns PGWeight 1 at tokens with entropy >= tau, 0 elsewhere.
func (s *Forking) TokenLoss(_ core.StepInfo, r *core.Rollout) (core.TokenLoss, error) {
	var all []float64
	for i := range r.Seqs {
		q := &r.Seqs[i]
		if len(q.Entropies) != q.Len() {
			return core.TokenLoss{}, fmt.Errorf("sequence %d: %d entropies for %d tokens", i, len(q.Entropies), q.Len())
		}
		all = append(all, q.Entropies...)
	}
	w := make([][]float64, len(r.Seqs))
	if len(all) == 0 {
		for i := range w {
			w[i] = []float64{}
		}
		return core.TokenLoss{PGWeight: w}, nil
	}
	sort.Sort(sort.Reverse(sort.Float64Slice(all)))
	k := max(1, int(math.Ceil(s.Rho*float64(len(all)))))
	tau := all[min(k, len(all))-1]
	_, w = r.TokenRows(1) // one column (core/columns.go)
	for i := range r.Seqs {
		for t, h := range r.Seqs[i].Entropies {
			if h >= tau {
				w[i][t] = 1
			}
		}
	}
	return core.TokenLoss{PGWeight: w}, nil
}

// Unweighted marks that the strategy takes no `weight:` (core.Unweighted).
func (s *Forking) Unweighted() {}
