package tasks

import (
	"math/big"
	"regexp"
	"strings"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/tasks/answer"
)

// MathVerifier checks the final answer of a free-form math response (GSM8K,
// MATH, DAPO-style) against the problem's reference answer.
//
// The answer is found by ExtractMathAnswer and both it and the reference go
// through NormalizeMathAnswer; they match when the normal forms are the same
// non-empty string. docs/verifier.md lists the rules with examples.
//
// Verification costs time linear in the lengths of the response and the
// answer (fraction arithmetic runs only on integers of at most 18 digits).
type MathVerifier struct {
	// CorrectReward is returned for a correct answer (NewMathVerifier: +1).
	CorrectReward float64
	// IncorrectReward is returned otherwise (NewMathVerifier: -1).
	IncorrectReward float64
}

var _ core.Verifier = MathVerifier{}

// NewMathVerifier returns a verifier with the default rewards +1 / -1.
func NewMathVerifier() MathVerifier {
	return MathVerifier{CorrectReward: 1, IncorrectReward: -1}
}

// Verify implements core.Verifier.
func (v MathVerifier) Verify(p core.Problem, response string) (float64, bool) {
	got, ok := ExtractMathAnswer(response)
	if ok && MathAnswersEqual(got, p.Answer) {
		return v.CorrectReward, true
	}
	return v.IncorrectReward, false
}

// GSM8KMarker introduces the final answer of a GSM8K solution.
const GSM8KMarker = "####"

// ExtractMathAnswer returns the final answer of a response, trimmed of
// surrounding white space, and whether it has one. In order of preference:
//
//  1. If the response contains a box command (`\boxed` or `\fbox` followed by
//     "{" or a space), the last one decides: `\boxed{...}` gives the text
//     between its brace and the matching closing brace (nested braces count,
//     `\{` and `\}` do not), `\boxed 5` gives the run of text after the
//     spaces up to the next white space or "$". When the last box has no
//     closing brace (a truncated or malformed response), there is no answer:
//     an earlier box or an "Answer:" line is not used instead.
//  2. Else the text after the last "Answer:" up to the end of its line, as
//     ExtractAnswer.
//  3. Else the text after the last "####" up to the end of its line (GSM8K).
func ExtractMathAnswer(response string) (string, bool) {
	if got, found, ok := lastBox(response); found {
		return strings.TrimSpace(got), ok
	}
	if got, ok := ExtractAnswer(response); ok {
		return strings.TrimSpace(got), true
	}
	if i := strings.LastIndex(response, GSM8KMarker); i >= 0 {
		rest := response[i+len(GSM8KMarker):]
		if j := strings.IndexByte(rest, '\n'); j >= 0 {
			rest = rest[:j]
		}
		return strings.TrimSpace(rest), true
	}
	return "", false
}

// lastBox finds the last box command in s. found reports whether there is
// one; ok whether it is well formed, and then got is its content.
func lastBox(s string) (got string, found, ok bool) {
	var match []int // computed on first need
	for i := strings.LastIndexByte(s, '\\'); i >= 0; i = strings.LastIndexByte(s[:i], '\\') {
		name := `\boxed`
		if strings.HasPrefix(s[i:], `\fbox`) {
			name = `\fbox`
		} else if !strings.HasPrefix(s[i:], name) {
			continue
		}
		p := i + len(name)
		if p < len(s) && isASCIILetter(s[p]) {
			continue // \boxedfoo is another command
		}
		q := p
		for q < len(s) && (s[q] == ' ' || s[q] == '\t') {
			q++
		}
		if q < len(s) && s[q] == '{' {
			if match == nil {
				match = matchBraces(s)
			}
			if c := match[q]; c >= 0 {
				return s[q+1 : c], true, true
			}
			return "", true, false
		}
		if q == p || q == len(s) || s[q] == '\n' || s[q] == '\r' {
			continue // "\boxed" alone, as a word in prose
		}
		r := q
		for r < len(s) && s[r] != '$' && !isSpaceByte(s[r]) {
			r++
		}
		if r == q {
			continue
		}
		return s[q:r], true, true
	}
	return "", false, false
}

