package core

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Params reads a strategy's or algorithm's settings strictly: every read
// names its key (prefixed by Path), a wrong type is an error, and Finish
// reports any key nobody read. The first error sticks; check Err or Finish.
type Params struct {
	// Path prefixes keys in errors, e.g. "strategies[1]".
	Path string
	m    map[string]any
	used map[string]bool
	err  error
	subs []*Params
}

// NewParams wraps m (which may be nil) for strict reading.
func NewParams(path string, m map[string]any) *Params {
	if m == nil {
		m = map[string]any{}
	}
	return &Params{Path: path, m: m, used: map[string]bool{}}
}

func (p *Params) key(k string) string {
	if p.Path == "" {
		return k
	}
	return p.Path + "." + k
}

// Fail records an error about key k (if none was recorded yet).
func (p *Params) Fail(k, format string, args ...any) {
	if p.err == nil {
		p.err = fmt.Errorf("config: %s: %s", p.key(k), fmt.Sprintf(format, args...))
	}
}

// Err is the first error recorded.
func (p *Params) Err() error { return p.err }

// Has reports whether k is set (and marks it read).
func (p *Params) Has(k string) bool {
	_, ok := p.m[k]
	p.used[k] = true
	return ok
}

// Raw returns k's value without conversion.
func (p *Params) Raw(k string) (any, bool) {
	v, ok := p.m[k]
	p.used[k] = true
	return v, ok
}

// Float reads a number (def when absent).
func (p *Params) Float(k string, def float64) float64 {
	v, ok := p.Raw(k)
	if !ok {
		return def
	}
	f, ok := ToFloat(v)
	if !ok {
		p.Fail(k, "want a number, got %s", DescribeValue(v))
		return def
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		p.Fail(k, "must be finite, got %v", f)
	}
	return f
}

// Int reads an integer (def when absent).
func (p *Params) Int(k string, def int) int {
	v, ok := p.Raw(k)
	if !ok {
		return def
	}
	f, ok := ToFloat(v)
	if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		p.Fail(k, "want an integer, got %s", DescribeValue(v))
		return def
	}
	return int(f)
}

// Bool reads a boolean (def when absent).
func (p *Params) Bool(k string, def bool) bool {
	v, ok := p.Raw(k)
	if !ok {
		return def
	}
	switch b := v.(type) {
	case bool:
		return b
	case string:
		switch strings.ToLower(b) {
		case "true":
			return true
		case "false":
			return false
		}
	}
	p.Fail(k, "want true or false, got %s", DescribeValue(v))
	return def
}

// String reads a string (def when absent).
func (p *Params) String(k string, def string) string {
	v, ok := p.Raw(k)
	if !ok {
		return def
	}
	s, ok := v.(string)
	if !ok {
		p.Fail(k, "want a string, got %s", DescribeValue(v))
		return def
	}
	return s
}

// Duration reads a Go duration string ("30s") or a number of seconds,
// which must be > 0 (def when absent).
func (p *Params) Duration(k string, def time.Duration) time.Duration {
	v, ok := p.Raw(k)
	if !ok {
		return def
	}
	var d time.Duration
	if s, isStr := v.(string); isStr {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			p.Fail(k, "want a duration such as 30s, got %q", s)
			return def
		}
	} else if f, isNum := ToFloat(v); isNum {
		d = time.Duration(f * float64(time.Second))
	} else {
		p.Fail(k, "want a duration such as 30s, got %s", DescribeValue(v))
		return def
	}
	if d <= 0 {
		p.Fail(k, "must be > 0, got %s", d)
		return def
	}
	return d
}

// OneOf reads a string that must be one of choices.
func (p *Params) OneOf(k, def string, choices ...string) string {
	s := p.String(k, def)
	for _, c := range choices {
		if s == c {
			return s
		}
	}
	if best := Closest(s, choices); best != "" {
		p.Fail(k, "unknown value %q, did you mean %q? (known: %s)", s, best, strings.Join(choices, ", "))
		return def
	}
	p.Fail(k, "unknown value %q (known: %s)", s, strings.Join(choices, ", "))
	return def
}

// Map reads a nested map (nil when absent).
func (p *Params) Map(k string) map[string]any {
	v, ok := p.Raw(k)
	if !ok || v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		p.Fail(k, "want a mapping, got %s", DescribeValue(v))
		return nil
	}
	return m
}

// Sub returns strict Params for the nested map k; its errors and unknown keys
// are reported through p when p.Finish is called after sub.Finish.
func (p *Params) Sub(k string) *Params {
	sub := NewParams(p.key(k), p.Map(k))
	p.subs = append(p.subs, sub)
	return sub
}

// Check records an error for key k unless ok.
func (p *Params) Check(ok bool, k, format string, args ...any) {
	if !ok {
		p.Fail(k, format, args...)
	}
}

// Finish returns the first error, or an error naming the first unknown key.
func (p *Params) Finish() error {
	if p.err != nil {
		return p.err
	}
	for _, sub := range p.subs {
		if err := sub.Finish(); err != nil {
			return err
		}
	}
	var unknown []string
	for k := range p.m {
		if !p.used[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		known := make([]string, 0, len(p.used))
		for k := range p.used {
			known = append(known, k)
		}
		sort.Strings(known)
		if best := Closest(unknown[0], known); best != "" {
			return fmt.Errorf("config: %s: unknown key, did you mean %s? (known keys here: %s)", p.key(unknown[0]), p.key(best), strings.Join(known, ", "))
		}
		return fmt.Errorf("config: %s: unknown key (known keys here: %s)", p.key(unknown[0]), strings.Join(known, ", "))
	}
	return nil
}

// ToFloat converts the numeric types a YAML/JSON/env decoder produces.
func ToFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case int32:
		return float64(x), true
	case int8:
		return float64(x), true
	case int16:
		return float64(x), true
	case uint:
		return float64(x), true
	case uint8:
		return float64(x), true
	case uint16:
		return float64(x), true
	case uint32:
		return float64(x), true
	case uint64:
		return float64(x), true
	case string:
		if f, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil {
			return f, true
		}
	}
	return 0, false
}
