package tasktest

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cde-rl/cde/core"
)

// sums is a hand-written task that keeps the contract: sums worked out by
// hand (no answer is another one plus one, so "ignores the problem" is
// caught by the cross check, not by the default wrong response), split into training and eval problems by prompt, sampled with rng
// alone, and a verifier reading the text after the last "Answer:" of
// the response, trimmed. bug breaks it in one way, named by the property
// that must catch it.
type sums struct {
	bug   string
	calls int
}

var (
	sumsTrain = []core.Problem{
		{ID: "t1", Prompt: "1+1=", Answer: "2", Solution: "1+1=2\nAnswer: 2"},
		{ID: "t2", Prompt: "2+3=", Answer: "5"},
		{ID: "t3", Prompt: "4+4=", Answer: "8"},
		{ID: "t4", Prompt: "7+6=", Answer: "13"},
		{ID: "t5", Prompt: "9+9=", Answer: "18"},
		{ID: "t6", Prompt: "10+20=", Answer: "30"},
		{ID: "t7", Prompt: "3-5=", Answer: "-2"},
	}
	sumsEval = []core.Problem{
		{ID: "e1", Prompt: "5+6=", Answer: "11"},
		{ID: "e2", Prompt: "8+13=", Answer: "21"},
		{ID: "e3", Prompt: "0+0=", Answer: "0"},
	}
)

func (s *sums) Name() string {
	if s.bug == "empty name" {
		return ""
	}
	return "sums"
}

func (s *sums) Tokenizer() core.Tokenizer { return charTok{} }

func (s *sums) Verifier() core.Verifier { return sumsVerifier{bug: s.bug} }

func (s *sums) SampleTrain(rng *rand.Rand, n int) []core.Problem {
	s.calls++
	out := make([]core.Problem, 0, n)
	for i := range n {
		switch s.bug {
		case "ignores rng":
			out = append(out, sumsTrain[i%len(sumsTrain)])
		case "keeps state":
			out = append(out, sumsTrain[(rng.IntN(len(sumsTrain))+s.calls)%len(sumsTrain)])
		default:
			out = append(out, sumsTrain[rng.IntN(len(sumsTrain))])
		}
	}
	if s.bug == "one short" && n > 0 {
		out = out[:n-1]
	}
	return out
}

func (s *sums) EvalSets() []core.EvalSet {
	eval := sumsEval
	if s.bug == "overlapping splits" {
		eval = append([]core.Problem{{ID: "e0", Prompt: "4+4=", Answer: "8"}}, sumsEval...)
	}
	sets := []core.EvalSet{{Name: "held", Problems: eval}}
	if s.bug == "duplicate eval names" {
		sets = append(sets, core.EvalSet{Name: "held", Problems: eval[:1]})
	}
	if s.bug == "reshuffles eval" {
		s.calls++
		if s.calls%2 == 0 {
			sets[0].Problems = []core.Problem{eval[1], eval[0], eval[2]}
		}
	}
	return sets
}

type sumsVerifier struct{ bug string }

func (v sumsVerifier) Rewards() (incorrect, correct float64) { return -1, 1 }

func (v sumsVerifier) Verify(p core.Problem, response string) (float64, bool) {
	if v.bug == "panics on empty" {
		_ = response[0]
	}
	i := strings.LastIndex(response, "Answer:")
	if v.bug == "panics on unbalanced braces" {
		if j := strings.Index(response, "{"); j >= 0 {
			_ = response[j:strings.Index(response, "}")] // -1 without a "}"
		}
	}
	if i < 0 {
		return -1, false
	}
	got := strings.TrimSpace(response[i+len("Answer:"):])
	if j := strings.IndexByte(got, '\n'); j >= 0 {
		got = strings.TrimSpace(got[:j])
	}
	switch v.bug {
	case "accepts any answer":
		return 1, got != ""
	case "accepts an empty answer":
		if got == "" {
			return 1, true
		}
	case "ignores the problem":
		if got == "2" || got == "5" || got == "8" || got == "13" || got == "18" || got == "30" || got == "-2" ||
			got == "11" || got == "21" || got == "0" {
			return 1, true
		}
	case "untrimmed":
		got = response[i+len("Answer:"):]
	case "wrong reward":
		if got == p.Answer {
			return 0.5, true
		}
	case "accepts a prefix of garbage":
		if !utf8.ValidString(got) {
			return 1, true
		}
	}
	if got == p.Answer {
		return 1, true
	}
	return -1, false
}

type charTok struct{}

func (charTok) Encode(s string) []int32 {
	out := make([]int32, 0, len(s))
	for _, b := range []byte(s) {
		out = append(out, int32(b))
	}
	return out
}

func (charTok) Decode(ids []int32) string {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte(id)
	}
	return string(b)
}

func (charTok) VocabSize() int { return 256 }
func (charTok) BOS() int32     { return -1 }
func (charTok) EOS() int32     { return 0 }
func (charTok) PAD() int32     { return 0 }

