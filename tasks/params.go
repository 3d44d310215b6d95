package tasks

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/cde-rl/cde/core"
)

// Helpers for list-valued keys, which core.Params has no reader for.

// keyPath is the full name of key k of p, as core.Params prints it.
func keyPath(p *core.Params, k string) string {
	if p.Path == "" {
		return k
	}
	return p.Path + "." + k
}

// readInts reads an integer list (a single integer counts as a one-element
// list); def when absent.
func readInts(p *core.Params, k string, def []int) []int {
	v, ok := p.Raw(k)
	if !ok {
		return def
	}
	var items []any
	switch x := v.(type) {
	case []any:
		items = x
	case []int:
		return append([]int(nil), x...)
	default:
		items = []any{v}
	}
	out := make([]int, 0, len(items))
	for i, it := range items {
		f, ok := core.ToFloat(it)
		if _, isStr := it.(string); isStr || !ok || f != math.Trunc(f) || math.IsInf(f, 0) {
			p.Fail(k, "item %d: want an integer, got %s", i, core.DescribeValue(it))
			return def
		}
		out = append(out, int(f))
	}
	return out
}

// readMaps reads a list of mappings as strict Params named "k[i]"; nil when
// absent.
func readMaps(p *core.Params, k string) ([]*core.Params, bool) {
	v, ok := p.Raw(k)
	if !ok || v == nil {
		return nil, ok
	}
	items, isList := v.([]any)
	if !isList {
		if ms, isMaps := v.([]map[string]any); isMaps {
			for _, m := range ms {
				items = append(items, m)
			}
		} else {
			p.Fail(k, "want a list of mappings, got %s", core.DescribeValue(v))
			return nil, true
		}
	}
	out := make([]*core.Params, 0, len(items))
	for i, it := range items {
		m, isMap := it.(map[string]any)
		if !isMap {
			p.Fail(k, "item %d: want a mapping, got %s", i, core.DescribeValue(it))
			return nil, true
		}
		out = append(out, core.NewParams(fmt.Sprintf("%s[%d]", keyPath(p, k), i), m))
	}
	return out, true
}

// readLevelSets reads a list of {name, level, split} eval-set mappings
// (arith's and countdown's eval_sets): name required and unique, level
// required in lo..hi, split val (default) or test. It returns def when the
// key is absent.
func readLevelSets(p *core.Params, key string, lo, hi int, def []ArithEvalSpec) ([]ArithEvalSpec, error) {
	subs, set := readMaps(p, key)
	if err := p.Err(); err != nil {
		return nil, err
	}
	if !set {
		return append([]ArithEvalSpec(nil), def...), nil
	}
	var out []ArithEvalSpec
	seen := map[string]bool{}
	for _, sp := range subs {
		s := ArithEvalSpec{Name: sp.String("name", ""), Level: sp.Int("level", 0), Split: SplitVal}
		if sp.OneOf("split", "val", "val", "test") == "test" {
			s.Split = SplitTest
		}
		sp.Check(s.Name != "", "name", "required")
		sp.Check(!seen[s.Name], "name", "duplicate eval set name %q", s.Name)
		seen[s.Name] = true
		if !sp.Has("level") {
			sp.Fail("level", "required")
		}
		sp.Check(s.Level >= lo && s.Level <= hi, "level", "level %d out of range %d..%d", s.Level, lo, hi)
		if err := sp.Finish(); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// sampleUniform draws n items of list uniformly, with replacement.
func sampleUniform(rng *rand.Rand, list []core.Problem, n int) []core.Problem {
	out := make([]core.Problem, 0, max(n, 0))
	for range n {
		out = append(out, list[rng.IntN(len(list))])
	}
	return out
}
