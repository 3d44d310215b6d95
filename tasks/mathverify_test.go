package tasks

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/internal/testwait"
)

// mathCases are hand-worked: each response, the reference answer, the
// extracted text and the verdict.
var mathCases = []struct {
	name, response, answer string
	extracted              string
	found, correct         bool
}{
	// GSM8K formats.
	{"gsm8k hashes", "She has 8 * 9 = 72 cookies.\n#### 72", "72", "72", true, true},
	{"gsm8k boxed", `So the total is \boxed{72}.`, "72", "72", true, true},
	{"gsm8k hashes wrong", "#### 71", "72", "71", true, false},
	{"gsm8k thousands in answer", "#### 1,450,000", "1450000", "1,450,000", true, true},
	{"gsm8k thousands in reference", `\boxed{114200}`, "114,200", "114200", true, true},
	{"gsm8k last hashes wins", "#### 3\nno, wait\n#### 4", "4", "4", true, true},
	{"gsm8k hashes no space", "####18", "18", "18", true, true},
	{"gsm8k dollars", `She makes \boxed{\$18} every day.`, "18", `\$18`, true, true},
	{"gsm8k dollar sign plain", "#### $18.00", "18", "$18.00", true, true},
	{"gsm8k negative", "#### -5", "-5", "-5", true, true},
	{"gsm8k trailing zeros", `\boxed{18.50}`, "18.5", "18.50", true, true},
	// Answer: lines.
	{"answer line", "work\nAnswer: 42", "42", "42", true, true},
	{"answer line last wins", "Answer: 1\nAnswer: 2\n", "2", "2", true, true},
	{"answer before hashes", "Answer: 7\n#### 8", "7", "7", true, true},
	{"box beats answer line", "\\boxed{3}\nAnswer: 4", "3", "3", true, true},
	{"empty answer line", "Answer:   \n", "0", "", true, false},
	// Boxes.
	{"nested braces", `\boxed{\frac{1}{2}}`, `\frac12`, `\frac{1}{2}`, true, true},
	{"nested box", `\boxed{\boxed{5}}`, "5", "5", true, true},
	{"multiple boxes last wins", `\boxed{1} then \boxed{2}`, "2", "2", true, true},
	{"multiple boxes first is wrong answer", `\boxed{2} then \boxed{1}`, "2", "1", true, false},
	{"boxed space form", `so \boxed 5$`, "5", "5", true, true},
	{"boxed space form end", `the answer is \boxed 7`, "7", "7", true, true},
	{"fbox", `\fbox{12}`, "12", "12", true, true},
	{"box with space before brace", `\boxed {9}`, "9", "9", true, true},
	{"unclosed last box", `\boxed{1} and \boxed{2`, "2", "", false, false},
	{"unclosed last box no fallback", "\\boxed{3\nAnswer: 3", "3", "", false, false},
	{"escaped brace inside box", `\boxed{\{1,2\}}`, `\{1, 2\}`, `\{1,2\}`, true, true},
	{"stray closing brace after box", `\boxed{4}}`, "4", "4", true, true},
	{"boxedfoo is not a box", `\boxedfoo{3} Answer: 5`, "5", "5", true, true},
	{"boxed in dollars", `$\boxed{-3}$.`, "-3", "-3", true, true},
	{"empty box", `\boxed{}`, "", "", true, false},
	{"no answer", "I do not know.", "5", "", false, false},
	{"empty response", "", "5", "", false, false},
	{"empty reference", `\boxed{5}`, "", "5", true, false},
	// Fractions and decimals.
	{"frac equals decimal", `\boxed{\frac{1}{2}}`, "0.5", `\frac{1}{2}`, true, true},
	{"dfrac", `\boxed{\dfrac{3}{4}}`, `\frac{3}{4}`, `\dfrac{3}{4}`, true, true},
	{"tfrac and slash", `\boxed{\tfrac{3}{4}}`, "3/4", `\tfrac{3}{4}`, true, true},
	{"unreduced fraction", `\boxed{\frac{2}{6}}`, `\frac{1}{3}`, `\frac{2}{6}`, true, true},
	{"third is not 0.333", `\boxed{0.333}`, `\frac{1}{3}`, "0.333", true, false},
	{"negative fraction", `\boxed{-\frac{1}{3}}`, `\frac{-1}{3}`, `-\frac{1}{3}`, true, true},
	{"negative denominator", `\boxed{\frac{1}{-4}}`, "-0.25", `\frac{1}{-4}`, true, true},
	{"whole fraction", `\boxed{\frac{6}{3}}`, "2", `\frac{6}{3}`, true, true},
	{"zero denominator stays text", `\boxed{1/0}`, "1/0", "1/0", true, true},
	{"frac shorthand with space", `\boxed{\frac 3 8}`, "0.375", `\frac 3 8`, true, true},
	{"leading dot", `\boxed{.5}`, "0.5", ".5", true, true},
	{"wrong fraction", `\boxed{\frac{1}{2}}`, `\frac{1}{4}`, `\frac{1}{2}`, true, false},
	// Roots and expressions.
	{"sqrt shorthand", `\boxed{2\sqrt2}`, `2\sqrt{2}`, `2\sqrt2`, true, true},
	{"frac of sqrt", `\boxed{\frac{\sqrt{3}}{2}}`, `\dfrac{\sqrt3}{2}`, `\frac{\sqrt{3}}{2}`, true, true},
	{"no symbolic algebra", `\boxed{\frac{1}{\sqrt{2}}}`, `\frac{\sqrt{2}}{2}`, `\frac{1}{\sqrt{2}}`, true, false},
	{"cube root", `\boxed{\sqrt[3]{2}}`, `\sqrt[3]2`, `\sqrt[3]{2}`, true, true},
	{"spaces in expression", `\boxed{x^2 + 2x + 1}`, "x^2+2x+1", "x^2 + 2x + 1", true, true},
	{"pi", `\boxed{4\pi}`, `4 \pi`, `4\pi`, true, true},
	{"equation right side", `\boxed{x = 5}`, "5", "x = 5", true, true},
	{"equation both sides", `\boxed{y=2x+3}`, "y = 2x + 3", "y=2x+3", true, true},
	{"thin spaces", `\boxed{10\,000}`, "10000", `10\,000`, true, true},
	{"braced comma thousands", `\boxed{1{,}000}`, "1000", "1{,}000", true, true},
	// Intervals and sets.
	{"interval", `\boxed{(-\infty, 3]}`, `(-\infty,3]`, `(-\infty, 3]`, true, true},
	{"interval left right", `\boxed{\left[ 2, 5 \right)}`, "[2,5)", `\left[ 2, 5 \right)`, true, true},
	{"interval wrong bracket", `\boxed{[2,5]}`, "[2,5)", "[2,5]", true, false},
	{"tuple", `\boxed{(1, -2)}`, "(1,-2)", "(1, -2)", true, true},
	// Degrees, percents, money, units, text.
	{"degrees circ", `\boxed{30^\circ}`, "30", `30^\circ`, true, true},
	{"degrees braced circ", `\boxed{30^{\circ}}`, "30^\\circ", `30^{\circ}`, true, true},
	{"degrees word", `\boxed{90 \text{ degrees}}`, "90", `90 \text{ degrees}`, true, true},
	{"percent escaped", `\boxed{50\%}`, "50", `50\%`, true, true},
	{"percent plain", "Answer: 12.5%", "12.5", "12.5%", true, true},
	{"percent is not fraction", `\boxed{50\%}`, "0.5", `50\%`, true, false},
	{"money", `\boxed{\$1,234.50}`, "1234.5", `\$1,234.50`, true, true},
	{"units text", `\boxed{5 \text{ cm}}`, "5", `5 \text{ cm}`, true, true},
	{"units squared", `\boxed{12\mbox{ square feet}}`, "12", `12\mbox{ square feet}`, true, true},
	{"units plain word", "#### 60 mph", "60", "60 mph", true, true},
	{"units cm squared", `\boxed{24 \text{cm}^2}`, "24", `24 \text{cm}^2`, true, true},
	{"variable is not a unit", `\boxed{5x}`, "5", "5x", true, false},
	{"text wrapper kept", `\boxed{\text{(B)}}`, "(B)", `\text{(B)}`, true, true},
	{"textbf", `\boxed{\textbf{Tuesday}}`, "Tuesday", `\textbf{Tuesday}`, true, true},
	{"text word differs", `\boxed{\text{yes}}`, "no", `\text{yes}`, true, false},
	// Negative numbers and signs.
	{"negative zero", `\boxed{-0}`, "0", "-0", true, true},
	{"plus sign", `\boxed{+7}`, "7", "+7", true, true},
	{"negative wrong sign", `\boxed{-7}`, "7", "-7", true, false},
	{"negative with left right", `\boxed{\left(-2\right)}`, "(-2)", `\left(-2\right)`, true, true},
	{"exact long decimal", `\boxed{0.1000000000000000000001}`, "0.1", "0.1000000000000000000001", true, false},
	{"trailing period", "Answer: 9.", "9", "9.", true, true},
	{"dollar math", "Answer: $\\frac{7}{8}$", "0.875", `$\frac{7}{8}$`, true, true},
	{"negative spacing bang", `\boxed{1\!000}`, "1000", `1\!000`, true, true},
}

