package trainer

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"

	"github.com/cde-rl/cde/core"
)

// DescribeValue is core.DescribeValue, kept for the trainer's callers.
func DescribeValue(v any) string { return core.DescribeValue(v) }

// Closest is core.Closest, kept for the trainer's callers.
func Closest(s string, candidates []string) string { return core.Closest(s, candidates) }

// This file words config errors for the person who wrote the config: a
// value is described as YAML would show it ("[4], a list of 1 number"),
// never by its Go type, and an unknown key comes with the closest known
// one when a typo explains it ("did you mean train.steps?").

// valueFits reports whether v is of the kind a section reader wants
// (core.Params accepts the same): "number", "integer", "boolean",
// "string" or "duration".
func valueFits(want string, v any) bool {
	switch want {
	case "number":
		_, ok := core.ToFloat(v)
		return ok
	case "integer":
		f, ok := core.ToFloat(v)
		return ok && f == math.Trunc(f) && math.Abs(f) <= 1<<53
	case "boolean":
		switch b := v.(type) {
		case bool:
			return true
		case string:
			return strings.EqualFold(b, "true") || strings.EqualFold(b, "false")
		}
		return false
	case "string":
		_, ok := v.(string)
		return ok
	case "duration":
		if s, ok := v.(string); ok {
			_, err := time.ParseDuration(s)
			return err == nil
		}
		_, ok := core.ToFloat(v)
		return ok
	}
	return true
}

// wants is the phrase of an error for each kind valueFits knows.
var wants = map[string]string{
	"number": "a number", "integer": "an integer", "boolean": "true or false",
	"string": "a string", "duration": "a duration such as 30s",
}

// checkKind records an error naming k when its value is not of kind want,
// and reports whether it is (an absent key passes: need reports it).
func (s section) checkKind(k, want string) bool {
	v, ok := s.Raw(k)
	if !ok || valueFits(want, v) {
		return true
	}
	s.Fail(k, "want %s, got %s", wants[want], DescribeValue(v))
	return false
}

// unknownKey matches core's unknown-key errors: core.Params.Finish's
// "config: PATH: unknown key (known keys here: a, b)", an algorithm's
// "config: PATH: unknown key (the keys of NAME: a, b)", and the top
// level's "config: FILE: KEY: unknown key (known: a, b)".
var unknownKey = regexp.MustCompile(`^(config: (?:[^:]+: )?)(\S+): unknown key \((known keys here|known|the keys of [^:]+): ([^)]*)\)`)

// unknownValue matches the errors of an unknown name among known ones:
// `unknown value "x" (known: a, b)` (core.Params.OneOf), `unknown
// algorithm "x" (known: ...)`, `unknown strategy "x" (known: ...)`.
var unknownValue = regexp.MustCompile(`^config: \S+: (unknown \w+ "([^"]*)") \(known: ([^)]*)\)`)

// SuggestKey adds to an unknown-key error the known key closest to the
// unknown one, when a typo explains it: `config: train.stepz: unknown key,
// did you mean train.steps? (known keys here: ...)`; and to an unknown
// name among known ones the closest name (`unknown strategy "entropi",
// did you mean "entropy"? (known: ...)`). Other errors, and names close to
// none, come back as they are.
func SuggestKey(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if m := unknownValue.FindStringSubmatchIndex(msg); m != nil {
		best := Closest(msg[m[4]:m[5]], strings.Split(msg[m[6]:m[7]], ", "))
		if best == "" {
			return err
		}
		return &suggested{msg: msg[:m[3]] + fmt.Sprintf(", did you mean %q?", best) + msg[m[3]:], err: err}
	}
	m := unknownKey.FindStringSubmatchIndex(msg)
	if m == nil {
		return err
	}
	path := msg[m[4]:m[5]]
	known := strings.Split(msg[m[8]:m[9]], ", ")
	prefix, key := "", path
	if i := strings.LastIndex(path, "."); i >= 0 {
		prefix, key = path[:i+1], path[i+1:]
	}
	best := Closest(key, known)
	if best == "" {
		return err
	}
	return &suggested{msg: msg[:m[5]] + ": unknown key, did you mean " + prefix + best + "?" + msg[m[5]+len(": unknown key"):], err: err}
}

// suggested is an error reworded by SuggestKey; it unwraps to the original.
type suggested struct {
	msg string
	err error
}

func (s *suggested) Error() string { return s.msg }
func (s *suggested) Unwrap() error { return s.err }
