// Package rarecorrect implements uniqueness-aware advantage reweighting,
// registered as strategy "rare_correct": Hu et al. 2026, "Rewarding the
// Rare: Uniqueness-Aware RL for Creative Problem Solving in LLMs", arXiv
// 2601.08763. The paper clusters a group's rollouts by high-level solution
// strategy (with an LLM judge) and reweights the advantages of correct
// rollouts inversely with their cluster's size, so a correct solution that
// few rollouts of its group share is pushed up more than a common one.
//
// For a group (one problem's responses) and a correct response i whose
// solution key is s_i, with m_i the number of correct responses in the
// group with key s_i:
//
//	f_i   = m_i^(-alpha)
//	A^_it = A_it * (1 + w_t * (f_i - 1))     (A^_it = f_i * A_it at w_t = 1)
//
// Incorrect responses, and correct ones without a key, keep their
// advantage. The hook adds the difference, A_it * w_t * (f_i - 1), as an
// advantage bonus before the algorithm's Finalize.
//
// Our readings and choices (docs/algorithms.md): the solution key stands in
// for the paper's LLM judge: the verifier's solution key where it names one
// (core.SolutionKeyer; countdown: the canonical form of the expression,
// tasks/countdowncanon.go, so that reorderings of + and * are one
// solution), else the final answer's key (core.AnswerKeyer). The power
// form m^(-alpha) with alpha default 1 (plain inverse cluster size) is our
// reading of "inversely with cluster size": we could read the paper's
// abstract and secondary summaries, not its equations. w_t (the entry's
// `weight:` schedule, which the trainer applies to the bonus) blends
// between no reweighting (0) and the full factor (1).
//
// Config keys: alpha (>= 0, finite, default 1); weight, as every entry.
//
// Metrics (Observe): rare_correct/solutions_per_group (distinct keys among
// a group's correct responses, mean over groups with one), and
// rare_correct/factor_mean (mean f over correct responses with a key).
package rarecorrect

import (
	"math"

	"github.com/cde-rl/cde/core"
)

func init() {
	core.RegisterStrategy("rare_correct", New)
}

// RareCorrect reweights correct responses' advantages by solution rarity.
type RareCorrect struct {
	// Alpha is the exponent of the cluster size: f = m^(-Alpha).
	Alpha float64
}

// New builds the strategy from a `strategies:` entry; it works with any
// algorithm that computes advantages.
func New(p *core.Params, _ core.Algorithm) (core.Strategy, error) {
	s := &RareCorrect{Alpha: p.Float("alpha", 1)}
	p.Check(s.Alpha >= 0 && !math.IsInf(s.Alpha, 0), "alpha", "must be a finite number >= 0, got %v", s.Alpha)
	if err := p.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

// Name returns "rare_correct".
func (s *RareCorrect) Name() string { return "rare_correct" }

// Needs asks for the verifier's verdicts (only correct responses are
// clustered and paid); solution and answer keys come with every rollout
// whose verifier names them.
func (s *RareCorrect) Needs() core.Needs { return core.Needs{Correct: true} }

// Key is the response's solution key: Sequence.SolutionKey, else its
// AnswerKey ("" when it has neither).
func Key(q *core.Sequence) string {
	if q.SolutionKey != "" {
		return q.SolutionKey
	}
	return q.AnswerKey
}

// Factors returns f_i = m_i^(-alpha) for every sequence (1 for an incorrect
// response or one without a key), and the number of distinct keys among
// each group's correct responses.
func (s *RareCorrect) Factors(r *core.Rollout) (f []float64, solutions map[int]int) {
	counts := map[int]map[string]int{} // group -> key -> correct responses
	for i := range r.Seqs {
		q := &r.Seqs[i]
		if k := Key(q); q.Correct && k != "" {
			if counts[q.Group] == nil {
				counts[q.Group] = map[string]int{}
			}
			counts[q.Group][k]++
		}
	}
	f = make([]float64, len(r.Seqs))
	for i := range r.Seqs {
		q := &r.Seqs[i]
		f[i] = 1
		if k := Key(q); q.Correct && k != "" {
			f[i] = math.Pow(float64(counts[q.Group][k]), -s.Alpha)
		}
	}
	solutions = map[int]int{}
	for g, c := range counts {
		solutions[g] = len(c)
	}
	return f, solutions
}

// AdvantageBonus returns A_it * (f_i - 1) for every token (the trainer
// multiplies it by w_t).
func (s *RareCorrect) AdvantageBonus(info core.StepInfo, r *core.Rollout) ([][]float64, error) {
	f, _ := s.Factors(r)
	_, out := r.TokenRows(1) // one column (core/columns.go)
	for i := range r.Seqs {
		q := &r.Seqs[i]
		if f[i] == 1 {
			continue
		}
		for t := range out[i] {
			out[i][t] = q.Advantages[t] * (f[i] - 1)
		}
	}
	return out, nil
}

// Observe reports the distinct correct solutions per group and the mean
// factor.
func (s *RareCorrect) Observe(_ core.StepInfo, r *core.Rollout) (map[string]float64, error) {
	f, sols := s.Factors(r)
	m := map[string]float64{}
	if len(sols) > 0 {
		n := 0
		for _, c := range sols {
			n += c
		}
		m["rare_correct/solutions_per_group"] = float64(n) / float64(len(sols))
	}
	sum, n := 0.0, 0
	for i := range r.Seqs {
		if q := &r.Seqs[i]; q.Correct && Key(q) != "" {
			sum += f[i]
			n++
		}
	}
	if n > 0 {
		m["rare_correct/factor_mean"] = sum / float64(n)
	}
	return m, nil
}