func TestMathVerifierTable(t *testing.T) {
	if len(mathCases) < 60 {
		t.Fatalf("only %d cases", len(mathCases))
	}
	v := NewMathVerifier()
	for _, c := range mathCases {
		got, found := ExtractMathAnswer(c.response)
		if got != c.extracted || found != c.found {
			t.Errorf("%s: ExtractMathAnswer(%q) = %q, %v; want %q, %v", c.name, c.response, got, found, c.extracted, c.found)
		}
		reward, correct := v.Verify(core.Problem{Answer: c.answer}, c.response)
		if correct != c.correct {
			t.Errorf("%s: Verify(answer %q, %q) correct = %v, want %v (normal forms %q and %q)", c.name, c.answer, c.response,
				correct, c.correct, NormalizeMathAnswer(got), NormalizeMathAnswer(c.answer))
		}
		if want := map[bool]float64{true: 1, false: -1}[c.correct]; reward != want {
			t.Errorf("%s: reward %v, want %v", c.name, reward, want)
		}
	}
	t.Logf("%d cases", len(mathCases))
}

func TestMathVerifierRewards(t *testing.T) {
	v := MathVerifier{CorrectReward: 2, IncorrectReward: 0.5}
	if r, ok := v.Verify(core.Problem{Answer: "3"}, `\boxed{3}`); !ok || r != 2 {
		t.Fatalf("correct: %v %v", r, ok)
	}
	if r, ok := v.Verify(core.Problem{Answer: "3"}, `\boxed{4}`); ok || r != 0.5 {
		t.Fatalf("incorrect: %v %v", r, ok)
	}
}

