// Package outcomeucb implements outcome-based exploration, registered as
// strategy "outcome_ucb": Song, Kempe and Munos 2025,
// "Outcome-based Exploration for LLM Reasoning", arXiv 2509.06941. The
// bonus depends only on a response's final answer, not on its reasoning:
// answers rarely seen for a problem are paid more, UCB style.
//
// For response i to problem q whose final answer, as the verifier extracts
// and normalises it, is a (Sequence.AnswerKey):
//
//	mode historical (default):
//	N(q, a) = the responses to q with answer a over all earlier steps plus this one
//	b_i     = 1/sqrt(N(q, a)) - b0
//
//	mode batch, for response i of a group of n responses to one prompt:
//	b_i     = -(1/n) * #{j != i in the group : a_j = a_i}
//
// b0 (default 0) is the constant baseline of the paper's "UCB-Con"
// variant; 1/sqrt(N) = min(1, 1/sqrt(N)) because N >= 1. The batch form
// is as a third-party summary of the paper transcribes it
// (b_batch,i = -(1/n) sum_{j != i} 1{a_i = a_j}); we could not read it
// in the paper itself.
//
// Where the bonus is paid (key placement):
//
//	placement advantage (default): A^_i,t = A_i,t + w_t * beta * b_i   for every token t of response i
//	placement reward:              r~_i   = r_i   + w_t * beta * b_i   (before the algorithm's estimator)
//
// The paper's objective adds c*b beside the (normalised) advantage (our
// reading, docs/algorithms.md), so the default is an advantage bonus
// (core.AdvantageHook), added after the algorithm's advantages and after
// its Finalize (core.AfterFinalizer: not rescaled by a group std nor by
// batch whitening). beta -> 0 then gives the algorithm's advantages
// exactly, and in an all-wrong GRPO group (advantage 0) the advantage is
// w_t * beta * b_i, linear in beta. placement reward is the form this
// strategy had first, a reward bonus before the estimator: under GRPO's
// std normalisation the group's std rescales it, so in an all-wrong group
// beta cancels and only the bonus's spread across the group counts (beta
// 0.1 and 0.001 give the same advantages up to GRPO's eps).
//
// Our readings and choices (docs/algorithms.md): "plus this one" counts
// every response of the current step before any bonus, so the responses of
// a step that give one answer get one bonus (SimHash counts in batch
// order instead); a response with no answer gets 0 and is not counted;
// problems are told apart by Sequence.ProblemID (a rollout file without
// problem_id falls back to its group, which is only meaningful within one
// batch). The counts persist across steps and in checkpoints, the same in
// both placements (each step's hook counts once). beta defaults to 0.1:
// the SimHash baseline at beta 1 collapsed GRPO on the countdown testbed
// (docs/results/paper-countdown), and the paper's value was not available
// to us. In batch mode a response with no answer gets 0 and matches
// nothing, and nothing is counted across steps.
//
// Config keys: beta (> 0, default 0.1), mode (historical or batch), b0
// (historical only; finite, >= 0, default 0), placement (advantage or
// reward, default advantage), and the entry's weight (a schedule,
// default constant 1), which the trainer applies to what the strategy
// returns.
//
// Metrics (Observe): outcome_ucb/pairs (distinct (problem, answer) pairs
// seen), outcome_ucb/answers_per_problem (their mean per problem seen);
// batch mode: outcome_ucb/distinct_answers_per_group.
package outcomeucb

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/cde-rl/cde/core"
)

func init() {
	core.RegisterStrategy("outcome_ucb", New)
}

// Placements lists the values of the placement key; the first is the
// default.
var Placements = []string{"advantage", "reward"}

// OutcomeUCB is the outcome bonus's state and formula, shared by the two
// placements New returns it in: *Advantage (placement advantage, the
// default) and *Reward (placement reward). OutcomeUCB itself implements no
// hook, so each placement is called by the trainer through exactly one. It
// is Stateful: the historical counts are saved in checkpoints. Not safe
// for concurrent use.
type OutcomeUCB struct {
	// Beta scales the bonus.
	Beta float64
	// Batch selects the batch form (a penalty for answers repeated within a
	// group) instead of the historical count bonus.
	Batch bool
	// B0 is the historical bonus's constant baseline.
	B0 float64
	// Placement is "advantage" or "reward" (Placements).
	Placement string

	counts map[string]map[string]int // problem -> answer -> N
}

