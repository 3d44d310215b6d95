package tasks

import (
	"regexp"
	"strings"

	"github.com/cde-rl/cde/core"
)

// AnswerVerifier checks the final "Answer:" of a response against the
// problem's reference answer. The answer is the text after the last
// "Answer:" on the last line that contains one; both sides go through
// NormalizeAnswer, which writes a decimal number in its unique canonical form,
// so numbers compare by value ("1.50" equals "1.5") and everything else as
// text. A response without "Answer:" or with an empty answer is incorrect.
//
// Verification costs time linear in the lengths of the response and the
// answer, whatever they hold: numbers of any number of digits are compared as
// canonical digit strings, never converted to big numbers (whose decimal
// parsing is quadratic: a 300,000-digit answer took over a second per
// comparison).
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
//
// Two decimal numbers are equal by value exactly when their canonical forms
// (NormalizeAnswer) are the same string, because the canonical form of a
// finite decimal is unique: so the comparison is exact for any number of
// digits and costs linear time. The relation is symmetric.
func AnswersEqual(a, b string) bool {
	na, nb := NormalizeAnswer(a), NormalizeAnswer(b)
	return na != "" && na == nb
}

var (
	thousandsRE = regexp.MustCompile(`^[+-]?\d{1,3}(,\d{3})+(\.\d*)?$`)
	numberRE    = regexp.MustCompile(`^[+-]?(\d+(\.\d*)?|\.\d+)$`)
)

// NormalizeAnswer canonicalises an answer string, in the spirit of the DAPO
// math verifier: it replaces each run of invalid UTF-8 bytes by U+FFFD,
// removes all white space, then strips a trailing period, surrounding "$" and
// "\boxed{...}" (repeatedly, in any nesting) and removes thousands commas
// ("1,234" -> "1234"). A decimal number is then written canonically: no "+"
// sign, no leading zeros, no trailing fractional zeros, "-0" -> "0" ("+5" ->
// "5", "007" -> "7", "0.50" -> "0.5", ".5" -> "0.5", "3." -> "3"): one string
// per value. Exponents ("1e3") and fractions ("1/2") are not decimal numbers
// here and stay text. The result is its own normal form, and it runs in time
// linear in len(s).
func NormalizeAnswer(s string) string {
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

// Rewards returns the rewards of an incorrect and a correct answer
// (core.RewardLevels).
func (v AnswerVerifier) Rewards() (incorrect, correct float64) {
	return v.IncorrectReward, v.CorrectReward
}

// AnswerKey is the response's final answer as the verifier compares it
// (normalised; "" for none): core.AnswerKeyer, for maj@k.
func (v AnswerVerifier) AnswerKey(_ core.Problem, response string) string {
	got, ok := ExtractAnswer(response)
	if !ok {
		return ""
	}
	return NormalizeAnswer(got)
}
