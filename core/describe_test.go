package core

import (
	"strings"
	"testing"
)

// Params' errors word a value as the config shows it (never a Go type
// such as []interface {} or float64) and suggest the closest known key or
// value when a typo explains it.
func TestParamsMessages(t *testing.T) {
	cases := []struct {
		name string
		m    map[string]any
		read func(p *Params)
		want string
	}{
		{"number from a list", map[string]any{"alpha": []any{4}}, func(p *Params) { p.Float("alpha", 0) },
			"config: s.alpha: want a number, got [4] (a list of 1 number)"},
		{"integer from a string", map[string]any{"n": "eight"}, func(p *Params) { p.Int("n", 0) },
			`config: s.n: want an integer, got "eight" (a string)`},
		{"bool from a mapping", map[string]any{"on": map[string]any{"b": 1, "a": "x"}}, func(p *Params) { p.Bool("on", false) },
			`config: s.on: want true or false, got {a: "x", b: 1} (a mapping)`},
		{"string from a number", map[string]any{"name": 1.5}, func(p *Params) { p.String("name", "") },
			"config: s.name: want a string, got 1.5"},
		{"mapping from null", map[string]any{"sub": []any{}}, func(p *Params) { p.Map("sub") },
			"config: s.sub: want a mapping, got [] (an empty list)"},
		{"a typo of a key", map[string]any{"stepz": 3}, func(p *Params) { p.Int("steps", 1); p.Int("seed", 1) },
			"config: s.stepz: unknown key, did you mean s.steps? (known keys here: seed, steps)"},
		{"a key close to none", map[string]any{"zzzzzz": 3}, func(p *Params) { p.Int("steps", 1) },
			"config: s.zzzzzz: unknown key (known keys here: steps)"},
		{"a typo of a value", map[string]any{"mode": "meen"}, func(p *Params) { p.OneOf("mode", "mean", "mean", "max") },
			`config: s.mode: unknown value "meen", did you mean "mean"? (known: mean, max)`},
		{"two values equally close", map[string]any{"k": "k4"}, func(p *Params) { p.OneOf("k", "k1", "k1", "k2", "k3") },
			`config: s.k: unknown value "k4" (known: k1, k2, k3)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := NewParams("s", c.m)
			c.read(p)
			err := p.Finish()
			if err == nil || err.Error() != c.want {
				t.Fatalf("got %v\nwant %s", err, c.want)
			}
			for _, goType := range []string{"interface {}", "float64", "int64", "map[string"} {
				if strings.Contains(err.Error(), goType) {
					t.Errorf("the message shows a Go type (%q): %s", goType, err)
				}
			}
		})
	}
}
