package trainer

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cde-rl/cde/core"
)

// This file words config errors for the person who wrote the config: a
// value is described as YAML would show it ("[4], a list of 1 number"),
// never by its Go type, and an unknown key comes with the closest known
// one when a typo explains it ("did you mean train.steps?").

// DescribeValue words a decoded config value for an error message: the
// value as YAML would show it, then what it is when that is not plain from
// the value, e.g. `"8"` (a string), `[4] (a list of 1 number)`,
// `{a: 1} (a mapping)`, `null`.
func DescribeValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(x) + " (a string)"
	case bool:
		return strconv.FormatBool(x) + " (a boolean)"
	case []any:
		return fmt.Sprintf("%s (%s)", flowYAML(x), listKind(x))
	case map[string]any:
		return flowYAML(x) + " (a mapping)"
	}
	if f, ok := core.ToFloat(v); ok {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}

// kindOf is what one value is: "number", "string", "list", ...
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case []any:
		return "list"
	case map[string]any:
		return "mapping"
	}
	if _, ok := core.ToFloat(v); ok {
		return "number"
	}
	return "value"
}

// listKind is "an empty list", "a list of 1 number", "a list of 3
// strings" or "a list of 2 values" (mixed kinds).
func listKind(l []any) string {
	if len(l) == 0 {
		return "an empty list"
	}
	kind := kindOf(l[0])
	for _, x := range l[1:] {
		if kindOf(x) != kind {
			kind = "value"
		}
	}
	if len(l) != 1 {
		kind += "s"
	}
	return fmt.Sprintf("a list of %d %s", len(l), kind)
}

// flowYAML is v in YAML's flow style, as a user would have written it.
func flowYAML(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = flowYAML(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + ": " + flowYAML(x[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	if f, ok := core.ToFloat(v); ok {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}

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

// Closest is the candidate nearest to s in edit distance (insertions,
// deletions, substitutions and swaps of neighbours, case ignored) when it
// is close enough to be a typo: at most 1 edit for names up to 5
// characters, 2 up to 11, 3 beyond, and fewer than half its length. ""
// when none is, or when two are equally close (k4 among k1, k2, k3).
func Closest(s string, candidates []string) string {
	limit := 1
	switch n := len(s); {
	case n > 11:
		limit = 3
	case n > 5:
		limit = 2
	}
	best, bestD, tied := "", limit+1, false
	for _, c := range candidates {
		if c == s || c == "" {
			continue
		}
		d := editDistance(strings.ToLower(s), strings.ToLower(c))
		if d < bestD {
			best, bestD, tied = c, d, false
		} else if d == bestD {
			tied = true
		}
	}
	if tied || 2*bestD >= len(s) {
		return ""
	}
	return best
}

// editDistance is the optimal string alignment distance of a and b, by
// bytes.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
