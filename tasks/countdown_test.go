package tasks

import (
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
)

func TestCountdownExpr(t *testing.T) {
	for _, c := range []struct {
		s    string
		want string // value as a/b, or "error: ..." text
		used []int
	}{
		{"1+2*3", "7/1", []int{1, 2, 3}},
		{"(1+2)*3", "9/1", []int{1, 2, 3}},
		{"8/3", "8/3", []int{8, 3}},
		{"8-3-2", "3/1", []int{8, 3, 2}}, // left associative
		{"8/4/2", "1/1", []int{8, 4, 2}},
		{" 2 * ( 3 + 4 ) ", "14/1", []int{2, 3, 4}},
		{"7-3*(25-50)", "82/1", []int{7, 3, 25, 50}},
		{"((((5))))", "5/1", []int{5}},
		{"", "error: ends early", nil},
		{"1+", "error: ends early", nil},
		{"-1", "error: want a number or (", nil},
		{"1/0", "error: division by zero", nil},
		{"1/(2-2)", "error: division by zero", nil},
		{"(1+2", "error: missing )", nil},
		{"1)", "error: unexpected ')'", nil},
		{"1e3", "error: unexpected 'e'", nil},
		{"1234567890", "error: over 9 digits", nil},
		{strings.Repeat("(", 70) + "1" + strings.Repeat(")", 70), "error: nested too deeply", nil},
		{strings.Repeat("1+", 130) + "1", "error: over 256", nil},
	} {
		v, used, err := CountdownExpr(c.s)
		if strings.HasPrefix(c.want, "error: ") {
			if err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(c.want, "error: ")) {
				t.Errorf("%q: %v, %v; want %s", c.s, v, err, c.want)
			}
			continue
		}
		if err != nil || v.String() != c.want || !slices.Equal(used, c.used) {
			t.Errorf("%q = %v %v %v; want %s %v", c.s, v, used, err, c.want, c.used)
		}
	}
}

func TestCountdownVerifier(t *testing.T) {
	v := CountdownVerifier{CorrectReward: 1, IncorrectReward: -1}
	p := CountdownProblem(4, []int{3, 7, 25, 50}, 82)
	if p.Prompt != "Use 3 7 25 50 for 82\n" || p.Answer != "82" {
		t.Fatalf("problem %+v", p)
	}
	for _, c := range []struct {
		resp string
		ok   bool
	}{
		{"Answer: 7+3*25", true},
		{"Answer: 3*25+7", true},
		{"Answer: 50+25+7", true},
		{"Answer: (50-25)*3+7", true},
		{"thinking\nAnswer: 1+1\nAnswer: 7 + 3 * 25\n", true}, // the last Answer: line counts
		{"Answer: 82", false},                                 // 82 is not given
		{"Answer: 7+7+25+50-7", false},                        // 7 three times
		{"Answer: 50+25+3+3+1", false},                        // 3 twice, 1 not given
		{"Answer: 7+3*25/1", false},                           // 1 not given
		{"Answer: 50+25+7/3*3", false},                        // 3 twice
		{"Answer: 50+25", false},                              // 75
		{"7+3*25", false},                                     // no Answer: line
		{"Answer: 7+3*25)", false},                            // malformed
		{"Answer: 50/3+25", false},                            // not an integer
	} {
		r, ok := v.Verify(p, c.resp)
		if ok != c.ok || (ok && r != 1) || (!ok && r != -1) {
			t.Errorf("%q: %v %v, want %v", c.resp, r, ok, c.ok)
		}
	}
	if _, ok := v.Verify(core.Problem{Prompt: "47+38="}, "Answer: 85"); ok {
		t.Error("a non-countdown prompt verified")
	}
}