// matchBraces returns, for each index of s holding an opening brace, the
// index of its matching closing brace, and -1 everywhere else (and for an
// unmatched brace). A backslash escapes the byte after it, so `\{` and `\}`
// are not braces. It runs in linear time.
func matchBraces(s string) []int {
	match := make([]int, len(s))
	var stack []int
	for i := 0; i < len(s); i++ {
		match[i] = -1
		switch s[i] {
		case '\\':
			if i+1 < len(s) {
				i++
				match[i] = -1
			}
		case '{':
			stack = append(stack, i)
		case '}':
			if n := len(stack); n > 0 {
				match[stack[n-1]] = i
				stack = stack[:n-1]
			}
		}
	}
	return match
}

// MathAnswersEqual reports whether two raw answers match after
// NormalizeMathAnswer. An answer that normalises to "" never matches. The
// relation is symmetric.
func MathAnswersEqual(a, b string) bool {
	na, nb := NormalizeMathAnswer(a), NormalizeMathAnswer(b)
	return na != "" && na == nb
}

var (
	// Commands whose argument is kept and whose name and braces go.
	unwrapCommands = map[string]bool{
		"text": true, "textbf": true, "textit": true, "textrm": true, "textnormal": true,
		"mbox": true, "mathrm": true, "mathbf": true, "boxed": true, "fbox": true,
	}
	// Commands removed (replaced by a space).
	dropCommands = map[string]bool{
		"left": true, "right": true, "displaystyle": true, "quad": true, "qquad": true,
		"bigl": true, "bigr": true, "Bigl": true, "Bigr": true,
	}
	// Commands renamed.
	renameCommands = map[string]string{"dfrac": "frac", "tfrac": "frac"}

	// Words dropped after a number: "5 cm", "12 dollars", "3 square feet".
	unitWords = map[string]bool{}

	leadingNumberRE = regexp.MustCompile(`^[+-]?(\d[\d,]*(\.\d*)?|\.\d+)`)
	fracRE          = regexp.MustCompile(`^(-?)\\frac\{([+-]?\d{1,18})\}\{([+-]?\d{1,18})\}$`)
	slashRE         = regexp.MustCompile(`^([+-]?\d{1,18})/([+-]?\d{1,18})$`)
)

func init() {
	for _, w := range strings.Fields(`
		cm mm km meter meters metre metres kilometer kilometers centimeter centimeters
		inch inches ft foot feet yard yards mile miles mph kph
		second seconds sec secs minute minutes min mins hour hours hr hrs day days week weeks month months year years
		dollar dollars cent cents euro euros pound pounds lb lbs ounce ounces oz
		gram grams kg kilogram kilograms liter liters litre litres ml gallon gallons
		degree degrees unit units square cubic sq
		point points way ways people person persons student students child children
		apple apples cookie cookies page pages book books item items piece pieces
		times percent`) {
		unitWords[w] = true
	}
}

