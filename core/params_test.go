package core

import (
	"math"
	"strings"
	"testing"
)

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want an error mentioning %q", parts)
	}
	for _, s := range parts {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("err %q does not mention %q", err, s)
		}
	}
}

func TestParamsReads(t *testing.T) {
	p := NewParams("algorithm", map[string]any{
		"f": 0.5, "fi": 3, "fs": "2.5", "i": 4, "if": 2.0, "b": true, "bs": "False",
		"s": "x", "o": "cosine", "m": map[string]any{"k": 1},
	})
	if got := p.Float("f", 0); got != 0.5 {
		t.Errorf("Float f = %v", got)
	}
	if got := p.Float("fi", 0); got != 3 {
		t.Errorf("Float fi = %v", got)
	}
	if got := p.Float("fs", 0); got != 2.5 {
		t.Errorf("Float fs = %v", got)
	}
	if got := p.Float("absent", 9); got != 9 {
		t.Errorf("Float default = %v", got)
	}
	if got := p.Int("i", 0); got != 4 {
		t.Errorf("Int i = %v", got)
	}
	if got := p.Int("if", 0); got != 2 {
		t.Errorf("Int if = %v", got)
	}
	if got := p.Int("absent_i", 7); got != 7 {
		t.Errorf("Int default = %v", got)
	}
	if !p.Bool("b", false) || p.Bool("bs", true) || !p.Bool("absent_b", true) {
		t.Error("Bool")
	}
	if p.String("s", "") != "x" || p.OneOf("o", "constant", ScheduleKinds...) != "cosine" {
		t.Error("String/OneOf")
	}
	if !p.Has("m") || p.Has("nope") {
		t.Error("Has")
	}
	sub := p.Sub("m")
	if sub.Path != "algorithm.m" || sub.Int("k", 0) != 1 {
		t.Errorf("Sub: %q", sub.Path)
	}
	if err := sub.Finish(); err != nil {
		t.Error(err)
	}
	if err := p.Finish(); err != nil {
		t.Fatal(err)
	}
}

func TestParamsUnknownKey(t *testing.T) {
	p := NewParams("strategies[2]", map[string]any{"w0": 1, "zeta": 2, "alpha": 3})
	p.Float("w0", 0)
	p.Float("kappa", 3)
	// The first unknown key in sorted order, with the full path; the known
	// keys read so far are listed.
	wantErr(t, p.Finish(), "strategies[2].alpha", "unknown key", "kappa", "w0")

	p = NewParams("strategies[2]", map[string]any{"weight": map[string]any{"w0": 1, "bogus": 0}})
	sub := p.Sub("weight")
	sub.Float("w0", 0)
	wantErr(t, sub.Finish(), "strategies[2].weight.bogus")

	// No path: the bare key.
	p = NewParams("", map[string]any{"x": 1})
	wantErr(t, p.Finish(), "config: x: unknown key")
}

func TestParamsWrongType(t *testing.T) {
	tests := []struct {
		name string
		v    any
		read func(p *Params)
		want string
	}{
		{"float from string", "abc", func(p *Params) { p.Float("k", 0) }, "want a number"},
		{"float from bool", true, func(p *Params) { p.Float("k", 0) }, "want a number"},
		{"float NaN", math.NaN(), func(p *Params) { p.Float("k", 0) }, "finite"},
		{"float Inf", math.Inf(-1), func(p *Params) { p.Float("k", 0) }, "finite"},
		{"int rejects 1.5", 1.5, func(p *Params) { p.Int("k", 0) }, "want an integer"},
		{"int rejects string", "two", func(p *Params) { p.Int("k", 0) }, "want an integer"},
		{"bool from int", 1, func(p *Params) { p.Bool("k", false) }, "want true or false"},
		{"bool from yes", "yes", func(p *Params) { p.Bool("k", false) }, "want true or false"},
		{"string from int", 3, func(p *Params) { p.String("k", "") }, "want a string"},
		{"oneof", "cubic", func(p *Params) { p.OneOf("k", "constant", ScheduleKinds...) }, "unknown value \"cubic\""},
		{"map from list", []any{1}, func(p *Params) { p.Map("k") }, "want a mapping"},
		{"check", 5, func(p *Params) { p.Check(p.Int("k", 0) < 3, "k", "must be < 3") }, "must be < 3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := NewParams("algorithm", map[string]any{"k": tc.v})
			tc.read(p)
			wantErr(t, p.Err(), "config: algorithm.k: ", tc.want)
			wantErr(t, p.Finish(), "algorithm.k", tc.want)
		})
	}
}

func TestParamsDefaultsOnError(t *testing.T) {
	p := NewParams("a", map[string]any{"x": "bad", "y": 1.5})
	if got := p.Float("x", 4); got != 4 {
		t.Errorf("Float returns the default on error, got %v", got)
	}
	if got := p.Int("y", 6); got != 6 {
		t.Errorf("Int returns the default on error, got %v", got)
	}
	// The first error sticks.
	wantErr(t, p.Err(), "a.x")
	if strings.Contains(p.Err().Error(), "a.y") {
		t.Errorf("err %q: want the first error only", p.Err())
	}
}

func TestToFloat(t *testing.T) {
	for _, v := range []any{2.0, float32(2), 2, int64(2), int32(2), uint64(2), "2"} {
		if f, ok := ToFloat(v); !ok || f != 2 {
			t.Errorf("ToFloat(%T %v) = %v, %v", v, v, f, ok)
		}
	}
	for _, v := range []any{nil, true, "x", []any{1}} {
		if _, ok := ToFloat(v); ok {
			t.Errorf("ToFloat(%v): want !ok", v)
		}
	}
}