func TestNormalizeMathAnswer(t *testing.T) {
	for _, c := range [][2]string{
		{`\frac{1}{2}`, "0.5"},
		{"2/6", `\frac{1}{3}`},
		{`\frac{1}{-3}`, `-\frac{1}{3}`},
		{`-\frac{-1}{4}`, "0.25"},
		{`\dfrac12`, "0.5"},
		{`\sqrt2`, `\sqrt{2}`},
		{`\frac{\sqrt2}2`, `\frac{\sqrt{2}}{2}`},
		{"x = 1,234", "1234"},
		{`\text{ 5 dollars }`, "5"},
		{`\left\{1, 2\right\}`, `\{1,2\}`},
		{`\$ 3.10`, "3.1"},
		{"007", "7"},
		{`\rightarrow`, `\rightarrow`},
		{`a \le b`, `a\leb`},
		{"", ""},
		{"  ", ""},
		{"= ", ""},
	} {
		if got := NormalizeMathAnswer(c[0]); got != c[1] {
			t.Errorf("NormalizeMathAnswer(%q) = %q, want %q", c[0], got, c[1])
		}
	}
}

// TestMathVerifierLinear checks that long adversarial inputs take linear
// time: nested and unclosed boxes, long fractions, long numbers.
func TestMathVerifierLinear(t *testing.T) {
	const n = 200_000
	for name, resp := range map[string]string{
		"unclosed boxes": strings.Repeat(`\boxed{`, n),
		"nested boxes":   strings.Repeat(`\boxed{`, n) + "1" + strings.Repeat("}", n),
		"boxed words":    strings.Repeat(`\boxed `, n),
		"long number":    `\boxed{` + strings.Repeat("9", 10*n) + "}",
		"long fraction":  `\boxed{\frac{` + strings.Repeat("1", n) + "}{" + strings.Repeat("2", n) + "}}",
		"frac shorthand": `\boxed{` + strings.Repeat(`\frac1`, n) + "}",
		"text wrappers":  strings.Repeat(`\text{`, n) + strings.Repeat("}", n),
		"answer lines":   strings.Repeat("Answer: 1\n", n),
		"hashes":         strings.Repeat("####", n),
	} {
		start := time.Now()
		got, _ := ExtractMathAnswer(resp)
		_ = MathAnswersEqual(got, got)
		// Linear code takes milliseconds here (the nine cases 1.4 s in
		// all on a loaded 2-core machine); quadratic behaviour on these
		// sizes takes minutes. The bound grows with the machine's load
		// (internal/testwait): "long number" once took 5.5 s at the end
		// of a full test run beside a two-job bench.
		if d, limit := time.Since(start), testwait.Scale(5*time.Second); d > limit {
			t.Errorf("%s: %v for %d bytes (limit %v)", name, d, len(resp), limit)
		}
	}
}