// NormalizeMathAnswer canonicalises an answer, in the spirit of the
// Minerva/DAPO math normalisation. In order:
//
//  1. invalid UTF-8 becomes U+FFFD; surrounding white space goes;
//  2. `\!`, `\,`, `\:`, `\;`, `\ `, `~`, `\quad`, `\qquad`, `\left`, `\right`,
//     `\bigl`/`\bigr`, `\displaystyle` become spaces; `\dfrac` and `\tfrac`
//     become `\frac`; `{,}` becomes ","; `\$`, `$`, `\%` and `%` go;
//  3. `\text{X}`, `\textbf{X}`, `\textit{X}`, `\textrm{X}`, `\textnormal{X}`,
//     `\mbox{X}`, `\mathrm{X}`, `\mathbf{X}`, `\boxed{X}`, `\fbox{X}` become X;
//  4. only the text after the last "=" is kept ("x = 5" -> "5");
//  5. a number followed only by unit words ("5 cm", "3 square feet", "12
//     dollars", "90 degrees"; the list is in unitWords) keeps the number;
//  6. all white space goes; `^\circ`, `^{\circ}` and "°" go; trailing periods
//     go;
//  7. `\frac12` becomes `\frac{1}{2}`, `\sqrt2` becomes `\sqrt{2}` (a
//     one-character argument gets braces);
//  8. thousands separators go from a number ("1,234" -> "1234") and a decimal
//     number is written canonically as NormalizeAnswer does ("0.50" -> "0.5");
//  9. a fraction of integers of at most 18 digits each, `\frac{a}{b}`,
//     `-\frac{a}{b}` or `a/b` (b != 0), is written as its decimal when that
//     decimal is finite ("\frac{1}{2}" and "2/4" -> "0.5", "6/3" -> "2") and
//     otherwise as the reduced `\frac{p}{q}` with the sign in front
//     ("2/6" -> "\frac{1}{3}", "\frac{1}{-3}" -> "-\frac{1}{3}").
//
// Anything else compares as the resulting string: no symbolic algebra
// ("\frac{\sqrt{2}}{2}" and "\frac{1}{\sqrt{2}}" differ), no rounding ("1/3"
// and "0.333" differ), no percent arithmetic ("50%" and "0.5" differ).
func NormalizeMathAnswer(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.TrimSpace(s)
	s = rewriteCommands(s)
	s = unwrapText(s)
	if i := strings.LastIndexByte(s, '='); i >= 0 {
		s = s[i+1:]
	}
	s = stripUnits(s)
	s = strings.Join(strings.Fields(s), "")
	s = strings.ReplaceAll(s, `^{\circ}`, "")
	s = strings.ReplaceAll(s, `^\circ`, "")
	s = strings.ReplaceAll(s, "°", "")
	s = strings.TrimRight(s, ".")
	s = fracShorthand(s)
	c, ok := answer.CanonicalDecimal(s)
	if ok {
		return c
	}
	return canonicalFraction(c)
}

// rewriteCommands applies step 2 of NormalizeMathAnswer in one linear pass.
func rewriteCommands(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '$' || c == '%' || c == '~':
			if c == '~' {
				b.WriteByte(' ')
			}
			i++
			continue
		case c == '{' && strings.HasPrefix(s[i:], "{,}"):
			b.WriteByte(',')
			i += 3
			continue
		case c != '\\' || i+1 == len(s):
			b.WriteByte(c)
			i++
			continue
		}
		// A command: a backslash and a run of letters, or one other byte.
		j := i + 1
		for j < len(s) && isASCIILetter(s[j]) {
			j++
		}
		if j == i+1 {
			switch s[j] {
			case '!', ',', ':', ';', ' ':
				b.WriteByte(' ')
			case '$', '%':
			default:
				b.WriteString(s[i : j+1])
			}
			i = j + 1
			continue
		}
		name := s[i+1 : j]
		switch {
		case dropCommands[name]:
			b.WriteByte(' ')
		case renameCommands[name] != "":
			b.WriteByte('\\')
			b.WriteString(renameCommands[name])
		default:
			b.WriteString(s[i:j])
		}
		i = j
	}
	return b.String()
}

