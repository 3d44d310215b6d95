package answercount

import (
	"math"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/core/strategytest"
)

func newAC(t *testing.T, params map[string]any) *AnswerCount {
	t.Helper()
	s, err := New(core.NewParams("strategies[0].params", params), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s.(*AnswerCount)
}

func rollout(texts [][]string, correct [][]bool) *core.Rollout {
	r := &core.Rollout{TotalSteps: 10}
	for g, group := range texts {
		for i, text := range group {
			s := core.Sequence{Group: g, ProblemID: string(rune('a' + g)), Text: text, Response: make([]int32, 3), Reward: -1}
			if correct != nil && correct[g][i] {
				s.Correct, s.Reward = true, 1
			}
			r.Seqs = append(r.Seqs, s)
		}
	}
	return r
}

func TestAnswer(t *testing.T) {
	for text, want := range map[string]string{
		"3+4 = 7\nAnswer: 7": "7", "Answer: 1,000.": "1000", "Answer: 7.0\n": "7", "no answer": "", "Answer: $\\boxed{12}$": "12",
	} {
		if got := Answer(text); got != want {
			t.Errorf("Answer(%q) = %q, want %q", text, got, want)
		}
	}
}

func TestBonus(t *testing.T) {
	s := newAC(t, map[string]any{"beta": 1.0})
	r := rollout([][]string{{"Answer: 7", "Answer: 7.0", "Answer: 8", "nothing"}, {"Answer: 1"}}, nil)
	got, err := s.RewardBonus(core.StepInfo{TotalSteps: 10}, r)
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{1 / math.Sqrt(2), 1 / math.Sqrt(2), 1, 0, 1}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Errorf("bonus[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	m, _ := s.Observe(core.StepInfo{}, r)
	if m["explore/answercount/distinct_frac"] != (2.0/4+1)/2 || m["explore/answercount/no_answer_frac"] != 0.2 {
		t.Errorf("metrics %v", m)
	}
}

func TestHistoryAndOnlyCorrect(t *testing.T) {
	s := newAC(t, map[string]any{"beta": 2.0, "history": true, "only_correct": true})
	r := rollout([][]string{{"Answer: 7", "Answer: 8"}}, [][]bool{{true, false}})
	info := core.StepInfo{TotalSteps: 10}
	first, _ := s.RewardBonus(info, r)
	second, _ := s.RewardBonus(info, r)
	if first[0] != 2 || first[1] != 0 || second[0] != 2/math.Sqrt(2) || second[1] != 0 {
		t.Fatalf("bonuses %v then %v", first, second)
	}
	state, _ := s.SaveState()
	fresh := newAC(t, map[string]any{"beta": 2.0, "history": true, "only_correct": true})
	if err := fresh.LoadState(state); err != nil {
		t.Fatal(err)
	}
	third, _ := fresh.RewardBonus(info, r)
	if third[0] != 2/math.Sqrt(3) {
		t.Fatalf("after LoadState: %v", third)
	}
}

func TestParamsStrict(t *testing.T) {
	for params, want := range map[string]map[string]any{
		"strategies[0].params.beta: must be > 0": {"beta": 0},
		"strategies[0].params.betta":             {"betta": 1},
	} {
		p := core.NewParams("strategies[0].params", want)
		_, err := New(p, nil)
		if err == nil {
			err = p.Finish()
		}
		if err == nil || !strings.Contains(err.Error(), params) {
			t.Errorf("%v: error %v, want %q", want, err, params)
		}
	}
}

func TestConformance(t *testing.T) {
	for _, params := range []map[string]any{{}, {"history": true, "no_answer_bonus": 0.1}} {
		strategytest.Run(t, func() core.Strategy {
			s, err := New(core.NewParams("", params), nil)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}, strategytest.Options{})
	}
}
