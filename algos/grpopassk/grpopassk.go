// Package grpopassk implements pass@k advantages (docs/algorithms.md),
// registered as algorithm "grpo_passk": Chen et al. 2025, "Pass@k Training
// for Adaptively Balancing Exploration and Exploitation of Large Reasoning
// Models", arXiv 2508.10751, in the analytic form of its "analytical
// derivation" section (derived again below; a third-party implementation
// numbers the two advantages Eqs. 14 and 15, which we have not checked
// against the paper's PDF; the formulas agree with the authors'
// code/passk_adv.py in github.com/RUCAIBox/Passk_Training).
//
// Pass@k training rewards a size-k subset of a prompt's responses with 1 if
// any of its members is correct, and each response with the normalised
// reward of the subsets it belongs to. Over all C(N,k) subsets of a group of
// N responses of which c are correct, with binary correctness:
//
//	Rbar    = 1 - C(N-c, k) / C(N, k)              (mean subset reward: pass@k)
//	sigma   = sqrt(Rbar * (1 - Rbar))               (its std; rewards are 0/1)
//	A_pos   = (1 - Rbar) / sigma                    (a correct response: every
//	                                                 subset holding it scores 1)
//	A_neg   = (1 - Rbar - C(N-c-1, k-1) / C(N-1, k-1)) / sigma
//	                                                (an incorrect response: its
//	                                                 subsets score 1 unless the
//	                                                 other k-1 all fail)
//
// and every response of a group with sigma = 0 (c = 0, or so many correct
// ones that every subset holds one, N-c < k) gets 0. The authors' code adds
// 1e-6 to sigma; we divide by sigma itself. With k = 1 this is GRPO on 0/1
// rewards with the population std and no eps. The ratios of binomials are
// computed as products, C(a,k)/C(b,k) = prod_{j<k} (a-j)/(b-j), so large N
// cannot overflow.
//
// A response is "correct" when Sequence.Correct (the verifier's verdict) is
// set; the rewards r and r~ are not read at all, so the strategies' reward
// bonuses have no effect on these advantages. In a rollout file (cde-run
// shape) that is the optional "correct" field, false when absent. A_i is
// copied to every valid token; Returns are set equal to the advantages, as
// grpo does (there is no critic). Never whitened: Finalize is a no-op.
//
// Config keys (`algorithm:` mapping, besides name): k (integer, default 4,
// at least 1). At run time every group must hold N >= k responses (so
// rollout.n >= k); a smaller group is an error naming algorithm.k. A group
// of one is therefore an error unless k = 1, when it gets 0.
package grpopassk

import (
	"fmt"
	"math"

	"github.com/cde-rl/cde/algos/internal/outcome"
	"github.com/cde-rl/cde/core"
)

func init() {
	core.RegisterAlgorithm("grpo_passk", New, "k") // its keys besides name
}

// Needs asks for the verifier's verdicts (a rollout file must say
// `correct`) and groups of at least k responses (rollout.n >= k).
func (a *PassK) Needs() core.Needs {
	return core.Needs{Correct: true, MinGroup: a.K, MinGroupKey: "algorithm.k"}
}

// PassK is the analytic pass@k advantage estimator.
type PassK struct {
	// K is the subset size k of pass@k.
	K int
}

// New builds the pass@k estimator from the `algorithm:` params.
func New(p *core.Params) (core.Algorithm, error) {
	a := &PassK{K: p.Int("k", 4)}
	p.Check(a.K >= 1, "k", "must be >= 1 (and at most the responses per prompt, rollout.n), got %d", a.K)
	if err := p.Err(); err != nil {
		return nil, err
	}
	return a, nil
}

// Name returns "grpo_passk".
func (a *PassK) Name() string { return "grpo_passk" }

// NeedsCritic is false: it reads no values.
func (a *PassK) NeedsCritic() bool { return false }

// Advantages sets every token of sequence i to its group's A_pos or A_neg
// (see the package doc) and Returns equal to Advantages. A group of fewer
// than k responses is an error naming algorithm.k and the group.
func (a *PassK) Advantages(r *core.Rollout) error {
	adv := make([]float64, len(r.Seqs))
	for _, idx := range r.Groups() {
		correct := make([]bool, len(idx))
		for j, i := range idx {
			correct[j] = r.Seqs[i].Correct
		}
		groupAdv, err := GroupAdvantages(correct, a.K)
		if err != nil {
			return fmt.Errorf("grpo_passk: group %d (sequences %v): %w", r.Seqs[idx[0]].Group, idx, err)
		}
		for j, i := range idx {
			adv[i] = groupAdv[j]
		}
	}
	outcome.Broadcast(r, adv, adv)
	return nil
}

// Finalize is a no-op: pass@k advantages are never whitened.
func (a *PassK) Finalize(r *core.Rollout) error { return nil }

// GroupAdvantages returns the pass@k advantage of each response of one
// group, given which responses are correct (N = len(correct)). k must be in
// [1, N]; otherwise the error names algorithm.k.
func GroupAdvantages(correct []bool, k int) ([]float64, error) {
	n := len(correct)
	if k < 1 || k > n {
		return nil, fmt.Errorf("algorithm.k = %d: must be in [1, N], N = %d the responses of this group (rollout.n must be >= k)", k, n)
	}
	c := 0
	for _, ok := range correct {
		if ok {
			c++
		}
	}
	adv := make([]float64, n)
	allFail := binomRatio(n-c, n, k) // C(N-c,k)/C(N,k) = 1 - Rbar
	rbar := 1 - allFail
	sigma := math.Sqrt(rbar * allFail)
	if sigma == 0 {
		return adv, nil
	}
	aPos := allFail / sigma
	// An incorrect response's subsets fail when the other k-1 members, drawn
	// from the N-1 others of which N-c-1 are incorrect, all fail.
	aNeg := 0.0
	if c < n {
		aNeg = (allFail - binomRatio(n-c-1, n-1, k-1)) / sigma
	}
	for j, ok := range correct {
		if ok {
			adv[j] = aPos
		} else {
			adv[j] = aNeg
		}
	}
	return adv, nil
}

// binomRatio returns C(a, k) / C(b, k) for 0 <= a <= b and 0 <= k <= b, as
// prod_{j<k} (a-j)/(b-j); it is 0 when a < k, and 1 when k = 0.
func binomRatio(a, b, k int) float64 {
	if a < k {
		return 0
	}
	ratio := 1.0
	for j := range k {
		ratio *= float64(a-j) / float64(b-j)
	}
	return ratio
}
