package tasks

import (
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
)

func TestNew(t *testing.T) {
	if got := strings.Join(Names(), ","); got != "arith,jsonl" {
		t.Errorf("Names = %s", got)
	}
	task, err := New(core.NewParams("task", map[string]any{"name": "arith"}))
	if err != nil || task.Name() != "arith" {
		t.Fatalf("New(arith) = %v, %v", task, err)
	}
	cases := []struct {
		m    map[string]any
		want string
	}{
		{map[string]any{"name": "gsm8k"}, `config: task.name: unknown task "gsm8k" (known: arith, jsonl)`},
		{map[string]any{}, "config: task.name: required (known: arith, jsonl)"},
		{map[string]any{"name": 3}, "config: task.name: want a string"},
		{map[string]any{"name": "arith", "path": "x"}, "config: task.path: unknown key"},
	}
	for _, c := range cases {
		task, err := New(core.NewParams("task", c.m))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || task != nil {
			t.Errorf("New(%v) = %v, %v; want nil and an error starting %q", c.m, task, err, c.want)
		}
	}
}
