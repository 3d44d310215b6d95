// Package tasks provides the verifiable problem sources: the built-in
// arithmetic task "arith", the file-backed task "jsonl", the math dataset
// task "math" (GSM8K, MATH, verl parquet; chat templates; MathVerifier), the
// character tokenizer and the "Answer:" verifier.
package tasks

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/cde-rl/cde/core"
)

// Factory builds a task from its `task:` mapping; p holds every key but
// `name`. It must read every key it accepts (New then rejects the rest).
type Factory func(p *core.Params) (core.Task, error)

var factories = core.NewRegistry[Factory]("tasks: task", core.NotNil[Factory])

func init() {
	Register("arith", func(p *core.Params) (core.Task, error) { return AsTask(NewArith(p)) })
	Register("jsonl", func(p *core.Params) (core.Task, error) { return AsTask(NewJSONL(p)) })
	Register("math", func(p *core.Params) (core.Task, error) { return AsTask(NewMath(p)) })
	Register("countdown", func(p *core.Params) (core.Task, error) { return AsTask(NewCountdown(p)) })
	Register("wordprob", func(p *core.Params) (core.Task, error) { return AsTask(NewWordProb(p)) })
}

// Register makes a task available to `task: {name: NAME}`. Like
// core.RegisterAlgorithm it panics on a duplicate or nil factory; call it
// from an init function (a task in another package registers itself when
// that package is imported).
func Register(name string, f Factory) { factories.Register(name, f) }

// Names lists the registered task names, sorted.
func Names() []string { return factories.Names() }

// New builds the task named by the required key `name` (arith, jsonl, or a registered one) from
// the remaining keys of p (see Arith and JSONL), then calls p.Finish so an
// unknown key is an error naming it.
func New(p *core.Params) (core.Task, error) {
	name := p.String("name", "")
	if err := p.Err(); err != nil {
		return nil, err
	}
	f, ok := factories.Lookup(name)
	if !ok {
		if name == "" {
			return nil, fmt.Errorf("config: %s: required (known: %s)", keyPath(p, "name"), strings.Join(Names(), ", "))
		}
		return nil, fmt.Errorf("config: %s: unknown task %q (known: %s)", keyPath(p, "name"), name, strings.Join(Names(), ", "))
	}
	t, err := f(p)
	if err != nil {
		return nil, err
	}
	if isNil(t) {
		// Most often a constructor's nil *T returned as core.Task: a
		// non-nil interface holding a nil pointer (tasks.AsTask avoids it).
		return nil, fmt.Errorf("task %q: its factory returned a nil task (%T) and no error; return tasks.AsTask(NewT(p)) so a failed constructor's error comes through", name, t)
	}
	if err := p.Finish(); err != nil {
		return nil, err
	}
	return t, nil
}

// AsTask converts a constructor's (*T, error) into a factory's result
// without turning a nil *T into a non-nil core.Task: on error the task is
// a true nil. Use it in a Register factory:
//
//	tasks.Register("mine", func(p *core.Params) (core.Task, error) { return tasks.AsTask(NewMine(p)) })
func AsTask[T core.Task](t T, err error) (core.Task, error) {
	if err != nil {
		return nil, err
	}
	if isNil(t) {
		return nil, nil
	}
	return t, nil
}

// isNil reports whether t is nil or an interface holding a nil pointer,
// map, slice, function or channel.
func isNil(t any) bool {
	if t == nil {
		return true
	}
	switch v := reflect.ValueOf(t); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return v.IsNil()
	}
	return false
}
