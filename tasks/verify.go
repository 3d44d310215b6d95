package tasks

import (
	"math/big"
	"regexp"
	"strings"

	"github.com/cde-rl/cde/core"
)

// AnswerVerifier checks the final "Answer:" of a response against the
// problem's reference answer. The answer is the text after the last
// "Answer:" on the last line that contains one; both sides go through
// NormalizeAnswer, and when both parse as decimal numbers they are compared
// numerically (so "1.50" equals "1.5"), otherwise as strings. A response
// without "Answer:" or with an empty answer is incorrect.
type AnswerVerifier struct {
	// CorrectReward is returned for a correct answer (NewAnswerVerifier: +1).
	CorrectReward float64
	// IncorrectReward is returned otherwise (NewAnswerVerifier: -1).
	IncorrectReward float64
}

var _ core.Verifier = AnswerVerifier{}

// NewAnswerVerifier returns a verifier with the default rewards +1 / -1.
func NewAnswerVerifier() AnswerVerifier {
	return AnswerVerifier{CorrectReward: 1, IncorrectReward: -1}
}

// Verify implements core.Verifier.
func (v AnswerVerifier) Verify(p core.Problem, response string) (float64, bool) {
	got, ok := ExtractAnswer(response)
	if ok && AnswersEqual(got, p.Answer) {
		return v.CorrectReward, true
	}
	return v.IncorrectReward, false
}

// ExtractAnswer returns the raw text after the last "Answer:" on the last
// line containing "Answer:", and false when there is no such line.
func ExtractAnswer(response string) (string, bool) {
	i := strings.LastIndex(response, AnswerMarker)
	if i < 0 {
		return "", false
	}
	// The last occurrence overall is on the last line that has one, and is
	// the last one on that line.
	rest := response[i+len(AnswerMarker):]
	if j := strings.IndexByte(rest, '\n'); j >= 0 {
		rest = rest[:j]
	}
	return rest, true
}

// AnswersEqual reports whether two raw answers match after normalisation.
// An answer that normalises to "" never matches.
func AnswersEqual(a, b string) bool {
	na, nb := NormalizeAnswer(a), NormalizeAnswer(b)
	if na == "" || nb == "" {
		return false
	}
	ra, okA := parseNumber(na)
	rb, okB := parseNumber(nb)
	if okA && okB {
		return ra.Cmp(rb) == 0
	}
	return na == nb
}

var (
	thousandsRE = regexp.MustCompile(`^[+-]?\d{1,3}(,\d{3})+(\.\d*)?$`)
	numberRE    = regexp.MustCompile(`^[+-]?(\d+(\.\d*)?|\.\d+)$`)
)

// NormalizeAnswer canonicalises an answer string, in the spirit of the DAPO
// math verifier: it trims spaces, strips a trailing period, surrounding "$"
// and "\boxed{...}" (repeatedly, in any nesting), removes thousands commas
// ("1,234" -> "1234") and all remaining spaces. A decimal number is then
// written canonically: no "+" sign, no leading zeros, no trailing fractional
// zeros, "-0" -> "0" ("+5" -> "5", "007" -> "7", "0.50" -> "0.5",
// ".5" -> "0.5", "3." -> "3").
func NormalizeAnswer(s string) string {
	for {
		prev := s
		s = strings.TrimSpace(s)
		s = strings.TrimSuffix(s, ".")
		s = strings.TrimSpace(s)
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
	s = strings.Join(strings.Fields(s), "")
	if thousandsRE.MatchString(s) {
		s = strings.ReplaceAll(s, ",", "")
	}
	if numberRE.MatchString(s) {
		s = canonicalNumber(s)
	}
	return s
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

func parseNumber(s string) (*big.Rat, bool) {
	if !numberRE.MatchString(s) {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(s)
	return r, ok
}
