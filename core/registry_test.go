package core

import (
	"strings"
	"testing"
)

// keyAlgo is a do-nothing algorithm for the registry tests; its factory
// reads the keys in reads.
type keyAlgo struct{ name string }

func (a keyAlgo) Name() string              { return a.name }
func (a keyAlgo) NeedsCritic() bool         { return false }
func (a keyAlgo) Advantages(*Rollout) error { return nil }
func (a keyAlgo) Finalize(*Rollout) error   { return nil }

func keyAlgoFactory(name string, reads ...string) AlgorithmFactory {
	return func(p *Params) (Algorithm, error) {
		for _, k := range reads {
			p.Float(k, 0)
		}
		return keyAlgo{name}, p.Err()
	}
}

// Three test algorithms: x-one reads alpha and shared, x-two reads beta and
// shared, x-sneaky declares gamma_x but also reads an undeclared key.
func init() {
	RegisterAlgorithm("x-one", keyAlgoFactory("x-one", "alpha", "shared"), "alpha", "shared")
	RegisterAlgorithm("x-two", keyAlgoFactory("x-two", "beta", "shared"), "shared", "beta")
	RegisterAlgorithm("x-sneaky", keyAlgoFactory("x-sneaky", "gamma_x", "undeclared"), "gamma_x")
}

func TestAlgorithmKeys(t *testing.T) {
	tests := []struct {
		name, algo string
		m          map[string]any
		want       string // "" for success, else the exact error
	}{
		{"own keys and name", "x-one", map[string]any{"name": "x-one", "alpha": 1, "shared": 2}, ""},
		{"no keys", "x-two", nil, ""},
		{"another's key", "x-one", map[string]any{"beta": 1},
			"config: algorithm.beta: not a key of x-one (it belongs to x-two)"},
		{"the first foreign key in sorted order", "x-two", map[string]any{"gamma_x": 1, "alpha": 1},
			"config: algorithm.alpha: not a key of x-two (it belongs to x-one)"},
		{"unknown key", "x-one", map[string]any{"bogus": true},
			"config: algorithm.bogus: unknown key (the keys of x-one: alpha, name, shared)"},
		{"a bad value of an own key", "x-one", map[string]any{"alpha": "many"},
			"config: algorithm.alpha: want a number, got \"many\" (a string)"},
		{"an undeclared read", "x-sneaky", nil,
			`core: algorithm x-sneaky reads key "undeclared", which its RegisterAlgorithm call does not declare`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := NewAlgorithm(tc.algo, NewParams("algorithm", tc.m))
			if tc.want == "" {
				if err != nil || a.Name() != tc.algo {
					t.Fatalf("got %v, %v; want %s", a, err, tc.algo)
				}
				return
			}
			if err == nil || err.Error() != tc.want {
				t.Fatalf("err = %v\nwant %s", err, tc.want)
			}
		})
	}
}

func TestAlgorithmKeysListed(t *testing.T) {
	if keys, ok := AlgorithmKeys("x-two"); !ok || strings.Join(keys, ",") != "beta,shared" {
		t.Fatalf("AlgorithmKeys(x-two) = %v, %v; want [beta shared] (sorted), true", keys, ok)
	}
	if _, ok := AlgorithmKeys("x-none"); ok {
		t.Fatal("AlgorithmKeys of an unknown algorithm: ok")
	}
}

func TestRegisterAlgorithmPanics(t *testing.T) {
	f := keyAlgoFactory("p")
	for _, tc := range []struct {
		name string
		reg  func()
		want string
	}{
		{"duplicate", func() { RegisterAlgorithm("x-one", f) }, "registered twice"},
		{"nil factory", func() { RegisterAlgorithm("x-nil", nil) }, "nil"},
		{"common key", func() { RegisterAlgorithm("x-name", f, "name") }, "common key name"},
		{"key twice", func() { RegisterAlgorithm("x-twice", f, "a", "b", "a") }, `"a" twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				p := recover()
				if s, _ := p.(string); !strings.Contains(s, tc.want) {
					t.Fatalf("panic %v, want one containing %q", p, tc.want)
				}
			}()
			tc.reg()
		})
	}
}
