package tasks

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
)

// The expectations derive from the registry, so a task added in-tree or by
// a test does not break this one: the built-ins are registered and Names is
// sorted; the errors list whatever Names holds.
func TestNew(t *testing.T) {
	names := Names()
	if !slices.IsSorted(names) {
		t.Errorf("Names = %v, not sorted", names)
	}
	for _, want := range []string{"arith", "countdown", "jsonl", "math"} {
		if !slices.Contains(names, want) {
			t.Errorf("built-in task %s is not registered (Names = %v)", want, names)
		}
	}
	known := strings.Join(names, ", ")
	task, err := New(core.NewParams("task", map[string]any{"name": "arith"}))
	if err != nil || task.Name() != "arith" {
		t.Fatalf("New(arith) = %v, %v", task, err)
	}
	cases := []struct {
		m    map[string]any
		want string
	}{
		{map[string]any{"name": "no-such-task-§"}, `config: task.name: unknown task "no-such-task-§" (known: ` + known + ")"},
		{map[string]any{}, "config: task.name: required (known: " + known + ")"},
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

// A task registered from outside is built by name; its unread keys are
// errors; registering a name twice or a nil factory panics.
func TestRegister(t *testing.T) {
	Register("test-echo", func(p *core.Params) (core.Task, error) {
		p.Int("size", 1)
		return NewArith(core.NewParams(p.Path, map[string]any{}))
	})
	if !strings.Contains(strings.Join(Names(), ","), "test-echo") {
		t.Fatalf("Names = %v", Names())
	}
	if _, err := New(core.NewParams("task", map[string]any{"name": "test-echo", "size": 3})); err != nil {
		t.Fatal(err)
	}
	if _, err := New(core.NewParams("task", map[string]any{"name": "test-echo", "sise": 3})); err == nil || !strings.Contains(err.Error(), "task.sise: unknown key") {
		t.Fatalf("unknown key: %v", err)
	}
	// A factory that hands back a constructor's nil *T as core.Task, with
	// or without an error: the error comes through, and a nil task without
	// one is an error naming the task, never a task that panics later.
	Register("test-typed-nil", func(p *core.Params) (core.Task, error) {
		var a *Arith
		if p.Bool("fail", false) {
			return a, errors.New("test-typed-nil: cannot build")
		}
		return a, nil
	})
	if _, err := New(core.NewParams("task", map[string]any{"name": "test-typed-nil", "fail": true})); err == nil || err.Error() != "test-typed-nil: cannot build" {
		t.Fatalf("failed constructor: %v", err)
	}
	if task, err := New(core.NewParams("task", map[string]any{"name": "test-typed-nil"})); err == nil ||
		!strings.Contains(err.Error(), `task "test-typed-nil": its factory returned a nil task (*tasks.Arith) and no error`) {
		t.Fatalf("a nil *Arith task: %v, %v", task, err)
	}
	if task, err := AsTask((*Arith)(nil), nil); task != nil || err != nil {
		t.Fatalf("AsTask of a nil *Arith: %#v, %v", task, err)
	}
	for _, f := range []func(){
		func() { Register("test-echo", func(p *core.Params) (core.Task, error) { return nil, nil }) },
		func() { Register("test-nil", nil) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			f()
		}()
	}
}
