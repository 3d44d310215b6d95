package core

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// This file words config values and typos for the person who wrote the
// config: a value as YAML would show it ("[4] (a list of 1 number)"),
// never by its Go type, and the closest known name when a typo explains
// an unknown one ("did you mean steps?").

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
	if f, ok := ToFloat(v); ok {
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
	if _, ok := ToFloat(v); ok {
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
	if f, ok := ToFloat(v); ok {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}

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