// TestGSM8KSelfCheck verifies every GSM8K test answer against itself, wrapped
// as \boxed{N} and as "#### N".
func TestGSM8KSelfCheck(t *testing.T) {
	path := filepath.Join("testdata", "gsm8k", "test.jsonl")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v := NewMathVerifier()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n := 0
	for line := 1; sc.Scan(); line++ {
		var row struct {
			Answer string `json:"answer"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("%s:%d: %v", path, line, err)
		}
		i := strings.LastIndex(row.Answer, "#### ")
		if i < 0 {
			t.Fatalf("%s:%d: no final answer", path, line)
		}
		final := strings.TrimSpace(row.Answer[i+len("#### "):])
		p := core.Problem{Answer: final}
		for _, resp := range []string{`The answer is \boxed{` + final + "}.", "Work.\n#### " + final, row.Answer} {
			if _, ok := v.Verify(p, resp); !ok {
				got, _ := ExtractMathAnswer(resp)
				t.Errorf("%s:%d: %q does not verify against %q (extracted %q)", path, line, resp, final, got)
			}
		}
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 1319 {
		t.Fatalf("%d GSM8K test answers, want 1319", n)
	}
	t.Logf("%d GSM8K test answers verify against themselves as \\boxed{}, as #### N and as the full solution", n)
}

// TestMathDocExamples checks the examples of docs/verifier.md section 2.
func TestMathDocExamples(t *testing.T) {
	for _, c := range [][2]string{
		{`\$1,234.50`, "1234.5"}, {`30^\circ`, "30"}, {`30^{\circ}`, "30"}, {`90 \text{ degrees}`, "90"},
		{`5 \text{ cm}`, "5"}, {`24 \text{cm}^2`, "24"}, {`12\mbox{ square feet}`, "12"}, {"60 mph", "60"},
		{`\left[ 2, 5 \right)`, "[2,5)"}, {`(-\infty, 3]`, `(-\infty,3]`}, {`10\,000`, "10000"},
		{`1{,}000`, "1000"}, {`1\!000`, "1000"}, {`\dfrac{\sqrt3}{2}`, `\frac{\sqrt{3}}{2}`},
		{`-\frac{1}{3}`, `\frac{-1}{3}`}, {`\textbf{Tuesday}`, "Tuesday"}, {`$\frac{7}{8}$`, "0.875"},
		{"18.50", "+18.5"}, {"1,450,000", "1450000"}, {`\frac{3}{4}`, "3/4"}, {"3/4", "0.75"},
		{"2/4", "0.5"}, {"6/3", "2"}, {"2/6", `\frac{1}{3}`}, {"x = 5", "5"}, {"y=2x+3", "2x+3"},
		{`\sqrt[3]2`, `\sqrt[3]{2}`}, {`\frac 3 8`, `\frac{3}{8}`},
	} {
		if !MathAnswersEqual(c[0], c[1]) {
			t.Errorf("%q and %q differ (%q, %q)", c[0], c[1], NormalizeMathAnswer(c[0]), NormalizeMathAnswer(c[1]))
		}
	}
	for _, c := range [][2]string{
		{"0.333", `\frac{1}{3}`}, {`50\%`, "0.5"}, {`\frac{1}{\sqrt{2}}`, `\frac{\sqrt{2}}{2}`},
		{"[2,5]", "[2,5)"}, {"5x", "5"}, {"1e3", "1000"}, {`2\frac{1}{2}`, "2.5"}, {"5 m", "5"},
	} {
		if MathAnswersEqual(c[0], c[1]) {
			t.Errorf("%q and %q are equal (%q)", c[0], c[1], NormalizeMathAnswer(c[0]))
		}
	}
	if got := NormalizeMathAnswer("5 m"); got != "5m" {
		t.Errorf(`NormalizeMathAnswer("5 m") = %q`, got)
	}
}