// Advantage is placement advantage: beta * b_i added to every token's
// advantage of response i after the algorithm's advantages and Finalize.
type Advantage struct{ *OutcomeUCB }

// Reward is placement reward: beta * b_i added to response i's reward
// before the algorithm's advantage estimator.
type Reward struct{ *OutcomeUCB }

var (
	_ core.AdvantageHook  = (*Advantage)(nil)
	_ core.AfterFinalizer = (*Advantage)(nil)
	_ core.Observer       = (*Advantage)(nil)
	_ core.Stateful       = (*Advantage)(nil)
	_ core.RewardHook     = (*Reward)(nil)
	_ core.Observer       = (*Reward)(nil)
	_ core.Stateful       = (*Reward)(nil)
)

// New builds the strategy from a `strategies:` entry; it works with any
// algorithm. It returns *Advantage or *Reward, by the placement key.
func New(p *core.Params, _ core.Algorithm) (core.Strategy, error) {
	s := &OutcomeUCB{Beta: p.Float("beta", 0.1), counts: map[string]map[string]int{}}
	p.Check(s.Beta > 0 && !math.IsInf(s.Beta, 0), "beta", "must be a finite number > 0, got %v", s.Beta)
	mode := p.String("mode", "historical")
	p.Check(mode == "historical" || mode == "batch", "mode", "must be historical or batch, got %q", mode)
	s.Batch = mode == "batch"
	s.B0 = p.Float("b0", 0)
	p.Check(s.B0 >= 0 && !math.IsInf(s.B0, 0), "b0", "must be a finite number >= 0, got %v", s.B0)
	p.Check(!s.Batch || s.B0 == 0, "b0", "applies to mode historical only")
	s.Placement = p.String("placement", Placements[0])
	p.Check(slices.Contains(Placements, s.Placement), "placement", "must be advantage or reward, got %q", s.Placement)
	if err := p.Err(); err != nil {
		return nil, err
	}
	if s.Placement == "reward" {
		return &Reward{s}, nil
	}
	return &Advantage{s}, nil
}

// Name returns "outcome_ucb".
func (s *OutcomeUCB) Name() string { return "outcome_ucb" }

// Needs asks for nothing: answer keys come with every rollout whose
// verifier names answers.
func (s *OutcomeUCB) Needs() core.Needs { return core.Needs{} }

func problemKey(q *core.Sequence) string {
	if q.ProblemID != "" {
		return q.ProblemID
	}
	return "group:" + strconv.Itoa(q.Group)
}

// Bonus returns beta * b_i for every response of r (before the weight
// w_t): the batch penalty in batch mode; otherwise it first counts this
// step's (problem, answer) pairs, then returns beta * (1/sqrt(N) - b0) for
// every response with an answer and 0 for one without. Each call is one
// step: the hooks call it once.
func (s *OutcomeUCB) Bonus(r *core.Rollout) []float64 {
	if s.Batch {
		return s.batchBonus(r)
	}
	for i := range r.Seqs {
		q := &r.Seqs[i]
		if q.AnswerKey == "" {
			continue
		}
		k := problemKey(q)
		if s.counts[k] == nil {
			s.counts[k] = map[string]int{}
		}
		s.counts[k][q.AnswerKey]++
	}
	out := make([]float64, len(r.Seqs))
	for i := range r.Seqs {
		q := &r.Seqs[i]
		if q.AnswerKey != "" {
			out[i] = s.Beta * (1/math.Sqrt(float64(s.counts[problemKey(q)][q.AnswerKey])) - s.B0)
		}
	}
	return out
}

// AdvantageBonus returns Bonus's beta * b_i for every token of response i
// (the trainer multiplies it by w_t and adds it to the advantages).
func (s *Advantage) AdvantageBonus(_ core.StepInfo, r *core.Rollout) ([][]float64, error) {
	b := s.Bonus(r)
	_, out := r.TokenRows(1) // one column (core/columns.go)
	for i := range r.Seqs {
		for t := range out[i] {
			out[i][t] = b[i]
		}
	}
	return out, nil
}

// AfterFinalize is true: the bonus is added to the algorithm's final
// advantages (after PPO's or REINFORCE++'s whitening), unscaled.
func (s *Advantage) AfterFinalize() bool { return true }

