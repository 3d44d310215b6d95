package core

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// StrategyFactory builds a strategy from its config entry. p holds the
// entry's keys except `name`; the factory must read every key it accepts and
// may call p.Fail for out-of-range values. algo is the configured algorithm
// name (strategies valid only with a critic check it).
type StrategyFactory func(p *Params, algo Algorithm) (Strategy, error)

// AlgorithmFactory builds an algorithm from the `algorithm:` mapping.
type AlgorithmFactory func(p *Params) (Algorithm, error)

var (
	regMu      sync.RWMutex
	strategies = map[string]StrategyFactory{}
	algorithms = map[string]AlgorithmFactory{}
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

// RegisterAlgorithm makes an algorithm available by name (panics on duplicates).
func RegisterAlgorithm(name string, f AlgorithmFactory) {
	regMu.Lock()
	defer regMu.Unlock()
	if f == nil {
		panic("core: RegisterAlgorithm factory is nil for " + name)
	}
	if _, dup := algorithms[name]; dup {
		panic("core: RegisterAlgorithm called twice for " + name)
	}
	algorithms[name] = f
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

// NewAlgorithm builds the named algorithm; an unknown name is an error
// listing the known ones.
func NewAlgorithm(name string, p *Params) (Algorithm, error) {
	regMu.RLock()
	f, ok := algorithms[name]
	regMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("config: algorithm.name: unknown algorithm %q (known: %s)", name, strings.Join(Algorithms(), ", "))
	}
	a, err := f(p)
	if err != nil {
		return nil, err
	}
	if err := p.Finish(); err != nil {
		return nil, err
	}
	return a, nil
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
