package trainer

import (
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
)

type listTask struct {
	fakeTask
	train []core.Problem
	evals []core.EvalSet
}

func (l listTask) TrainProblems() []core.Problem { return l.train }
func (l listTask) EvalSets() []core.EvalSet      { return l.evals }

type limits struct{ prompt, seq int }

func (l limits) MaxPromptTokens(r int) int { return l.prompt - r }
func (l limits) MaxSequenceTokens() int    { return l.seq }

// With fakeTok a prompt of n bytes is n+1 tokens (BOS); the limit here is
// 10 - max_response_tokens (3) = 7 tokens, so 6 bytes fit and 7 do not.
func TestCheckPromptLengths(t *testing.T) {
	ok := core.Problem{ID: "a", Prompt: "123456", Answer: "1", Source: "train.jsonl:1"}
	long := core.Problem{ID: "b", Prompt: "1234567", Answer: "1", Source: "train.jsonl:2"}
	longSol := core.Problem{ID: "c", Prompt: "1", Answer: "1", Solution: "Answer: 12345678", Source: "train.jsonl:3"}
	cases := []struct {
		name    string
		task    listTask
		withSol bool
		want    string
	}{
		{"fits", listTask{train: []core.Problem{ok}}, false, ""},
		{"long train prompt", listTask{train: []core.Problem{ok, long}}, false, "task: train.jsonl:2: the prompt is 8 tokens; with rollout.max_response_tokens = 3 the model fits prompts of at most 7"},
		{"long eval prompt, no source", listTask{evals: []core.EvalSet{{Name: "l1", Problems: []core.Problem{{ID: "e7", Prompt: "1234567"}}}}}, false, `eval set l1 problem "e7": the prompt is 8 tokens`},
		// 2 (BOS, "1") + 16 + EOS = 19 > 18.
		{"long solution, warm start", listTask{train: []core.Problem{longSol}}, true, "task: train.jsonl:3: prompt + solution is 19 tokens, more than the model's 18"},
		{"long solution, RL only", listTask{train: []core.Problem{longSol}}, false, ""},
	}
	for _, c := range cases {
		err := core.CheckPromptLengths(c.task, limits{prompt: 10, seq: 18}, 3, c.withSol)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}
