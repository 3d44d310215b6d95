// Package answer reads and compares final answers: the text after the last
// "Answer:" of a response, and the canonical form under which two answers
// are equal. It imports the standard library alone, so a plugin that
// judges answers as the tasks do (plugins/examples/answercount) links this
// and not the tasks' parquet, tokenizer and dataset code.
package answer

import (
	"regexp"
	"strings"
)

// Marker introduces the final answer of a response.
const Marker = "Answer:"

// Extract returns the raw text after the last "Answer:" on the last
// line containing "Answer:", and false when there is no such line.
func Extract(response string) (string, bool) {
	i := strings.LastIndex(response, Marker)
	if i < 0 {
		return "", false
	}
	// The last occurrence overall is on the last line that has one, and is
	// the last one on that line.
	rest := response[i+len(Marker):]
	if j := strings.IndexByte(rest, '\n'); j >= 0 {
		rest = rest[:j]
	}
	return rest, true
}

// Equal reports whether two raw answers match after normalisation.
// An answer that normalises to "" never matches.
//
// Two decimal numbers are equal by value exactly when their canonical forms
// (Normalize) are the same string, because the canonical form of a
// finite decimal is unique: so the comparison is exact for any number of
// digits and costs linear time. The relation is symmetric.
func Equal(a, b string) bool {
	na, nb := Normalize(a), Normalize(b)
	return na != "" && na == nb
}

var (
	thousandsRE = regexp.MustCompile(`^[+-]?\d{1,3}(,\d{3})+(\.\d*)?$`)
	numberRE    = regexp.MustCompile(`^[+-]?(\d+(\.\d*)?|\.\d+)$`)
)

// Normalize canonicalises an answer string, in the spirit of the DAPO
// math verifier: it replaces each run of invalid UTF-8 bytes by U+FFFD,
// removes all white space, then strips a trailing period, surrounding "$" and
// "\boxed{...}" (repeatedly, in any nesting) and removes thousands commas
// ("1,234" -> "1234"). A decimal number is then written canonically: no "+"
// sign, no leading zeros, no trailing fractional zeros, "-0" -> "0" ("+5" ->
// "5", "007" -> "7", "0.50" -> "0.5", ".5" -> "0.5", "3." -> "3"): one string
// per value. Exponents ("1e3") and fractions ("1/2") are not decimal numbers
// here and stay text. The result is its own normal form, and it runs in time
// linear in len(s).
func Normalize(s string) string {
	// Valid UTF-8 first, so that removing white space cannot join stray
	// bytes into a new (white-space) character.
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Join(strings.Fields(s), "")
	for {
		prev := s
		s = strings.TrimSuffix(s, ".")
		if len(s) >= 2 && strings.HasPrefix(s, "$") && strings.HasSuffix(s, "$") {
			s = s[1 : len(s)-1]
		}
		if strings.HasPrefix(s, `\boxed{`) && strings.HasSuffix(s, "}") {
			s = s[len(`\boxed{`) : len(s)-1]
		}
		if s == prev {
			break
		}
	}
	s, _ = CanonicalDecimal(s)
	return s
}

// CanonicalDecimal removes the thousands commas of s ("1,234.5") and, when
// the rest is a decimal number, writes it canonically (see Normalize) and
// returns true; otherwise it returns s without its thousands commas and
// false.
func CanonicalDecimal(s string) (string, bool) {
	if thousandsRE.MatchString(s) {
		s = strings.ReplaceAll(s, ",", "")
	}
	if numberRE.MatchString(s) {
		return canonicalNumber(s), true
	}
	return s, false
}

// canonicalNumber rewrites a string matching numberRE without changing its
// value.
func canonicalNumber(s string) string {
	neg := false
	switch s[0] {
	case '-':
		neg = true
		s = s[1:]
	case '+':
		s = s[1:]
	}
	intPart, frac, _ := strings.Cut(s, ".")
	intPart = strings.TrimLeft(intPart, "0")
	if intPart == "" {
		intPart = "0"
	}
	frac = strings.TrimRight(frac, "0")
	out := intPart
	if frac != "" {
		out += "." + frac
	}
	if neg && out != "0" {
		out = "-" + out
	}
	return out
}
