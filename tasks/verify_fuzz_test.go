package tasks

import (
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/cde-rl/cde/core"
)

// verifyBudget bounds one call on a fuzz input (a few KB at most): linear code
// takes microseconds, so only superlinear behaviour can reach it.
const verifyBudget = time.Second

// FuzzAnswersEqual checks the verifier on arbitrary text: no panic, bounded
// time, symmetric equality, a normal form that is its own normal form, and
// Verify agreeing with AnswersEqual on the extracted answer.
func FuzzAnswersEqual(f *testing.F) {
	for _, s := range [][2]string{
		{"85", "085"}, {"1,234", "1234"}, {`$\boxed{-3}$.`, "-3"}, {"0.50", ".5"}, {"x + 1", "x+1"},
		{"-0", "0"}, {"", ""}, {"$", "$$"}, {`\boxed{`, "}"}, {"1e3", "1000"}, {"Answer: 5\nAnswer: 6", "6"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		start := time.Now()
		ab, ba := AnswersEqual(a, b), AnswersEqual(b, a)
		na := NormalizeAnswer(a)
		nna := NormalizeAnswer(na)
		got, ok := ExtractAnswer(a)
		if d := time.Since(start); d > verifyBudget {
			t.Fatalf("%v for inputs of %d and %d bytes", d, len(a), len(b))
		}
		if ab != ba {
			t.Fatalf("AnswersEqual(a, b) = %v but AnswersEqual(b, a) = %v", ab, ba)
		}
		if nna != na {
			t.Fatalf("NormalizeAnswer not idempotent: %q -> %q -> %q", a, na, nna)
		}
		if self := AnswersEqual(a, a); self != (na != "") {
			t.Fatalf("AnswersEqual(a, a) = %v with normal form %q", self, na)
		}
		if len(na) > 3*len(a)+1 { // U+FFFD (3 bytes) for a stray byte; ".5" -> "0.5"
			t.Fatalf("normal form %q longer than %q", na, a)
		}
		if ok && (strings.Contains(got, "\n") || !strings.Contains(a, AnswerMarker+got)) {
			t.Fatalf("ExtractAnswer(%q) = %q", a, got)
		}
		if !ok && strings.Contains(a, AnswerMarker) {
			t.Fatalf("ExtractAnswer(%q) found no answer", a)
		}
		// A response whose last line is "Answer: a" is judged by AnswersEqual(a, b).
		if !strings.Contains(a, "\n") && !strings.Contains(a, AnswerMarker) {
			_, correct := NewAnswerVerifier().Verify(core.Problem{Answer: b}, "some work\n"+AnswerMarker+" "+a)
			if correct != ab {
				t.Fatalf("Verify(answer %q, response answer %q) = %v, AnswersEqual = %v", b, a, correct, ab)
			}
		}
	})
}

// FuzzNumberFormats writes two decimal numbers m1 * 10^-s1 and m2 * 10^-s2 in
// many equivalent formats and checks AnswersEqual against exact integer
// arithmetic (m1 * 10^s2 == m2 * 10^s1), an independent reference.
func FuzzNumberFormats(f *testing.F) {
	f.Add(int64(1234), uint8(2), uint16(0), int64(12340), uint8(3), uint16(0xff))
	f.Add(int64(-5), uint8(1), uint16(2), int64(-50), uint8(2), uint16(4))
	f.Add(int64(0), uint8(0), uint16(256), int64(0), uint8(5), uint16(16))
	f.Add(int64(-9223372036854775808), uint8(29), uint16(8), int64(1), uint8(0), uint16(64))
	f.Fuzz(func(t *testing.T, m1 int64, s1 uint8, style1 uint16, m2 int64, s2 uint8, style2 uint16) {
		s1, s2 = s1%30, s2%30
		x := formatDecimal(m1, int(s1), style1)
		y := formatDecimal(m2, int(s2), style2)
		plain := formatDecimal(m1, int(s1), 0)
		if !AnswersEqual(x, plain) {
			t.Fatalf("%q and %q: the same number %d * 10^-%d, not equal", x, plain, m1, s1)
		}
		// m1 * 10^-s1 == m2 * 10^-s2  <=>  m1 * 10^s2 == m2 * 10^s1.
		l := new(big.Int).Mul(big.NewInt(m1), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(s2)), nil))
		r := new(big.Int).Mul(big.NewInt(m2), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(s1)), nil))
		if want := l.Cmp(r) == 0; AnswersEqual(x, y) != want || AnswersEqual(y, x) != want {
			t.Fatalf("AnswersEqual(%q, %q) = %v, want %v", x, y, AnswersEqual(x, y), want)
		}
	})
}

// formatDecimal writes m * 10^-scale as a decimal, in a format chosen by the
// bits of style: 1 leading zeros, 2 a "+" sign, 4 trailing fractional zeros,
// 8 thousands commas, 16 no "0" before the point, 32 "$...$", 64
// "\boxed{...}", 128 a trailing period and spaces, 256 "-" on a zero.
func formatDecimal(m int64, scale int, style uint16) string {
	neg := m < 0
	digits := new(big.Int).Abs(big.NewInt(m)).String()
	for len(digits) <= scale {
		digits = "0" + digits
	}
	intPart, frac := digits[:len(digits)-scale], digits[len(digits)-scale:]
	if style&1 != 0 {
		intPart = "00" + intPart
	}
	if style&4 != 0 {
		frac += "000"
	}
	if style&8 != 0 && len(intPart) > 3 {
		var b strings.Builder
		for i, c := range intPart {
			if i > 0 && (len(intPart)-i)%3 == 0 {
				b.WriteByte(',')
			}
			b.WriteRune(c)
		}
		intPart = b.String()
	}
	if style&16 != 0 && intPart == "0" && frac != "" {
		intPart = ""
	}
	s := intPart
	if frac != "" {
		s += "." + frac
	}
	switch {
	case neg || (m == 0 && style&256 != 0):
		s = "-" + s
	case style&2 != 0:
		s = "+" + s
	}
	if style&32 != 0 {
		s = "$" + s + "$"
	}
	if style&64 != 0 {
		s = `\boxed{` + s + "}"
	}
	if style&128 != 0 {
		s = "  " + s + " . "
	}
	return s
}