// reachable computes, by a different method than CountdownSolutions (every
// ordered subset of the numbers and every postfix program over it, with
// big.Rat), whether target is reachable.
func reachable(nums []int, target int) bool {
	want := big.NewRat(int64(target), 1)
	n := len(nums)
	found := false
	// Postfix programs: k numbers and k-1 operators; the stack depth rule
	// decides where operators may go.
	var run func(stack []*big.Rat, usedMask int, ops int)
	run = func(stack []*big.Rat, usedMask int, ops int) {
		if found {
			return
		}
		if len(stack) == 1 && stack[0].Cmp(want) == 0 {
			found = true
			return
		}
		for i := range n {
			if usedMask&(1<<i) == 0 {
				run(append(slices.Clone(stack), big.NewRat(int64(nums[i]), 1)), usedMask|1<<i, ops)
			}
		}
		if len(stack) >= 2 {
			a, b := stack[len(stack)-2], stack[len(stack)-1]
			base := slices.Clone(stack[:len(stack)-2])
			for _, op := range "+-*/" {
				r := new(big.Rat)
				switch op {
				case '+':
					r.Add(a, b)
				case '-':
					r.Sub(a, b)
				case '*':
					r.Mul(a, b)
				case '/':
					if b.Sign() == 0 {
						continue
					}
					r.Quo(a, b)
				}
				run(append(slices.Clone(base), r), usedMask, ops+1)
			}
		}
	}
	run(nil, 0, 0)
	return found
}

// Every solution the solver returns verifies; the solver finds one exactly
// when the independent postfix search says the target is reachable; the
// known solutions of a hand-checked problem are among them.
func TestCountdownSolutions(t *testing.T) {
	sols := CountdownSolutions([]int{3, 7, 25, 50}, 82)
	for _, want := range []string{"7+3*25", "25+7+50", "7+3*(50-25)"} {
		if !slices.Contains(sols, want) {
			t.Errorf("%q not among %v", want, sols)
		}
	}
	v := CountdownVerifier{CorrectReward: 1, IncorrectReward: -1}
	rng := rand.New(rand.NewPCG(3, 4))
	solvable, unsolvable := 0, 0
	for range 150 {
		nums := []int{1 + rng.IntN(12), 1 + rng.IntN(12), 1 + rng.IntN(12)}
		slices.Sort(nums)
		target := 1 + rng.IntN(60)
		got := CountdownSolutions(nums, target)
		if (len(got) > 0) != reachable(nums, target) {
			t.Fatalf("%v -> %d: solver found %d solutions, postfix search says reachable=%v", nums, target, len(got), reachable(nums, target))
		}
		p := CountdownProblem(3, nums, target)
		for _, s := range got {
			if _, ok := v.Verify(p, "Answer: "+s); !ok {
				t.Fatalf("%v -> %d: solution %q does not verify", nums, target, s)
			}
		}
		if len(got) > 0 {
			solvable++
		} else {
			unsolvable++
		}
	}
	if solvable < 20 || unsolvable < 20 {
		t.Fatalf("weak test: %d solvable, %d unsolvable", solvable, unsolvable)
	}
}

func newCountdown(t *testing.T, m map[string]any) *Countdown {
	t.Helper()
	m["name"] = "countdown"
	task, err := New(core.NewParams("task", m))
	if err != nil {
		t.Fatal(err)
	}
	return task.(*Countdown)
}