// RewardBonus returns Bonus's beta * b_i for every response (the trainer
// multiplies it by w_t and adds it to the reward).
func (s *Reward) RewardBonus(_ core.StepInfo, r *core.Rollout) ([]float64, error) {
	return s.Bonus(r), nil
}

// batchBonus is -beta * (1/n) * (the other responses of i's group with i's
// answer), n the group's size.
func (s *OutcomeUCB) batchBonus(r *core.Rollout) []float64 {
	size := map[int]int{}
	same := map[int]map[string]int{}
	for i := range r.Seqs {
		q := &r.Seqs[i]
		size[q.Group]++
		if q.AnswerKey == "" {
			continue
		}
		if same[q.Group] == nil {
			same[q.Group] = map[string]int{}
		}
		same[q.Group][q.AnswerKey]++
	}
	out := make([]float64, len(r.Seqs))
	for i := range r.Seqs {
		q := &r.Seqs[i]
		if q.AnswerKey != "" {
			out[i] = -s.Beta * float64(same[q.Group][q.AnswerKey]-1) / float64(size[q.Group])
		}
	}
	return out
}

// Observe reports the pairs seen and the answers per problem (historical),
// or the mean number of distinct answers per group (batch).
func (s *OutcomeUCB) Observe(info core.StepInfo, r *core.Rollout) (map[string]float64, error) {
	if s.Batch {
		distinct := map[int]map[string]bool{}
		for _, q := range r.Seqs {
			if distinct[q.Group] == nil {
				distinct[q.Group] = map[string]bool{}
			}
			if q.AnswerKey != "" {
				distinct[q.Group][q.AnswerKey] = true
			}
		}
		if len(distinct) == 0 {
			return nil, nil
		}
		total := 0
		for _, d := range distinct {
			total += len(d)
		}
		return map[string]float64{"outcome_ucb/distinct_answers_per_group": float64(total) / float64(len(distinct))}, nil
	}
	pairs := 0
	for _, a := range s.counts {
		pairs += len(a)
	}
	m := map[string]float64{"outcome_ucb/pairs": float64(pairs)}
	if len(s.counts) > 0 {
		m["outcome_ucb/answers_per_problem"] = float64(pairs) / float64(len(s.counts))
	}
	return m, nil
}

// Count is N(problem, answer) so far.
func (s *OutcomeUCB) Count(problem, answer string) int { return s.counts[problem][answer] }

// state is the checkpointed form: the counts, sorted.
type state struct {
	Version int        `json:"version"`
	Rows    []stateRow `json:"counts"`
}

type stateRow struct {
	Problem string `json:"problem"`
	Answer  string `json:"answer"`
	N       int    `json:"n"`
}

// SaveState serialises the counts as JSON, sorted by problem and answer.
func (s *OutcomeUCB) SaveState() ([]byte, error) {
	st := state{Version: 1, Rows: []stateRow{}}
	for q, as := range s.counts {
		for a, n := range as {
			st.Rows = append(st.Rows, stateRow{q, a, n})
		}
	}
	slices.SortFunc(st.Rows, func(x, y stateRow) int {
		return cmp.Or(cmp.Compare(x.Problem, y.Problem), cmp.Compare(x.Answer, y.Answer))
	})
	return json.Marshal(st)
}

// LoadState restores counts saved by SaveState.
func (s *OutcomeUCB) LoadState(data []byte) error {
	var st state
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("outcome_ucb: state: %w", err)
	}
	if st.Version != 1 {
		return fmt.Errorf("outcome_ucb: state version %d, want 1", st.Version)
	}
	counts := map[string]map[string]int{}
	for _, r := range st.Rows {
		if r.N < 1 || r.Answer == "" {
			return fmt.Errorf("outcome_ucb: state: count %d of (%q, %q) out of range", r.N, r.Problem, r.Answer)
		}
		if counts[r.Problem] == nil {
			counts[r.Problem] = map[string]int{}
		}
		if _, dup := counts[r.Problem][r.Answer]; dup {
			return fmt.Errorf("outcome_ucb: state: (%q, %q) listed twice", r.Problem, r.Answer)
		}
		counts[r.Problem][r.Answer] = r.N
	}
	s.counts = counts
	return nil
}
