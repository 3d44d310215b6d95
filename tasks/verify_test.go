package tasks

import (
	"strings"
	"testing"
	"time"

	"github.com/cde-rl/cde/core"
)

func TestNormalizeAnswer(t *testing.T) {
	cases := []struct{ in, want string }{
		{"85", "85"},
		{"  85  ", "85"},
		{"+5", "5"},
		{"007", "7"},
		{"-0", "0"},
		{"-007", "-7"},
		{"+0", "0"},
		{"1,234", "1234"},
		{"-1,234,567", "-1234567"},
		{"12,34", "12,34"}, // not thousands grouping: kept
		{"85.", "85"},
		{"$85$", "85"},
		{`\boxed{85}`, "85"},
		{`$\boxed{1,234}$.`, "1234"},
		{`\boxed{$-3$}`, "-3"},
		{"1 234", "1234"},
		{"0.50", "0.5"},
		{".5", "0.5"},
		{"3.0", "3"},
		{"-0.0", "0"},
		{"x + 1", "x+1"},
		{"", ""},
		{"$", "$"},
		{"abc", "abc"},
		{`\boxed {85}`, "85"},    // white space goes first, so the box is seen
		{"$ 1, 234 $ .", "1234"}, // and thousands commas too
		// Invalid UTF-8 becomes U+FFFD before white space goes, so the stray
		// bytes of "\xc2 \xa0" do not join into U+00A0 (a space).
		{"\xc2  \xa0", "\uFFFD\uFFFD"},
	}
	for _, c := range cases {
		if got := NormalizeAnswer(c.in); got != c.want {
			t.Errorf("NormalizeAnswer(%q) = %q, want %q", c.in, got, c.want)
		}
		if got := NormalizeAnswer(c.want); got != c.want {
			t.Errorf("NormalizeAnswer(%q) = %q: a normal form must be its own", c.want, got)
		}
	}
}

func TestAnswerVerifier(t *testing.T) {
	v := NewAnswerVerifier()
	p := core.Problem{Prompt: "47+38=", Answer: "85"}
	cases := []struct {
		name    string
		answer  string // reference; "85" when empty
		resp    string
		correct bool
	}{
		{"exact", "", "Answer: 85", true},
		{"no space", "", "Answer:85", true},
		{"wrong", "", "Answer: 86", false},
		{"missing marker", "", "85", false},
		{"empty response", "", "", false},
		{"empty answer", "", "Answer:", false},
		{"answer only on a later line", "", "Answer:\n85", false},
		{"reasoning before", "", "40+30=70\n7+8=15\nAnswer: 85", true},
		{"last Answer line wins", "", "Answer: 85\nAnswer: 84", false},
		{"last Answer line wins (correct)", "", "Answer: 84\nAnswer: 85\n", true},
		{"last Answer on the line wins", "", "Answer: 84 Answer: 85", true},
		{"trailing text after line", "", "Answer: 85\nbecause", true},
		{"boxed", "", `Answer: $\boxed{85}$`, true},
		{"period", "", "Answer: 85.", true},
		{"leading zeros", "", "Answer: 085", true},
		{"plus sign", "", "Answer: +85", true},
		{"decimal", "", "Answer: 85.0", true},
		{"negative ref", "-5", "Answer: -5", true},
		{"negative wrong sign", "-5", "Answer: 5", false},
		{"minus zero", "0", "Answer: -0", true},
		{"thousands", "1234", "Answer: 1,234", true},
		{"string answer", "x+1", "Answer: x + 1", true},
		{"string mismatch", "x+1", "Answer: x+2", false},
		{"trailing garbage", "", "Answer: 85 apples", false},
		{"CRLF", "", "Answer: 85\r\n", true},
	}
	for _, c := range cases {
		q := p
		if c.answer != "" {
			q.Answer = c.answer
		}
		r, ok := v.Verify(q, c.resp)
		want := -1.0
		if c.correct {
			want = 1
		}
		if ok != c.correct || r != want {
			t.Errorf("%s: Verify(%q, %q) = %v, %v; want %v, %v", c.name, q.Answer, c.resp, r, ok, want, c.correct)
		}
	}
}

func TestAnswerVerifierCustomRewards(t *testing.T) {
	v := AnswerVerifier{CorrectReward: 2, IncorrectReward: 0}
	p := core.Problem{Answer: "7"}
	if r, ok := v.Verify(p, "Answer: 7"); r != 2 || !ok {
		t.Errorf("correct: got %v, %v; want 2, true", r, ok)
	}
	if r, ok := v.Verify(p, "Answer: 8"); r != 0 || ok {
		t.Errorf("wrong: got %v, %v; want 0, false", r, ok)
	}
	if r, ok := v.Verify(p, "7"); r != 0 || ok {
		t.Errorf("missing: got %v, %v; want 0, false", r, ok)
	}
}

// Numbers of any length compare by value in linear time. Before, both sides
// went through big.Rat, whose decimal parsing is quadratic: the 10^6-digit
// comparisons below took minutes.
func TestAnswersEqualHugeNumbers(t *testing.T) {
	const n = 1_000_000
	digits := strings.Repeat("7", n)
	cases := []struct {
		name, a, b string
		equal      bool
	}{
		{"integer vs decimal", "1" + digits, "001" + digits + ".000", true},
		{"integer, last digit differs", "1" + digits, "1" + digits[:n-1] + "8", false},
		{"fraction vs padded fraction", "0." + digits, "+." + digits + "0000", true},
		{"fraction, one more digit", "0." + digits, "0." + digits + "1", false},
		{"boxed negative", `$\boxed{-` + digits + `}$`, "-" + digits + ".", true},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, c := range cases {
			if got := AnswersEqual(c.a, c.b); got != c.equal {
				t.Errorf("%s: AnswersEqual = %v, want %v", c.name, got, c.equal)
			}
			if got := AnswersEqual(c.b, c.a); got != c.equal {
				t.Errorf("%s (swapped): AnswersEqual = %v, want %v", c.name, got, c.equal)
			}
		}
		// A model that writes a very long number is judged without hanging.
		v := NewAnswerVerifier()
		if _, ok := v.Verify(core.Problem{Answer: "7"}, "Answer: "+digits); ok {
			t.Error("Verify: a 10^6-digit answer equal to 7")
		}
		if _, ok := v.Verify(core.Problem{Answer: "7" + digits[1:]}, "work\nAnswer: "+digits+".0\n"); !ok {
			t.Error("Verify: a 10^6-digit answer not equal to itself")
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("comparing 10^6-digit numbers took over 20 s (want linear time: well under a second)")
	}
}
