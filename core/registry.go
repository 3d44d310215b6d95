package core

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
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
	regMu      sync.RWMutex
	strategies = map[string]StrategyFactory{}
	algorithms = map[string]algorithmEntry{}
)

// RegisterStrategy makes a strategy available by name. Like
// database/sql.Register it panics on a duplicate or nil factory; call it from
// an init function.
func RegisterStrategy(name string, f StrategyFactory) {
	regMu.Lock()
	defer regMu.Unlock()
	if f == nil {
		panic("core: RegisterStrategy factory is nil for " + name)
	}
	if _, dup := strategies[name]; dup {
		panic("core: RegisterStrategy called twice for " + name)
	}
	strategies[name] = f
}

// RegisterAlgorithm makes an algorithm available by name, with keys, the
// keys of the `algorithm:` mapping it reads besides the common one (name).
// A key of another registered algorithm is then an error naming that
// algorithm, e.g. `config: algorithm.gamma: not a key of grpo (it belongs to
// ppo)`. Two algorithms may declare the same key. Like
// database/sql.Register it panics on a duplicate name, a nil factory, or a
// key declared twice or common; call it from an init function.
func RegisterAlgorithm(name string, f AlgorithmFactory, keys ...string) {
	regMu.Lock()
	defer regMu.Unlock()
	if f == nil {
		panic("core: RegisterAlgorithm factory is nil for " + name)
	}
	if _, dup := algorithms[name]; dup {
		panic("core: RegisterAlgorithm called twice for " + name)
	}
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
	algorithms[name] = algorithmEntry{factory: f, keys: own}
}

// AlgorithmKeys returns the keys a registered algorithm declared (sorted,
// the common key name excluded); ok is false for an unknown name.
func AlgorithmKeys(name string) (keys []string, ok bool) {
	regMu.RLock()
	defer regMu.RUnlock()
	e, ok := algorithms[name]
	return slices.Clone(e.keys), ok
}

// Strategies lists the registered strategy names, sorted.
func Strategies() []string { return keys(strategies) }

// Algorithms lists the registered algorithm names, sorted.
func Algorithms() []string { return keys(algorithms) }

func keys[V any](m map[string]V) []string {
	regMu.RLock()
	defer regMu.RUnlock()
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// NewAlgorithm builds the named algorithm from p, the `algorithm:`
// mapping. An unknown name is an error listing the known ones; a key of p
// that is neither common (name) nor declared by the algorithm is an error
// naming the algorithms it belongs to, or listing the algorithm's keys. A
// factory reading a key it did not declare is an error too (a bug of the
// algorithm, caught by its first test).
func NewAlgorithm(name string, p *Params) (Algorithm, error) {
	regMu.RLock()
	e, ok := algorithms[name]
	regMu.RUnlock()
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
	for _, k := range sortedNames(p.m) {
		if slices.Contains(own, k) || slices.Contains(algorithmCommonKeys, k) {
			continue
		}
		var owners []string
		regMu.RLock()
		for other, e := range algorithms {
			if slices.Contains(e.keys, k) {
				owners = append(owners, other)
			}
		}
		regMu.RUnlock()
		sort.Strings(owners)
		if len(owners) > 0 {
			p.Fail(k, "not a key of %s (it belongs to %s)", name, strings.Join(owners, ", "))
		} else {
			accepted := append(slices.Clone(algorithmCommonKeys), own...)
			sort.Strings(accepted)
			p.Fail(k, "unknown key (the keys of %s: %s)", name, strings.Join(accepted, ", "))
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
	regMu.RLock()
	f, ok := strategies[name]
	regMu.RUnlock()
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