// unwrapText applies step 3 of NormalizeMathAnswer in one linear pass: the
// name and braces of each unwrap command with a matched brace go.
func unwrapText(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	match := matchBraces(s)
	drop := make([]bool, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			continue
		}
		j := i + 1
		for j < len(s) && isASCIILetter(s[j]) {
			j++
		}
		if j == i+1 {
			i++ // an escaped byte
			continue
		}
		if j < len(s) && s[j] == '{' && match[j] >= 0 && unwrapCommands[s[i+1:j]] {
			for k := i; k <= j; k++ {
				drop[k] = true
			}
			drop[match[j]] = true
		}
		i = j - 1
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if !drop[i] {
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// stripUnits applies step 5 of NormalizeMathAnswer.
func stripUnits(s string) string {
	s = strings.TrimSpace(s)
	num := leadingNumberRE.FindString(s)
	if num == "" || num == s {
		return s
	}
	words := strings.Fields(s[len(num):])
	for _, w := range words {
		w = strings.ToLower(strings.TrimRight(w, "."))
		for _, sup := range []string{"^2", "^3", "^{2}", "^{3}"} {
			w = strings.TrimSuffix(w, sup)
		}
		if !unitWords[w] {
			return s
		}
	}
	return num
}

// fracShorthand applies step 7 of NormalizeMathAnswer in linear time: a
// one-character argument of \frac (two arguments) or \sqrt (one, after an
// optional short [n]) gets braces.
func fracShorthand(s string) string {
	if !strings.Contains(s, `\frac`) && !strings.Contains(s, `\sqrt`) {
		return s
	}
	match := matchBraces(s)
	wrap := make([]bool, len(s)) // positions of characters to brace
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			continue
		}
		j := i + 1
		for j < len(s) && isASCIILetter(s[j]) {
			j++
		}
		if j == i+1 {
			i++
			continue
		}
		name, args := s[i+1:j], 0
		switch name {
		case "frac":
			args = 2
		case "sqrt":
			args = 1
			if j < len(s) && s[j] == '[' {
				if k := strings.IndexByte(s[j:min(len(s), j+20)], ']'); k >= 0 {
					j += k + 1
				}
			}
		}
		p := j
		for a := 0; a < args && p < len(s); a++ {
			switch {
			case s[p] == '{' && match[p] >= 0:
				p = match[p] + 1
			case isASCIILetter(s[p]) || (s[p] >= '0' && s[p] <= '9'):
				wrap[p] = true
				p++
			default:
				a = args
			}
		}
		i = j - 1
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); i++ {
		if wrap[i] {
			b.WriteByte('{')
			b.WriteByte(s[i])
			b.WriteByte('}')
		} else {
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// canonicalFraction applies step 9 of NormalizeMathAnswer; other strings are
// returned unchanged.
func canonicalFraction(s string) string {
	var sign, ns, ds string
	if m := fracRE.FindStringSubmatch(s); m != nil {
		sign, ns, ds = m[1], m[2], m[3]
	} else if m := slashRE.FindStringSubmatch(s); m != nil {
		ns, ds = m[1], m[2]
	} else {
		return s
	}
	n, _ := new(big.Int).SetString(strings.TrimPrefix(ns, "+"), 10)
	d, _ := new(big.Int).SetString(strings.TrimPrefix(ds, "+"), 10)
	if d.Sign() == 0 {
		return s
	}
	if sign == "-" {
		n.Neg(n)
	}
	r := new(big.Rat).SetFrac(n, d)
	// r = p/q in lowest terms, q > 0: finite decimal iff q = 2^a 5^b.
	q := new(big.Int).Set(r.Denom())
	digits := 0
	for _, f := range []int64{2, 5} {
		k, bf, m := 0, big.NewInt(f), new(big.Int)
		for {
			quo, rem := new(big.Int).QuoRem(q, bf, m)
			if rem.Sign() != 0 {
				break
			}
			q = quo
			k++
		}
		digits = max(digits, k)
	}
	if q.Cmp(big.NewInt(1)) == 0 {
		c, _ := answer.CanonicalDecimal(r.FloatString(digits))
		return c
	}
	out := `\frac{` + new(big.Int).Abs(r.Num()).String() + "}{" + r.Denom().String() + "}"
	if r.Sign() < 0 {
		out = "-" + out
	}
	return out
}

func isASCIILetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func isSpaceByte(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// Rewards returns the rewards of an incorrect and a correct answer
// (core.RewardLevels).
func (v MathVerifier) Rewards() (incorrect, correct float64) {
	return v.IncorrectReward, v.CorrectReward
}

// AnswerKey is the response's final answer as the verifier compares it
// (normalised; "" for none): core.AnswerKeyer, for maj@k.
func (v MathVerifier) AnswerKey(_ core.Problem, response string) string {
	got, ok := ExtractMathAnswer(response)
	if !ok {
		return ""
	}
	return NormalizeMathAnswer(got)
}
