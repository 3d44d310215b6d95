// Package answercount is an example exploration strategy shipped as a
// plugin: a count bonus over the normalised final answers of a prompt's
// responses, which rewards responses that reach a rarer answer.
//
// For each prompt (group) of the batch, the final answer of every response
// is extracted ("Answer: ..." on its last such line, as the task verifier
// does) and normalised (answer.Normalize: "1,000." and "1000" are the
// same answer). With c(a) the number of the group's responses giving answer
// a — plus, with history: true, the times that answer was given to the same
// problem in earlier steps —
//
//	bonus_i = w_t * beta / sqrt(c(a_i))
//
// so a response that agrees with many others earns less than one that
// explores a different answer; a response without an answer gets
// no_answer_bonus (default 0). With only_correct: true the bonus goes to
// correct responses only (a rare correct answer: the group mostly failed,
// so finding the answer is worth more).
//
// This is not one of the paper's bonuses: SimHash counts hidden-state
// codes, this counts outcomes, which needs no embeddings and is
// interpretable ("7 distinct answers per 8 samples").
//
// Config keys (the entry's params): beta (> 0, default 0.5), history (bool,
// default false), only_correct (bool, default false), no_answer_bonus
// (number >= 0, default 0), weight (schedule, default constant 1).
//
// Metrics: explore/answercount/distinct_frac (distinct answers /
// responses, mean over groups), explore/answercount/no_answer_frac,
// explore/answercount/problems (problems in the history). The names carry
// their explore/answercount/ prefix already, so they read the same in
// process and through the plugin host (which adds the prefix to names
// without it).
package answercount

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/tasks/answer"
)

// AnswerCount is the strategy. With History it is Stateful.
type AnswerCount struct {
	Beta          float64
	History       bool
	OnlyCorrect   bool
	NoAnswerBonus float64
	Weight        core.WeightSchedule

	seen map[string]map[string]int // problem id -> answer -> count
}

// New builds the strategy from its params (a core.StrategyFactory).
func New(p *core.Params, _ core.Algorithm) (core.Strategy, error) {
	s := &AnswerCount{
		Beta:          p.Float("beta", 0.5),
		History:       p.Bool("history", false),
		OnlyCorrect:   p.Bool("only_correct", false),
		NoAnswerBonus: p.Float("no_answer_bonus", 0),
		seen:          map[string]map[string]int{},
	}
	p.Check(s.Beta > 0, "beta", "must be > 0, got %v", s.Beta)
	p.Check(s.NoAnswerBonus >= 0, "no_answer_bonus", "must be >= 0, got %v", s.NoAnswerBonus)
	w := p.Sub("weight")
	s.Weight = core.ParseSchedule(w)
	if err := p.Err(); err != nil {
		return nil, err
	}
	if err := w.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

// Name returns "answercount".
func (s *AnswerCount) Name() string { return "answercount" }

// Needs: the strategy reads response texts, and with only_correct the
// verifier's verdicts (Correct).
func (s *AnswerCount) Needs() core.Needs { return core.Needs{Correct: s.OnlyCorrect} }

// Answer is the normalised final answer of a response ("" for none).
func Answer(text string) string {
	raw, ok := answer.Extract(text)
	if !ok {
		return ""
	}
	return answer.Normalize(raw)
}

// counts returns, for every sequence, its answer and c(answer) (history
// included), without changing the history.
func (s *AnswerCount) counts(r *core.Rollout) ([]string, []int) {
	answers := make([]string, len(r.Seqs))
	counts := make([]int, len(r.Seqs))
	for _, g := range r.Groups() {
		local := map[string]int{}
		for _, i := range g {
			answers[i] = Answer(r.Seqs[i].Text)
			if answers[i] != "" {
				local[answers[i]]++
			}
		}
		for _, i := range g {
			if a := answers[i]; a != "" {
				counts[i] = local[a]
				if s.History {
					counts[i] += s.seen[r.Seqs[i].ProblemID][a]
				}
			}
		}
	}
	return answers, counts
}

// RewardBonus returns w_t * beta / sqrt(c(a_i)) per response and, with
// history, adds the batch's answers to it.
func (s *AnswerCount) RewardBonus(info core.StepInfo, r *core.Rollout) ([]float64, error) {
	w := s.Weight.Weight(info.Step, info.TotalSteps)
	answers, counts := s.counts(r)
	out := make([]float64, len(r.Seqs))
	for i := range r.Seqs {
		switch {
		case s.OnlyCorrect && !r.Seqs[i].Correct:
		case answers[i] == "":
			out[i] = w * s.NoAnswerBonus
		default:
			out[i] = w * s.Beta / math.Sqrt(float64(counts[i]))
		}
	}
	if s.History {
		for i := range r.Seqs {
			if a := answers[i]; a != "" {
				id := r.Seqs[i].ProblemID
				if s.seen[id] == nil {
					s.seen[id] = map[string]int{}
				}
				s.seen[id][a]++
			}
		}
	}
	return out, nil
}

// Observe reports the answer diversity of the batch.
func (s *AnswerCount) Observe(info core.StepInfo, r *core.Rollout) (map[string]float64, error) {
	m := map[string]float64{"explore/answercount/problems": float64(len(s.seen))}
	groups := r.Groups()
	if len(groups) == 0 {
		return m, nil
	}
	distinct, none := 0.0, 0
	for _, g := range groups {
		set := map[string]bool{}
		for _, i := range g {
			a := Answer(r.Seqs[i].Text)
			if a == "" {
				none++
				continue
			}
			set[a] = true
		}
		distinct += float64(len(set)) / float64(len(g))
	}
	m["explore/answercount/distinct_frac"] = distinct / float64(len(groups))
	m["explore/answercount/no_answer_frac"] = float64(none) / float64(len(r.Seqs))
	return m, nil
}

type state struct {
	Version  int                       `json:"version"`
	Problems map[string]map[string]int `json:"problems"`
}

// SaveState saves the answer history (JSON; encoding/json sorts map keys,
// so the bytes are repeatable).
func (s *AnswerCount) SaveState() ([]byte, error) {
	return json.Marshal(state{Version: 1, Problems: s.seen})
}

// LoadState restores SaveState's history.
func (s *AnswerCount) LoadState(data []byte) error {
	var st state
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("answercount: state: %w", err)
	}
	if st.Version != 1 {
		return fmt.Errorf("answercount: state version %d, want 1", st.Version)
	}
	seen := map[string]map[string]int{}
	for id, answers := range st.Problems {
		for a, n := range answers {
			if n <= 0 {
				return fmt.Errorf("answercount: state: count %d for problem %q answer %q", n, id, a)
			}
			if seen[id] == nil {
				seen[id] = map[string]int{}
			}
			seen[id][a] = n
		}
	}
	s.seen = seen
	return nil
}

// Problems lists the problem ids in the history, sorted.
func (s *AnswerCount) Problems() []string {
	out := make([]string, 0, len(s.seen))
	for id := range s.seen {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}