// The hand-written task keeps the contract.
func TestReferencePasses(t *testing.T) {
	if err := Check(&sums{}, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := Check(&sums{}, Options{Samples: 5, Verify: 2, Seed: 3}); err != nil {
		t.Fatal(err)
	}
}

// Each broken task fails the property named for it, with a message that
// says what went wrong.
func TestCatchesBrokenTasks(t *testing.T) {
	cases := []struct {
		bug, property, says string
	}{
		{"empty name", "Basics", "Name() is empty"},
		{"one short", "Sampling", "SampleTrain(rng, 1) returned 0 problems"},
		{"ignores rng", "Sampling", "SampleTrain ignores rng"},
		{"keeps state", "Sampling", "two draws with the same seed differ"},
		{"duplicate eval names", "EvalSets", `two eval sets are named "held"`},
		{"reshuffles eval", "EvalSets", "returns other problems on a second call"},
		{"overlapping splits", "Disjoint", `eval set "held" problem e0 has the prompt of training problem t3 ("4+4=")`},
		{"accepts any answer", "Wrong", `the wrong response "Answer: `},
		{"ignores the problem", "Wrong", "the right response to problem"},
		{"untrimmed", "Right", "scores incorrect"},
		{"wrong reward", "Right", "reward 0.5, but Rewards() says a correct answer gets 1"},
		{"accepts an empty answer", "Missing", `the response without an answer "Answer:" scores correct`},
		{"panics on empty", "Missing", "panic: runtime error: index out of range"},
		{"panics on unbalanced braces", "Malformed", "panic: runtime error: slice bounds out of range"},
		{"accepts a prefix of garbage", "Malformed", "the malformed response"},
	}
	for _, c := range cases {
		t.Run(c.bug, func(t *testing.T) {
			err := Check(&sums{bug: c.bug}, Options{})
			if err == nil {
				t.Fatalf("Check passed a task whose %s", c.bug)
			}
			if got := section(err, c.property); !strings.Contains(got, c.says) {
				t.Fatalf("want a %q failure saying %q, got:\n%v", c.property, c.says, err)
			}
		})
	}
}

// A nil task fails every property without a panic.
func TestNilTask(t *testing.T) {
	for _, task := range []core.Task{nil, (*sums)(nil)} {
		err := Check(task, Options{})
		for _, p := range Properties() {
			if err == nil || !strings.Contains(err.Error(), p.Name+": the task is nil") {
				t.Errorf("%#v: no %s failure in %v", task, p.Name, err)
			}
		}
	}
}

// The defaults, by hand: the warm-start solution when there is one, and
// the integer answer plus one.
func TestDefaults(t *testing.T) {
	for _, c := range []struct {
		p            core.Problem
		right, wrong string
	}{
		{core.Problem{Answer: "85", Solution: "7+8=15\n4+3+1=8\nAnswer: 85"}, "7+8=15\n4+3+1=8\nAnswer: 85", "Answer: 86"},
		{core.Problem{Answer: "-5"}, "Answer: -5", "Answer: -4"},
		{core.Problem{Answer: " 99999999999999999999 "}, "Answer:  99999999999999999999 ", "Answer: 100000000000000000000"},
		{core.Problem{Answer: `\frac{5}{6}`}, `Answer: \frac{5}{6}`, "Answer: no answer is this text"},
		{core.Problem{Answer: "1.5"}, "Answer: 1.5", "Answer: no answer is this text"},
		{core.Problem{Answer: "-"}, "Answer: -", "Answer: no answer is this text"},
	} {
		if got := DefaultRight(c.p); got != c.right {
			t.Errorf("DefaultRight(%+v) = %q, want %q", c.p, got, c.right)
		}
		if got := DefaultWrong(c.p); got != c.wrong {
			t.Errorf("DefaultWrong(%+v) = %q, want %q", c.p, got, c.wrong)
		}
	}
}

// Options.Right and Options.Wrong replace the defaults: a task whose
// answers are written "= N" passes with them and fails without.
func TestCustomResponses(t *testing.T) {
	eq := &equals{}
	opts := Options{
		Right: func(p core.Problem) string { return "= " + p.Answer },
		Wrong: func(p core.Problem) string { return "= x" + p.Answer },
	}
	if err := Check(eq, opts); err != nil {
		t.Fatal(err)
	}
	if err := CheckRight(eq, Options{}); err == nil {
		t.Fatal("the default right response passed a verifier that reads \"= N\"")
	}
}

type equals struct{ sums }

func (e *equals) Verifier() core.Verifier { return equalsVerifier{} }

type equalsVerifier struct{}

func (equalsVerifier) Verify(p core.Problem, response string) (float64, bool) {
	got, ok := strings.CutPrefix(response, "= ")
	if ok && got == p.Answer {
		return 1, true
	}
	return 0, false
}

// section is the part of Check's error reporting property: its line and
// the lines after it up to the next property's ("" when it did not fail).
func section(err error, property string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(err.Error(), "\n") {
		for _, p := range Properties() {
			if strings.HasPrefix(line, p.Name+": ") {
				in = p.Name == property
			}
		}
		if in {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}
