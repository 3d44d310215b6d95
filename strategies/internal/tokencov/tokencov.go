// Package tokencov computes the per-token centred cross-product of
// log-probability and advantage that Clip-Cov and KL-Cov rank tokens by
// (Cui et al. 2025, "The Entropy Mechanism of Reinforcement Learning for
// Reasoning Language Models", arXiv 2505.22617, section 4):
//
//	Cov(y_i) = (log pi(y_i) - mean_j log pi(y_j)) * (A(y_i) - mean_j A(y_j))
//
// with both means over every valid token of the batch. log pi is the
// sampling policy's log-prob (Sequence.LogProbs), A the final advantage.
package tokencov

import (
	"fmt"

	"github.com/cde-rl/cde/core"
)

// Covariances returns Cov(y_i,t) for every token of r, one row per
// sequence, and N, the number of valid tokens. It is an error when a
// sequence's log-probs or advantages do not have one entry per token.
func Covariances(r *core.Rollout) ([][]float64, int, error) {
	var sumLP, sumA float64
	n := 0
	for i := range r.Seqs {
		s := &r.Seqs[i]
		if len(s.LogProbs) != s.Len() || len(s.Advantages) != s.Len() {
			return nil, 0, fmt.Errorf("sequence %d: %d log-probs and %d advantages for %d tokens", i, len(s.LogProbs), len(s.Advantages), s.Len())
		}
		for t := range s.Len() {
			sumLP += s.LogProbs[t]
			sumA += s.Advantages[t]
			n++
		}
	}
	out := make([][]float64, len(r.Seqs))
	if n == 0 {
		for i := range out {
			out[i] = []float64{}
		}
		return out, 0, nil
	}
	meanLP, meanA := sumLP/float64(n), sumA/float64(n)
	for i := range r.Seqs {
		s := &r.Seqs[i]
		out[i] = make([]float64, s.Len())
		for t := range s.Len() {
			out[i][t] = (s.LogProbs[t] - meanLP) * (s.Advantages[t] - meanA)
		}
	}
	return out, n, nil
}

// Token is a position in a batch: sequence Seq, token T.
type Token struct{ Seq, T int }
