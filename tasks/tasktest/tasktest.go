// Package tasktest is a conformance kit for core.Task implementations (a
// problem source with a verifier), as core/strategytest is for strategies
// and core/algotest for algorithms, in the spirit of testing/slogtest: a
// task's test calls Run (or Check, which returns an error listing every
// property that failed) and gets the contract of core/task.go checked.
//
// The properties, each also exported as a function returning an error:
//
//   - Basics (CheckBasics): Name is non-empty and stable; Tokenizer and
//     Verifier are non-nil.
//   - Sampling (CheckSampling): SampleTrain(rng, n) returns exactly n
//     problems (none for n = 0), each with a non-empty prompt; the same
//     seed gives the same problems (also after drawing with other seeds
//     in between: the draw depends on rng alone), and two seeds give
//     different draws unless every problem drawn has the same prompt.
//   - EvalSets (CheckEvalSets): the eval sets have non-empty, distinct
//     names, non-empty prompts, and are the same on every call.
//   - Disjoint (CheckDisjoint): no eval problem's prompt is a training
//     prompt, training meaning every problem of TrainProblems for a
//     core.TrainLister, and otherwise every problem of SampleTrain draws
//     with several seeds. Prompts are compared, since they are what a
//     model sees (ids need not be disjoint: two files may number their
//     rows alike).
//   - Right (CheckRight): the verifier scores a right response (Options.Right)
//     to training and eval problems correct, with a finite reward equal to
//     the correct level of a core.RewardLevels verifier; the same verdict
//     twice.
//   - Wrong (CheckWrong): it scores a wrong response (Options.Wrong)
//     incorrect, and a problem's right response incorrect for another
//     problem whose answer is another integer (a verifier that ignores
//     the problem fails); the reward is finite and, for a
//     core.RewardLevels verifier, its incorrect level.
//   - Missing (CheckMissing): responses with no answer at all (empty,
//     blank, prose, an empty "Answer:" line, an empty \boxed{}, an empty
//     "####") are incorrect, with a finite reward, and do not panic.
//   - Malformed (CheckMalformed): garbage (invalid UTF-8, NUL bytes),
//     unbalanced or deeply nested \boxed{ and braces, a 256 KiB number,
//     32768 "Answer:" lines, non-numbers where a number is expected,
//     are incorrect without a panic, with a finite reward; so is the zero
//     Problem (no prompt, no answer), which must only not panic.
//
// The kit calls the task's methods only; it knows no task by name.
package tasktest

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"reflect"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
)

// AnswerMarker starts the final-answer line of cde's responses and
// warm-start solutions ("Answer: 85"); the default right and wrong
// responses use it.
const AnswerMarker = "Answer:"

// Options say what the kit needs to know of a task. Zero fields take the
// defaults given.
type Options struct {
	// Right returns a response the verifier must score correct for p.
	// Default: p.Solution when it is non-empty (the warm-start solution,
	// which must verify), else "Answer: " + p.Answer. A task whose answer
	// is not its reference text (countdown: any expression reaching the
	// target) sets it.
	Right func(p core.Problem) string
	// Wrong returns a response the verifier must score incorrect for p.
	// Default: "Answer: " + the reference answer plus one when it is an
	// integer, else "Answer: " + a text no answer equals.
	Wrong func(p core.Problem) string
	// Samples is the number of problems of each SampleTrain draw
	// (default 64).
	Samples int
	// Verify bounds the problems whose right and wrong responses are
	// verified: the first Verify of a training draw and of each eval set
	// (default 24).
	Verify int
	// Seed seeds the draws.
	Seed uint64
}

func (o Options) withDefaults() Options {
	if o.Right == nil {
		o.Right = DefaultRight
	}
	if o.Wrong == nil {
		o.Wrong = DefaultWrong
	}
	if o.Samples <= 0 {
		o.Samples = 64
	}
	if o.Verify <= 0 {
		o.Verify = 24
	}
	return o
}

// DefaultRight is the default Options.Right: p.Solution when non-empty,
// else "Answer: " + p.Answer.
func DefaultRight(p core.Problem) string {
	if p.Solution != "" {
		return p.Solution
	}
	return AnswerMarker + " " + p.Answer
}

// DefaultWrong is the default Options.Wrong: "Answer: N+1" for an integer
// reference answer N, else "Answer: " + a text no answer equals.
func DefaultWrong(p core.Problem) string {
	if n, ok := integer(p.Answer); ok {
		return AnswerMarker + " " + n.Add(n, big.NewInt(1)).String()
	}
	return AnswerMarker + " no answer is this text"
}

