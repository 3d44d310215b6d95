package core

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// StrategyFactory builds a strategy from its config entry. p holds the
// entry's keys except `name`; the factory must read every key it accepts and
// may call p.Fail for out-of-range values. algo is the configured algorithm
// name (strategies valid only with a critic check it).
type StrategyFactory func(p *Params, algo Algorithm) (Strategy, error)

// AlgorithmFactory builds an algorithm from the `algorithm:` mapping. It
// may read only the keys its RegisterAlgorithm call declares.
type AlgorithmFactory func(p *Params) (Algorithm, error)

// algorithmCommonKeys are the keys of the `algorithm:` mapping that belong
// to no one algorithm: read by whoever builds the run, declared here once.
var algorithmCommonKeys = []string{"name"}

type algorithmEntry struct {
	factory AlgorithmFactory
	keys    []string // sorted; the common keys excluded
}

var (
	strategies = NewRegistry[StrategyFactory]("core: strategy", NotNil[StrategyFactory])
	algorithms = NewRegistry("core: algorithm", func(_ string, e algorithmEntry) string { return NotNil("", e.factory) })
)

// RegisterStrategy makes a strategy available by name. Like
// database/sql.Register it panics on a duplicate or nil factory; call it from
// an init function.
func RegisterStrategy(name string, f StrategyFactory) { strategies.Register(name, f) }

// RegisterAlgorithm makes an algorithm available by name, with keys, the
// keys of the `algorithm:` mapping it reads besides the common one (name).
// A key of another registered algorithm is then an error naming that
// algorithm, e.g. `config: algorithm.gamma: not a key of grpo (it belongs to
// ppo)`. Two algorithms may declare the same key. Like
// database/sql.Register it panics on a duplicate name, a nil factory, or a
// key declared twice or common; call it from an init function.
func RegisterAlgorithm(name string, f AlgorithmFactory, keys ...string) {
	own := slices.Clone(keys)
	sort.Strings(own)
	for i, k := range own {
		if slices.Contains(algorithmCommonKeys, k) {
			panic("core: RegisterAlgorithm: " + name + " declares the common key " + k)
		}
		if k == "" || i > 0 && own[i-1] == k {
			panic(fmt.Sprintf("core: RegisterAlgorithm: %s declares key %q twice or empty", name, k))
		}
	}
	algorithms.Register(name, algorithmEntry{factory: f, keys: own})
}

// AlgorithmKeys returns the keys a registered algorithm declared (sorted,
// the common key name excluded); ok is false for an unknown name.
func AlgorithmKeys(name string) (keys []string, ok bool) {
	e, ok := algorithms.Lookup(name)
	return slices.Clone(e.keys), ok
}

// Strategies lists the registered strategy names, sorted.
func Strategies() []string { return strategies.Names() }

// Algorithms lists the registered algorithm names, sorted.
func Algorithms() []string { return algorithms.Names() }

// NewAlgorithm builds the named algorithm from p, the `algorithm:`
// mapping. An unknown name is an error listing the known ones; a key of p
// that is neither common (name) nor declared by the algorithm is an error
// naming the algorithms it belongs to, or listing the algorithm's keys. A
// factory reading a key it did not declare is an error too (a bug of the
// algorithm, caught by its first test).
func NewAlgorithm(name string, p *Params) (Algorithm, error) {
	e, ok := algorithms.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("config: algorithm.name: unknown algorithm %q (known: %s)", name, strings.Join(Algorithms(), ", "))
	}
	if err := checkAlgorithmKeys(name, e.keys, p); err != nil {
		return nil, err
	}
	for _, k := range algorithmCommonKeys {
		p.used[k] = true // read by whoever builds the run, not by the factory
	}
	a, err := e.factory(p)
	if err != nil {
		return nil, err
	}
	for _, k := range sortedNames(p.used) {
		if !slices.Contains(e.keys, k) && !slices.Contains(algorithmCommonKeys, k) {
			return nil, fmt.Errorf("core: algorithm %s reads key %q, which its RegisterAlgorithm call does not declare", name, k)
		}
	}
	if err := p.Finish(); err != nil {
		return nil, err
	}
	return a, nil
}

// checkAlgorithmKeys rejects, in sorted order, the first key of p that is
// neither common nor one of own: by the algorithms it belongs to, or as
// unknown, listing the keys name accepts.
func checkAlgorithmKeys(name string, own []string, p *Params) error {
	return checkDeclaredKeys(p, name, append(slices.Clone(algorithmCommonKeys), own...), func(k string) []string {
		var owners []string
		algorithms.Each(func(other string, e algorithmEntry) {
			if slices.Contains(e.keys, k) {
				owners = append(owners, other)
			}
		})
		return owners
	})
}

// checkDeclaredKeys records on p, and returns, an error for the first key
// of p (in sorted order) that accepted lacks: "not a key of NAME (it
// belongs to ...)" when owners names other registrations declaring it,
// else "unknown key (the keys of NAME: ...)". Algorithms and policy losses
// check their mappings with it.
func checkDeclaredKeys(p *Params, name string, accepted []string, owners func(k string) []string) error {
	for _, k := range sortedNames(p.m) {
		if slices.Contains(accepted, k) {
			continue
		}
		if others := owners(k); len(others) > 0 {
			p.Fail(k, "not a key of %s (it belongs to %s)", name, strings.Join(others, ", "))
		} else {
			keys := "none"
			if len(accepted) > 0 {
				sorted := slices.Clone(accepted)
				sort.Strings(sorted)
				keys = strings.Join(sorted, ", ")
			}
			p.Fail(k, "unknown key (the keys of %s: %s)", name, keys)
		}
		return p.Err()
	}
	return nil
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// NewStrategy builds the named strategy; an unknown name is an error listing
// the known ones.
func NewStrategy(name string, p *Params, algo Algorithm) (Strategy, error) {
	f, ok := strategies.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("config: %s.name: unknown strategy %q (known: %s)", p.Path, name, strings.Join(Strategies(), ", "))
	}
	s, err := f(p, algo)
	if err != nil {
		return nil, err
	}
	if err := p.Finish(); err != nil {
		return nil, err
	}
	return s, nil
}
