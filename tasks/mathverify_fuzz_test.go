package tasks

import (
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/cde-rl/cde/core"
)

// FuzzMathVerifier checks the math verifier on arbitrary text: no panic,
// bounded time, symmetric equality, and an answer wrapped as \boxed{a} (when
// the box is well formed) or as "#### a" extracts as a and verifies against
// itself exactly when it normalises to something.
func FuzzMathVerifier(f *testing.F) {
	for _, s := range [][2]string{
		{`\frac{1}{2}`, "0.5"}, {`\boxed{\boxed{5}}`, "5"}, {`\boxed 5$`, "5"}, {`\fbox{`, "}"},
		{`\left( -\infty, 3 \right]`, `(-\infty,3]`}, {`30^\circ`, "30"}, {`\$1,234.50`, "1234.5"},
		{`5 \text{ cm}^2`, "5"}, {"x = 5", "5"}, {`\sqrt[3]2`, `\sqrt[3]{2}`}, {`\frac 3 8`, "0.375"},
		{"#### 72", "72"}, {"Answer: 1\n#### 2", "1"}, {`\{1,2\}`, `\}`}, {"2/0", "-4/-8"}, {"", ""},
		{`\text{\textbf{a}}`, "a"}, {`1{,}000`, "1000"}, {`\\`, `\`}, {"\xff", "\uFFFD"},
	} {
		f.Add(s[0], s[1])
	}
	v := NewMathVerifier()
	f.Fuzz(func(t *testing.T, a, b string) {
		start := time.Now()
		ab, ba := MathAnswersEqual(a, b), MathAnswersEqual(b, a)
		na := NormalizeMathAnswer(a)
		_, _ = ExtractMathAnswer(a)
		boxed := `\boxed{` + a + "}"
		gotBox, okBox := ExtractMathAnswer(boxed)
		_, correctBox := v.Verify(core.Problem{Answer: a}, boxed)
		hashes := "Work.\n#### " + a
		gotHash, okHash := ExtractMathAnswer(hashes)
		_, correctHash := v.Verify(core.Problem{Answer: a}, hashes)
		if d := time.Since(start); d > verifyBudget {
			t.Fatalf("%v for inputs of %d and %d bytes", d, len(a), len(b))
		}
		if ab != ba {
			t.Fatalf("MathAnswersEqual(a, b) = %v but MathAnswersEqual(b, a) = %v", ab, ba)
		}
		if len(na) > 3*len(a)+3 {
			t.Fatalf("normal form %q much longer than %q", na, a)
		}
		plain := !strings.Contains(a, `\boxed`) && !strings.Contains(a, `\fbox`)
		if plain && matchBraces(boxed)[len(`\boxed`)] == len(boxed)-1 {
			if !okBox || gotBox != strings.TrimSpace(a) {
				t.Fatalf("ExtractMathAnswer(%q) = %q, %v", boxed, gotBox, okBox)
			}
			if correctBox != (na != "") {
				t.Fatalf("%q against itself boxed: correct = %v, normal form %q", a, correctBox, na)
			}
		}
		if plain && !strings.Contains(a, "\n") && !strings.Contains(a, GSM8KMarker) && !strings.Contains(a, AnswerMarker) {
			if !okHash || gotHash != strings.TrimSpace(a) {
				t.Fatalf("ExtractMathAnswer(%q) = %q, %v", hashes, gotHash, okHash)
			}
			if correctHash != (na != "") {
				t.Fatalf("%q against itself after ####: correct = %v, normal form %q", a, correctHash, na)
			}
		}
	})
}

// FuzzMathFractions checks fractions of integers against exact arithmetic:
// \frac{n}{d}, n/d and -\frac{-n}{d} are equal; they equal the decimal n/d
// when it is finite, and never \frac{n+1}{d}.
func FuzzMathFractions(f *testing.F) {
	f.Add(int32(1), int32(2))
	f.Add(int32(-3), int32(8))
	f.Add(int32(2), int32(6))
	f.Add(int32(0), int32(-7))
	f.Add(int32(-2147483648), int32(-1))
	f.Fuzz(func(t *testing.T, n, d int32) {
		if d == 0 {
			return
		}
		frac := fmt.Sprintf(`\frac{%d}{%d}`, n, d)
		for _, other := range []string{
			fmt.Sprintf("%d/%d", n, d),
			fmt.Sprintf(`-\dfrac{%d}{%d}`, -int64(n), d),
			fmt.Sprintf(`$\frac{%d}{%d}$`, 3*int64(n), 3*int64(d)),
		} {
			if !MathAnswersEqual(frac, other) {
				t.Fatalf("%q and %q differ (%q, %q)", frac, other, NormalizeMathAnswer(frac), NormalizeMathAnswer(other))
			}
		}
		if next := fmt.Sprintf(`\frac{%d}{%d}`, int64(n)+1, d); MathAnswersEqual(frac, next) {
			t.Fatalf("%q equals %q", frac, next)
		}
		// The decimal: the first k with n * 10^k divisible by d.
		num, den := big.NewInt(int64(n)), big.NewInt(int64(d))
		ten := big.NewInt(10)
		for k := 0; k <= 40; k++ {
			q, r := new(big.Int).QuoRem(num, den, new(big.Int))
			if r.Sign() == 0 {
				neg := q.Sign() < 0
				digits := q.Abs(q).String()
				for len(digits) <= k {
					digits = "0" + digits
				}
				dec := digits
				if k > 0 {
					dec = digits[:len(digits)-k] + "." + digits[len(digits)-k:]
				}
				if neg {
					dec = "-" + dec
				}
				if !MathAnswersEqual(frac, dec) {
					t.Fatalf("%q and its decimal %q differ (%q)", frac, dec, NormalizeMathAnswer(frac))
				}
				return
			}
			num.Mul(num, ten)
		}
		// Not a finite decimal: not equal to its 30-digit truncation.
		trunc := new(big.Rat).SetFrac(big.NewInt(int64(n)), big.NewInt(int64(d))).FloatString(30)
		if MathAnswersEqual(frac, trunc) {
			t.Fatalf("%q equals %q", frac, trunc)
		}
	})
}