// Problems are solvable, in range, in their split, distinct within a set,
// and the warm-start solutions vary across draws of the same problem.
func TestCountdownTask(t *testing.T) {
	c := newCountdown(t, map[string]any{"eval_n": 300, "eval_sets": []any{
		map[string]any{"name": "c3", "level": 3}, map[string]any{"name": "c4t", "level": 4, "split": "test"},
		map[string]any{"name": "ood", "level": 5}}})
	v := c.Verifier()
	for i, es := range c.EvalSets() {
		want := []Split{SplitVal, SplitTest, SplitVal}[i]
		seen := map[string]bool{}
		if len(es.Problems) != 300 {
			t.Fatalf("%s: %d problems", es.Name, len(es.Problems))
		}
		for _, p := range es.Problems {
			nums, target, err := ParseCountdownPrompt(p.Prompt)
			if err != nil || SplitOf(p.Prompt) != want || seen[p.Prompt] || target < 1 || target > 100 || slices.Contains(nums, target) {
				t.Fatalf("%s: %+v (%v)", es.Name, p, err)
			}
			seen[p.Prompt] = true
			for _, n := range nums {
				if n < 1 || n > 20 {
					t.Fatalf("%s: number %d", es.Name, n)
				}
			}
		}
	}
	train := c.SampleTrain(rand.New(rand.NewPCG(1, 1)), 400)
	levels := map[int]int{}
	for _, p := range train {
		levels[p.Level]++
		if SplitOf(p.Prompt) != SplitTrain {
			t.Fatalf("train problem in split %v: %q", SplitOf(p.Prompt), p.Prompt)
		}
		if _, ok := v.Verify(p, p.Solution); !ok {
			t.Fatalf("warm-start solution %q of %q does not verify", p.Solution, p.Prompt)
		}
	}
	if levels[3] < 150 || levels[4] < 150 || len(levels) != 2 {
		t.Fatalf("levels %v", levels)
	}
	// Same problem, different draws: more than one distinct solution.
	sols := map[string]bool{}
	for seed := range uint64(40) {
		for _, p := range c.SampleTrain(rand.New(rand.NewPCG(seed, 9)), 50) {
			if p.Prompt == train[0].Prompt {
				sols[p.Solution] = true
			}
		}
	}
	if n := len(CountdownSolutions(mustNums(t, train[0].Prompt))); n > 1 && len(sols) == 1 {
		t.Fatalf("one solution drawn of %d", n)
	}
	// Deterministic eval sets.
	again := newCountdown(t, map[string]any{"eval_n": 300, "eval_sets": []any{map[string]any{"name": "c3", "level": 3}}})
	if !slices.EqualFunc(again.EvalSets()[0].Problems, c.EvalSets()[0].Problems, func(a, b core.Problem) bool { return a.Prompt == b.Prompt }) {
		t.Fatal("eval set differs between builds")
	}
}

func mustNums(t *testing.T, prompt string) ([]int, int) {
	nums, target, err := ParseCountdownPrompt(prompt)
	if err != nil {
		t.Fatal(err)
	}
	return nums, target
}

func TestCountdownConfigErrors(t *testing.T) {
	for _, c := range []struct {
		m    map[string]any
		want string
	}{
		{map[string]any{"levels": []any{1}}, "task.levels: level 1 out of range 2..6"},
		{map[string]any{"max_number": 1}, "task.max_number: must be in 2..100"},
		{map[string]any{"max_target": 0}, "task.max_target: must be in 1..10000"},
		{map[string]any{"eval_n": 0}, "task.eval_n: must be >= 1"},
		{map[string]any{"eval_sets": []any{map[string]any{"name": "x"}}}, "task.eval_sets[0].level: required"},
		{map[string]any{"eval_sets": []any{map[string]any{"name": "x", "level": 3, "split": "train"}}}, "task.eval_sets[0].split"},
		{map[string]any{"max_number": 2, "max_target": 3, "eval_n": 300}, "only"},
		{map[string]any{"levels": []any{3}, "size": 3}, "task.size: unknown key"},
	} {
		c.m["name"] = "countdown"
		if _, err := New(core.NewParams("task", c.m)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want %q", c.m, err, c.want)
		}
	}
}

// Answer keys for maj@k: the value reached (countdown), the normalised
// answer (arith and math); "" without an answer.
func TestAnswerKeys(t *testing.T) {
	var cd CountdownVerifier
	p := CountdownProblem(3, []int{3, 7, 25}, 46)
	for _, c := range []struct{ resp, want string }{
		{"Answer: 25 + 3*7", "46"}, {"Answer: (7+25)/3", "32/3"}, {"Answer: 3 +", ""}, {"no answer", ""},
	} {
		if got := cd.AnswerKey(p, c.resp); got != c.want {
			t.Errorf("countdown %q: %q, want %q", c.resp, got, c.want)
		}
	}
	if got := (AnswerVerifier{}).AnswerKey(core.Problem{}, "Answer:  1,000 "); got != NormalizeAnswer("1000") || got == "" {
		t.Errorf("arith: %q", got)
	}
	if got := (MathVerifier{}).AnswerKey(core.Problem{}, `so \boxed{\frac{1}{2}}`); got != NormalizeMathAnswer(`\frac{1}{2}`) || got == "" {
		t.Errorf("math: %q", got)
	}
	if got := (MathVerifier{}).AnswerKey(core.Problem{}, "nothing"); got != "" {
		t.Errorf("math without an answer: %q", got)
	}
}
