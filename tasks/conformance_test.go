package tasks_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/tasks"
	"github.com/cde-rl/cde/tasks/tasktest"
)

// registered is the registry as the package's init functions left it,
// read before any test registers a name of its own (TestRegister does).
var registered = tasks.Names()

// kitCase is one configuration of a task for the conformance kit: the
// `task:` mapping less name, and what the kit needs to know.
type kitCase struct {
	label string
	task  map[string]any
	opts  tasktest.Options
}

// kitCases are the configurations the kit runs on, by task name. A
// registered task missing here runs once with {name: NAME} alone; a task
// that needs keys (a file) or a right response other than its warm-start
// Solution (Options.Right) gets an entry.
func kitCases(t *testing.T) map[string][]kitCase {
	dir := t.TempDir()
	// Sums worked out by hand; the eval prompts are not training prompts.
	train := write(t, dir, "train.jsonl", `{"prompt": "3+4=", "answer": "7"}
{"prompt": "12+30=", "answer": 42}
{"prompt": "9-11=", "answer": "-2", "id": "neg"}
{"prompt": "5+5=", "answer": "10", "solution": "5+5=10\nAnswer: 10"}
{"prompt": "20-7=", "answer": "13"}
{"prompt": "0.5+0.25=", "answer": "0.75", "level": 2}
{"prompt": "8+8=", "answer": "16"}
{"prompt": "100-1=", "answer": "99"}
`)
	eval := write(t, dir, "eval.jsonl", `{"prompt": "6+7=", "answer": "13"}
{"prompt": "40+2=", "answer": "42"}
{"prompt": "1-3=", "answer": "-2"}
`)
	gsm := func(elem ...string) string { return filepath.Join(append([]string{"testdata"}, elem...)...) }
	return map[string][]kitCase{
		"arith": {
			{label: "defaults"},
			{label: "levels 1 to 3, plus only, test split", task: map[string]any{"levels": []any{1, 2, 3}, "ops": "+", "eval_n": 50,
				"eval_sets": []any{map[string]any{"name": "t1", "level": 1, "split": "test"}, map[string]any{"name": "t3", "level": 3, "split": "test"}}}},
			{label: "rewards 0/1", task: map[string]any{"correct_reward": 1, "incorrect_reward": 0}},
		},
		"countdown": {
			// Any expression reaching the target is right, and eval
			// problems carry no warm-start solution: take the first of
			// all the solutions.
			{label: "defaults", opts: tasktest.Options{Right: countdownRight}},
			{label: "level 2, test split", task: map[string]any{"levels": []any{2}, "eval_n": 40,
				"eval_sets": []any{map[string]any{"name": "c2", "level": 2}, map[string]any{"name": "c3", "level": 3, "split": "test"}}},
				opts: tasktest.Options{Right: countdownRight}},
		},
		"jsonl": {
			{label: "files", task: map[string]any{"path": train, "eval": []any{map[string]any{"name": "held", "path": eval}}}},
			{label: "no eval, rewards 2/-3", task: map[string]any{"path": train, "correct_reward": 2, "incorrect_reward": -3}},
		},
		"math": {
			{label: "gsm8k jsonl", task: map[string]any{"train": gsm("gsm8k", "train_head200.jsonl"),
				"eval": []any{map[string]any{"name": "gsm8k", "path": gsm("gsm8k", "test.jsonl")}}}},
			{label: "verl parquet, dapo prompt", task: map[string]any{"train": gsm("math", "verl_gsm8k_train.parquet"), "prompt_template": "dapo",
				"eval": []any{map[string]any{"name": "test", "path": gsm("math", "verl_gsm8k_test.parquet")}}}},
			{label: "MATH style", task: map[string]any{"train": gsm("math", "math_style.jsonl"), "chat_template": "chatml"}},
		},
	}
}

// countdownRight answers with the first expression reaching the target.
func countdownRight(p core.Problem) string {
	nums, target, err := tasks.ParseCountdownPrompt(p.Prompt)
	if err != nil {
		return ""
	}
	sols := tasks.CountdownSolutions(nums, target)
	if len(sols) == 0 {
		return ""
	}
	return tasks.AnswerMarker + " " + sols[0]
}

func write(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Every registered task keeps the contract of core.Task (tasks/tasktest:
// disjoint splits, deterministic sampling, the verifier on right, wrong,
// missing and malformed answers), in each configuration of kitCases.
func TestEveryTaskConforms(t *testing.T) {
	for _, want := range []string{"arith", "countdown", "jsonl", "math"} {
		if !slices.Contains(registered, want) {
			t.Fatalf("task %s is not registered (registered: %v)", want, registered)
		}
	}
	cases := kitCases(t)
	for _, name := range registered {
		list, ok := cases[name]
		if !ok {
			list = []kitCase{{label: "defaults"}}
		}
		for _, c := range list {
			t.Run(name+"/"+c.label, func(t *testing.T) {
				m := map[string]any{"name": name}
				for k, v := range c.task {
					m[k] = v
				}
				task, err := tasks.New(core.NewParams("task", m))
				if err != nil {
					t.Fatalf("building task %s: %v (a task that needs keys gets them in kitCases, tasks/conformance_test.go)", name, err)
				}
				tasktest.Run(t, task, c.opts)
			})
		}
	}
}
