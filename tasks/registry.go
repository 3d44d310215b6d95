// Package tasks provides the verifiable problem sources: the built-in
// arithmetic task "arith", the file-backed task "jsonl", the character
// tokenizer they share and the "Answer:" verifier.
package tasks

import (
	"fmt"
	"sort"
	"strings"

	"github.com/cde-rl/cde/core"
)

var factories = map[string]func(*core.Params) (core.Task, error){
	"arith": func(p *core.Params) (core.Task, error) { return asTask(NewArith(p)) },
	"jsonl": func(p *core.Params) (core.Task, error) { return asTask(NewJSONL(p)) },
}

// Names lists the known task names, sorted.
func Names() []string {
	out := make([]string, 0, len(factories))
	for k := range factories {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// New builds the task named by the required key `name` (arith or jsonl) from
// the remaining keys of p (see Arith and JSONL), then calls p.Finish so an
// unknown key is an error naming it.
func New(p *core.Params) (core.Task, error) {
	name := p.String("name", "")
	if err := p.Err(); err != nil {
		return nil, err
	}
	f, ok := factories[name]
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
	if err := p.Finish(); err != nil {
		return nil, err
	}
	return t, nil
}

// asTask converts without turning a nil pointer into a non-nil interface.
func asTask[T core.Task](t T, err error) (core.Task, error) {
	if err != nil {
		return nil, err
	}
	return t, nil
}