// integer parses a plain decimal integer (an optional sign and digits).
func integer(s string) (*big.Int, bool) {
	s = strings.TrimSpace(s)
	digits := strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return nil, false
	}
	return new(big.Int).SetString(s, 10)
}

// Property is one named conformance check.
type Property struct {
	Name string
	Func func(task core.Task, opts Options) error
}

// Properties lists the checks Check and Run perform, in order.
func Properties() []Property {
	return []Property{
		{"Basics", CheckBasics},
		{"Sampling", CheckSampling},
		{"EvalSets", CheckEvalSets},
		{"Disjoint", CheckDisjoint},
		{"Right", CheckRight},
		{"Wrong", CheckWrong},
		{"Missing", CheckMissing},
		{"Malformed", CheckMalformed},
	}
}

// Check runs every property and returns nil when all hold, else an error
// joining one "Property: reason" error per failed property.
func Check(task core.Task, opts Options) error {
	var errs []error
	for _, p := range Properties() {
		if err := p.Func(task, opts); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Run runs every property as a subtest of t.
func Run(t *testing.T, task core.Task, opts Options) {
	t.Helper()
	for _, p := range Properties() {
		t.Run(p.Name, func(t *testing.T) {
			if err := p.Func(task, opts); err != nil {
				t.Error(err)
			}
		})
	}
}

// CheckBasics checks Name, Tokenizer and Verifier.
func CheckBasics(task core.Task, opts Options) error {
	if isNil(task) {
		return errors.New("the task is nil")
	}
	return guard(func() error {
		name := task.Name()
		if name == "" {
			return errors.New("Name() is empty")
		}
		if again := task.Name(); again != name {
			return fmt.Errorf("Name() is not stable: %q, then %q", name, again)
		}
		if isNil(task.Tokenizer()) {
			return errors.New("Tokenizer() is nil")
		}
		if isNil(task.Verifier()) {
			return errors.New("Verifier() is nil")
		}
		return nil
	})
}

// CheckSampling checks SampleTrain's count and determinism.
func CheckSampling(task core.Task, opts Options) error {
	if isNil(task) {
		return errors.New("the task is nil")
	}
	o := opts.withDefaults()
	return guard(func() error {
		if got := task.SampleTrain(rng(o.Seed, 0), 0); len(got) != 0 {
			return fmt.Errorf("SampleTrain(rng, 0) returned %d problems", len(got))
		}
		for _, n := range []int{1, o.Samples} {
			got := task.SampleTrain(rng(o.Seed, 1), n)
			if len(got) != n {
				return fmt.Errorf("SampleTrain(rng, %d) returned %d problems", n, len(got))
			}
			for i, p := range got {
				if p.Prompt == "" {
					return fmt.Errorf("SampleTrain(rng, %d): problem %d (%s) has an empty prompt", n, i, p.ID)
				}
			}
		}
		a := task.SampleTrain(rng(o.Seed, 1), o.Samples)
		b := task.SampleTrain(rng(o.Seed, 2), o.Samples)
		again := task.SampleTrain(rng(o.Seed, 1), o.Samples)
		if i := firstDifferent(a, again); i >= 0 {
			return fmt.Errorf("two draws with the same seed differ at problem %d: %s, then %s (the draw must depend on rng alone)", i, a[i].ID, again[i].ID)
		}
		distinct := map[string]bool{}
		for _, p := range a {
			distinct[p.Prompt] = true
		}
		if len(distinct) > 1 && firstDifferentPrompt(a, b) < 0 {
			return fmt.Errorf("two seeds draw the same %d problems in the same order (%d distinct prompts): SampleTrain ignores rng", len(a), len(distinct))
		}
		return nil
	})
}

// CheckEvalSets checks the eval sets' names, prompts and stability.
func CheckEvalSets(task core.Task, opts Options) error {
	if isNil(task) {
		return errors.New("the task is nil")
	}
	return guard(func() error {
		sets := task.EvalSets()
		seen := map[string]bool{}
		for i, s := range sets {
			if s.Name == "" {
				return fmt.Errorf("eval set %d has no name", i)
			}
			if seen[s.Name] {
				return fmt.Errorf("two eval sets are named %q", s.Name)
			}
			seen[s.Name] = true
			for j, p := range s.Problems {
				if p.Prompt == "" {
					return fmt.Errorf("eval set %q: problem %d (%s) has an empty prompt", s.Name, j, p.ID)
				}
			}
		}
		if again := task.EvalSets(); !reflect.DeepEqual(sets, again) {
			return errors.New("EvalSets() returns other problems on a second call (held-out sets must be fixed)")
		}
		return nil
	})
}

// CheckDisjoint checks that no eval prompt is a training prompt.
func CheckDisjoint(task core.Task, opts Options) error {
	if isNil(task) {
		return errors.New("the task is nil")
	}
	o := opts.withDefaults()
	return guard(func() error {
		train := map[string]string{} // prompt -> a training problem's id
		what := "the task's training problems (TrainProblems)"
		if l, ok := task.(core.TrainLister); ok {
			for _, p := range l.TrainProblems() {
				train[p.Prompt] = p.ID
			}
		} else {
			what = fmt.Sprintf("%d training problems drawn with 8 seeds", 8*o.Samples)
		}
		for s := range uint64(8) {
			for _, p := range task.SampleTrain(rng(o.Seed, 10+s), o.Samples) {
				train[p.Prompt] = p.ID
			}
		}
		var overlaps []string
		n := 0
		for _, set := range task.EvalSets() {
			for _, p := range set.Problems {
				if id, ok := train[p.Prompt]; ok {
					n++
					if len(overlaps) < 3 {
						overlaps = append(overlaps, fmt.Sprintf("eval set %q problem %s has the prompt of training problem %s (%q)", set.Name, p.ID, id, short(p.Prompt)))
					}
				}
			}
		}
		if n > 0 {
			return fmt.Errorf("%d eval problems share a prompt with one of %s: %s", n, what, strings.Join(overlaps, "; "))
		}
		return nil
	})
}

// CheckRight checks that right responses score correct.
func CheckRight(task core.Task, opts Options) error {
	if isNil(task) {
		return errors.New("the task is nil")
	}
	o := opts.withDefaults()
	return guard(func() error {
		v := task.Verifier()
		for _, p := range problems(task, o) {
			resp := o.Right(p)
			reward, ok, err := verify(v, p, resp)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("problem %s (answer %q): the right response %q scores incorrect (reward %v)", p.ID, short(p.Answer), short(resp), reward)
			}
			if err := level(v, reward, true); err != nil {
				return fmt.Errorf("problem %s: the right response %q: %w", p.ID, short(resp), err)
			}
		}
		return nil
	})
}

// CheckWrong checks that wrong responses, and other problems' right ones,
// score incorrect.
func CheckWrong(task core.Task, opts Options) error {
	if isNil(task) {
		return errors.New("the task is nil")
	}
	o := opts.withDefaults()
	return guard(func() error {
		v := task.Verifier()
		ps := problems(task, o)
		for _, p := range ps {
			resp := o.Wrong(p)
			if err := incorrect(v, p, resp, "the wrong response"); err != nil {
				return err
			}
		}
		// Each problem with an integer answer against the right response
		// of the next problem whose integer answer differs.
		for i, p := range ps {
			a, ok := integer(p.Answer)
			if !ok {
				continue
			}
			for j := 1; j < len(ps); j++ {
				q := ps[(i+j)%len(ps)]
				if b, ok := integer(q.Answer); ok && a.Cmp(b) != 0 {
					if err := incorrect(v, p, o.Right(q), fmt.Sprintf("the right response to problem %s (answer %s)", q.ID, short(q.Answer))); err != nil {
						return err
					}
					break
				}
			}
		}
		return nil
	})
}

// Missing are responses holding no answer.
var Missing = []string{
	"",
	" ",
	"\n\t \n",
	"I do not know.",
	"Answer:",
	"Answer: ",
	"Answer:\n",
	"Answer:   \nThat is all.",
	`\boxed{}`,
	`The answer is \boxed{ }.`,
	"####",
	"#### \n",
}

// CheckMissing checks responses with no answer.
func CheckMissing(task core.Task, opts Options) error {
	if isNil(task) {
		return errors.New("the task is nil")
	}
	o := opts.withDefaults()
	return guard(func() error {
		v := task.Verifier()
		ps := problems(task, o)
		for _, p := range ps[:min(len(ps), 3)] {
			for _, resp := range Missing {
				if err := incorrect(v, p, resp, "the response without an answer"); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// Malformed returns the malformed responses the kit tries (built on each
// call; some are a quarter of a megabyte long).
func Malformed() []string {
	return []string{
		"\xff\xfe\xfd\x00garbage\x00",
		"Answer: \xff\xfe\xc0\x80",
		"Answer:\x00\x00\x00",
		"Answer: \u202e\u200b\ufeff",
		`\boxed{`,
		`\boxed{\frac{1}{2}`,
		`\boxed{}\boxed{`,
		`}}}}\boxed}{`,
		strings.Repeat(`\boxed{`, 10000),
		strings.Repeat("{", 100000) + "Answer: ",
		`Answer: \boxed{` + strings.Repeat(`\frac{1}{`, 2000) + "3" + strings.Repeat("}", 2000) + "}",
		"Answer: " + strings.Repeat(`\sqrt{`, 5000),
		"Answer: " + strings.Repeat("(", 100000),
		"Answer: " + strings.Repeat("9", 1<<18),
		"Answer: 0." + strings.Repeat("0", 1<<18) + "1",
		strings.Repeat("Answer: x\n", 1<<15),
		"Answer: 1/0",
		"Answer: 0/0",
		"Answer: 1e999999999",
		"Answer: -1e-999999999x",
		"Answer: NaN",
		"Answer: -Inf",
		"Answer: --",
		"Answer: ((1+2)",
		"#### #### ####",
		"\\",
		"$$$$",
	}
}

// CheckMalformed checks garbage responses, and the zero Problem.
func CheckMalformed(task core.Task, opts Options) error {
	if isNil(task) {
		return errors.New("the task is nil")
	}
	o := opts.withDefaults()
	return guard(func() error {
		v := task.Verifier()
		ps := problems(task, o)
		bad := Malformed()
		for _, p := range ps[:min(len(ps), 2)] {
			for _, resp := range bad {
				if err := incorrect(v, p, resp, "the malformed response"); err != nil {
					return err
				}
			}
		}
		var zero core.Problem
		for _, resp := range append([]string{"Answer: 1", `\boxed{1}`, "#### 1"}, Missing...) {
			if _, _, err := verify(v, zero, resp); err != nil {
				return fmt.Errorf("the zero Problem: %w", err)
			}
		}
		return nil
	})
}

// problems are the first Verify problems of a training draw and of each
// eval set.
func problems(task core.Task, o Options) []core.Problem {
	ps := task.SampleTrain(rng(o.Seed, 100), o.Verify)
	ps = ps[:min(len(ps), o.Verify)]
	for _, set := range task.EvalSets() {
		ps = append(ps, set.Problems[:min(len(set.Problems), o.Verify)]...)
	}
	return ps
}

// verify calls Verify twice, turning a panic into an error; the two
// verdicts must agree and the reward be finite.
func verify(v core.Verifier, p core.Problem, resp string) (reward float64, ok bool, err error) {
	err = guard(func() error {
		reward, ok = v.Verify(p, resp)
		r2, ok2 := v.Verify(p, resp)
		if ok2 != ok || math.Float64bits(r2) != math.Float64bits(reward) {
			return fmt.Errorf("Verify gives (%v, %v), then (%v, %v)", reward, ok, r2, ok2)
		}
		return nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("problem %s, response %q: %w", p.ID, short(resp), err)
	}
	if math.IsNaN(reward) || math.IsInf(reward, 0) {
		return reward, ok, fmt.Errorf("problem %s, response %q: reward %v is not finite", p.ID, short(resp), reward)
	}
	return reward, ok, nil
}

// incorrect requires resp to score incorrect for p, at the incorrect level.
func incorrect(v core.Verifier, p core.Problem, resp, what string) error {
	reward, ok, err := verify(v, p, resp)
	if err != nil {
		return err
	}
	if ok {
		return fmt.Errorf("problem %s (answer %q): %s %q scores correct (reward %v)", p.ID, short(p.Answer), what, short(resp), reward)
	}
	if err := level(v, reward, false); err != nil {
		return fmt.Errorf("problem %s: %s %q: %w", p.ID, what, short(resp), err)
	}
	return nil
}

// level checks a reward against a core.RewardLevels verifier's level.
func level(v core.Verifier, reward float64, correct bool) error {
	l, ok := v.(core.RewardLevels)
	if !ok {
		return nil
	}
	inc, cor := l.Rewards()
	want, name := inc, "incorrect"
	if correct {
		want, name = cor, "correct"
	}
	if reward != want {
		return fmt.Errorf("reward %v, but Rewards() says a %s answer gets %v", reward, name, want)
	}
	return nil
}

func rng(seed, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, 0x7a5c7e57+stream))
}

// firstDifferent is the first index where two draws differ, -1 if none.
func firstDifferent(a, b []core.Problem) int {
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) || !reflect.DeepEqual(a[i], b[i]) {
			return i
		}
	}
	return -1
}

// firstDifferentPrompt is the first index where two draws' prompts
// differ, -1 if none.
func firstDifferentPrompt(a, b []core.Problem) int {
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) || a[i].Prompt != b[i].Prompt {
			return i
		}
	}
	return -1
}

// short quotes at most 80 bytes of s.
func short(s string) string {
	if len(s) <= 80 {
		return s
	}
	return fmt.Sprintf("%s... (%d bytes)", s[:60], len(s))
}

func isNil(x any) bool {
	if x == nil {
		return true
	}
	switch v := reflect.ValueOf(x); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return v.IsNil()
	}
	return false
}

// guard runs f, turning a panic into an error carrying the stack.
func guard(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return f()
}
