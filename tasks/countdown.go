package tasks

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/cde-rl/cde/core"
)

// Countdown is the "countdown" task: reach a target from given numbers with
// + - * / and parentheses, each number used at most once (the numbers game
// of the TV show, as in Stream-of-Search and TinyZero). A prompt has many
// valid answers, and finding one is a search: the testbed where exploration
// can matter.
//
// The prompt is "Use 3 7 25 50 for 82\n"; a response ends with
// "Answer: EXPR": "Answer: 7+3*25" and "Answer: 50+25+7" are correct,
// "Answer: 82" is not (82 is not given), nor "Answer: 7+7+25+50-7" (7
// used three times). The verifier (CountdownVerifier) evaluates EXPR exactly,
// over the rationals, and checks that every number it uses is one of the
// given ones, each at most once.
//
// Level L has L numbers drawn uniformly from 1..max_number; the target is the
// value of a random expression over a random subset of at least two of them,
// kept when it is an integer in 1..max_target not among the numbers, so every
// problem has a solution. Warm-start solutions are drawn uniformly from all
// the distinct expressions that reach the target (CountdownSolutions), a new
// draw each time a problem is sampled, so the base policy learns a spread of
// solutions.
//
// Config keys (all optional):
//
//	levels            training levels (numbers per prompt), in 2..6  default [3, 4]
//	max_number        largest given number, in 2..100                default 20
//	max_target        largest target, in 1..10000                    default 100
//	eval_n            problems per eval set, >= 1                    default 300
//	eval_sets         list of {name, level, split}                   default
//	                    [{name: c3, level: 3, split: val},
//	                     {name: c4, level: 4, split: val}]
//	                  split is val or test; an out-of-distribution set is
//	                  {name: ood, level: 5}
//	correct_reward    reward of a correct answer                     default 1
//	incorrect_reward  reward of a wrong or missing answer            default -1
//
// Train, validation and test are split by a hash of the prompt (SplitOf), so
// no prompt is in two of them. Eval sets are drawn with a fixed seed that
// depends on the level and split only.
type Countdown struct {
	Levels    []int
	MaxNumber int
	MaxTarget int
	EvalN     int
	Specs     []ArithEvalSpec
	verifier  CountdownVerifier
	evals     []core.EvalSet
}

var (
	_ core.Task = (*Countdown)(nil)
)

// Countdown bounds.
const (
	MinCountdownLevel = 2
	MaxCountdownLevel = 6
	// MaxCountdownAnswer bounds the answer expression the verifier reads, in
	// bytes (a longer one is wrong), so verification stays cheap.
	MaxCountdownAnswer = 256
)

// DefaultCountdownEvalSets are the eval sets when eval_sets is absent.
var DefaultCountdownEvalSets = []ArithEvalSpec{
	{Name: "c3", Level: 3, Split: SplitVal},
	{Name: "c4", Level: 4, Split: SplitVal},
}

// NewCountdown builds the countdown task from p. It does not call
// p.Finish; New does.
func NewCountdown(p *core.Params) (*Countdown, error) {
	c := &Countdown{}
	c.Levels = readInts(p, "levels", []int{3, 4})
	p.Check(len(c.Levels) > 0, "levels", "must list at least one level")
	for _, l := range c.Levels {
		if l < MinCountdownLevel || l > MaxCountdownLevel {
			p.Fail("levels", "level %d out of range %d..%d", l, MinCountdownLevel, MaxCountdownLevel)
		}
	}
	c.MaxNumber = p.Int("max_number", 20)
	p.Check(c.MaxNumber >= 2 && c.MaxNumber <= 100, "max_number", "must be in 2..100, got %d", c.MaxNumber)
	c.MaxTarget = p.Int("max_target", 100)
	p.Check(c.MaxTarget >= 1 && c.MaxTarget <= 10000, "max_target", "must be in 1..10000, got %d", c.MaxTarget)
	c.EvalN = p.Int("eval_n", 300)
	p.Check(c.EvalN >= 1, "eval_n", "must be >= 1, got %d", c.EvalN)
	rw := readRewards(p)
	c.verifier = CountdownVerifier{CorrectReward: rw.CorrectReward, IncorrectReward: rw.IncorrectReward}
	var err error
	if c.Specs, err = readLevelSets(p, "eval_sets", MinCountdownLevel, MaxCountdownLevel, DefaultCountdownEvalSets); err != nil {
		return nil, err
	}
	for _, s := range c.Specs {
		probs := c.heldOut(s.Level, s.Split, c.EvalN)
		if len(probs) < c.EvalN {
			return nil, fmt.Errorf("config: task.eval_sets: %s: only %d distinct level-%d %s problems with max_number %d, max_target %d (eval_n %d)",
				s.Name, len(probs), s.Level, s.Split, c.MaxNumber, c.MaxTarget, c.EvalN)
		}
		c.evals = append(c.evals, core.EvalSet{Name: s.Name, Problems: probs})
	}
	return c, nil
}

// Name returns "countdown".
func (c *Countdown) Name() string { return "countdown" }

// Tokenizer returns the character tokenizer.
func (c *Countdown) Tokenizer() core.Tokenizer { return NewCharTokenizer() }

// Verifier returns the configured CountdownVerifier.
func (c *Countdown) Verifier() core.Verifier { return c.verifier }

// EvalSets returns the configured eval sets.
func (c *Countdown) EvalSets() []core.EvalSet { return c.evals }

// SampleTrain draws n training problems (level uniform over Levels, then a
// generated problem, rejected unless in the train split), each with a
// warm-start solution drawn uniformly from all its solutions.
func (c *Countdown) SampleTrain(rng *rand.Rand, n int) []core.Problem {
	out := make([]core.Problem, 0, max(n, 0))
	for len(out) < n {
		level := c.Levels[rng.IntN(len(c.Levels))]
		nums, target, ok := c.generate(rng, level)
		if !ok {
			continue
		}
		p := CountdownProblem(level, nums, target)
		if SplitOf(p.Prompt) != SplitTrain {
			continue
		}
		sols := CountdownSolutions(nums, target)
		p.Solution = AnswerMarker + " " + sols[rng.IntN(len(sols))]
		out = append(out, p)
	}
	return out
}

// generate draws level numbers and a reachable target; ok is false when the
// random expression's value is not a usable target.
func (c *Countdown) generate(rng *rand.Rand, level int) (nums []int, target int, ok bool) {
	nums = make([]int, level)
	for i := range nums {
		nums[i] = 1 + rng.IntN(c.MaxNumber)
	}
	slices.Sort(nums)
	// A random subset of at least two, combined in random order with
	// random operators.
	perm := rng.Perm(level)
	k := 2 + rng.IntN(level-1)
	vals := make([]*big.Rat, k)
	for i := range k {
		vals[i] = big.NewRat(int64(nums[perm[i]]), 1)
	}
	for len(vals) > 1 {
		i := rng.IntN(len(vals))
		j := rng.IntN(len(vals) - 1)
		if j >= i {
			j++
		}
		a, b := vals[i], vals[j]
		r := new(big.Rat)
		switch rng.IntN(4) {
		case 0:
			r.Add(a, b)
		case 1:
			r.Sub(a, b)
		case 2:
			r.Mul(a, b)
		default:
			if b.Sign() == 0 {
				return nil, 0, false
			}
			r.Quo(a, b)
		}
		vals[i] = r
		vals = slices.Delete(vals, j, j+1)
	}
	v := vals[0]
	if !v.IsInt() || !v.Num().IsInt64() {
		return nil, 0, false
	}
	t := int(v.Num().Int64())
	if t < 1 || t > c.MaxTarget || slices.Contains(nums, t) {
		return nil, 0, false
	}
	return nums, t, true
}

// CountdownProblem builds the problem for sorted nums and target: prompt
// "Use 3 7 25 50 for 81\n", answer "81".
func CountdownProblem(level int, nums []int, target int) core.Problem {
	parts := make([]string, len(nums))
	for i, n := range nums {
		parts[i] = strconv.Itoa(n)
	}
	prompt := "Use " + strings.Join(parts, " ") + " for " + strconv.Itoa(target) + "\n"
	return core.Problem{
		ID:     fmt.Sprintf("countdown/L%d/%s=%d", level, strings.Join(parts, ","), target),
		Prompt: prompt,
		Answer: strconv.Itoa(target),
		Level:  level,
	}
}

// ParseCountdownPrompt reads the numbers and target of a countdown prompt.
func ParseCountdownPrompt(prompt string) (nums []int, target int, err error) {
	s, ok := strings.CutPrefix(strings.TrimSuffix(prompt, "\n"), "Use ")
	if !ok {
		return nil, 0, errors.New(`countdown prompt does not start with "Use "`)
	}
	list, tgt, ok := strings.Cut(s, " for ")
	if !ok {
		return nil, 0, errors.New(`countdown prompt has no " for "`)
	}
	for f := range strings.FieldsSeq(list) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, 0, fmt.Errorf("countdown prompt: bad number %q", f)
		}
		nums = append(nums, n)
	}
	if target, err = strconv.Atoi(tgt); err != nil || len(nums) == 0 {
		return nil, 0, fmt.Errorf("countdown prompt: bad target %q", tgt)
	}
	return nums, target, nil
}

// heldOut returns up to n distinct problems of level from split, drawn with
// a fixed seed that depends only on (level, split) and the task's ranges.
func (c *Countdown) heldOut(level int, split Split, n int) []core.Problem {
	rng := rand.New(rand.NewPCG(0x636f756e74646f77, uint64(level)<<8|uint64(split)))
	seen := map[string]bool{}
	out := make([]core.Problem, 0, n)
	for tries := 0; len(out) < n && tries < 2000*n+10000; tries++ {
		nums, target, ok := c.generate(rng, level)
		if !ok {
			continue
		}
		p := CountdownProblem(level, nums, target)
		if SplitOf(p.Prompt) != split || seen[p.Prompt] {
			continue
		}
		seen[p.Prompt] = true
		out = append(out, p)
	}
	return out
}

// CountdownVerifier checks a countdown answer: the expression after the last
// "Answer:" (CountdownExpr) reaches the target, using given numbers only,
// each at most once.
type CountdownVerifier struct {
	CorrectReward, IncorrectReward float64
}

var _ core.Verifier = CountdownVerifier{}

// Verify implements core.Verifier; the numbers and target come from the
// problem's prompt.
func (v CountdownVerifier) Verify(p core.Problem, response string) (float64, bool) {
	nums, target, err := ParseCountdownPrompt(p.Prompt)
	if err != nil {
		return v.IncorrectReward, false
	}
	expr, ok := ExtractAnswer(response)
	if !ok {
		return v.IncorrectReward, false
	}
	val, used, err := CountdownExpr(expr)
	if err != nil || !val.IsInt() || val.Cmp(big.NewRat(int64(target), 1)) != 0 || !subMultiset(used, nums) {
		return v.IncorrectReward, false
	}
	return v.CorrectReward, true
}

// subMultiset reports whether every element of a is in b, as often.
func subMultiset(a, b []int) bool {
	count := map[int]int{}
	for _, x := range b {
		count[x]++
	}
	for _, x := range a {
		if count[x]--; count[x] < 0 {
			return false
		}
	}
	return true
}

// CountdownExpr evaluates an arithmetic expression exactly: non-negative
// integers, + - * / (left associative, * / before + -), parentheses, spaces.
// It returns the value and the integers used, in order. A unary sign, a
// division by zero, an empty or unbalanced expression, a number over 9
// digits or an expression over MaxCountdownAnswer bytes is an error.
func CountdownExpr(s string) (*big.Rat, []int, error) {
	if len(s) > MaxCountdownAnswer {
		return nil, nil, fmt.Errorf("expression of %d bytes, over %d", len(s), MaxCountdownAnswer)
	}
	p := exprParser{s: s}
	v, err := p.sum(0)
	if err != nil {
		return nil, nil, err
	}
	p.space()
	if p.i != len(p.s) {
		return nil, nil, fmt.Errorf("unexpected %q at byte %d", p.s[p.i], p.i)
	}
	return v, p.used, nil
}

type exprParser struct {
	s    string
	i    int
	used []int
}

// maxExprDepth bounds parenthesis nesting.
const maxExprDepth = 64

func (p *exprParser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *exprParser) sum(depth int) (*big.Rat, error) {
	v, err := p.product(depth)
	if err != nil {
		return nil, err
	}
	for {
		p.space()
		if p.i >= len(p.s) || (p.s[p.i] != '+' && p.s[p.i] != '-') {
			return v, nil
		}
		op := p.s[p.i]
		p.i++
		w, err := p.product(depth)
		if err != nil {
			return nil, err
		}
		if op == '+' {
			v = new(big.Rat).Add(v, w)
		} else {
			v = new(big.Rat).Sub(v, w)
		}
	}
}

func (p *exprParser) product(depth int) (*big.Rat, error) {
	v, err := p.atom(depth)
	if err != nil {
		return nil, err
	}
	for {
		p.space()
		if p.i >= len(p.s) || (p.s[p.i] != '*' && p.s[p.i] != '/') {
			return v, nil
		}
		op := p.s[p.i]
		p.i++
		w, err := p.atom(depth)
		if err != nil {
			return nil, err
		}
		if op == '*' {
			v = new(big.Rat).Mul(v, w)
		} else {
			if w.Sign() == 0 {
				return nil, errors.New("division by zero")
			}
			v = new(big.Rat).Quo(v, w)
		}
	}
}

func (p *exprParser) atom(depth int) (*big.Rat, error) {
	p.space()
	if p.i >= len(p.s) {
		return nil, errors.New("expression ends early")
	}
	if p.s[p.i] == '(' {
		if depth >= maxExprDepth {
			return nil, errors.New("parentheses nested too deeply")
		}
		p.i++
		v, err := p.sum(depth + 1)
		if err != nil {
			return nil, err
		}
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != ')' {
			return nil, errors.New("missing )")
		}
		p.i++
		return v, nil
	}
	start := p.i
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	if p.i == start {
		return nil, fmt.Errorf("want a number or (, got %q at byte %d", p.s[p.i], p.i)
	}
	if p.i-start > 9 {
		return nil, errors.New("number over 9 digits")
	}
	n, _ := strconv.Atoi(p.s[start:p.i])
	p.used = append(p.used, n)
	return big.NewRat(int64(n), 1), nil
}

// cdNode is an expression tree reached by the search: a number (leaf) or
// l op r. val is its value in float64 (the search's fast path; solutions are
// then checked exactly); prec is the precedence of its outermost operator
// (3 for a number, 2 for * /, 1 for + -).
type cdNode struct {
	val  float64
	prec int
	op   byte
	num  int
	l, r *cdNode
}

// String renders the tree with minimal parentheses: the left operand is
// parenthesised when it binds looser than the operator, the right one also
// when it binds equally under a non-associative - or /.
func (n *cdNode) String() string {
	if n.l == nil {
		return strconv.Itoa(n.num)
	}
	left, right := n.l.String(), n.r.String()
	if n.l.prec < n.prec {
		left = "(" + left + ")"
	}
	if n.r.prec < n.prec || (n.r.prec == n.prec && (n.op == '-' || n.op == '/')) {
		right = "(" + right + ")"
	}
	return left + string(n.op) + right
}

// maxSolCache bounds the solution cache (entries); it is emptied when full.
const maxSolCache = 1 << 16

var (
	solMu    sync.Mutex
	solCache = map[string][]string{}
)

// CountdownSolutions returns every distinct expression (minimal
// parentheses, + and * in one operand order) over a subset of nums, each
// used at most once, whose exact value is target, sorted. Results are
// cached per (nums, target). The search visits about 3 x 10^3 trees for 4
// numbers and 2 x 10^5 for 5.
func CountdownSolutions(nums []int, target int) []string {
	key := fmt.Sprint(nums, target)
	solMu.Lock()
	if s, ok := solCache[key]; ok {
		solMu.Unlock()
		return s
	}
	solMu.Unlock()
	items := make([]*cdNode, len(nums))
	for i, n := range nums {
		items[i] = &cdNode{val: float64(n), prec: 3, num: n}
	}
	found := map[string]bool{}
	want := float64(target)
	for _, n := range nums {
		if n == target {
			found[strconv.Itoa(n)] = true
		}
	}
	var search func(items []*cdNode)
	search = func(items []*cdNode) {
		for i := range items {
			for j := range items {
				if i == j {
					continue
				}
				a, b := items[i], items[j]
				var rest []*cdNode
				for k := range items {
					if k != i && k != j {
						rest = append(rest, items[k])
					}
				}
				for _, op := range []byte{'+', '-', '*', '/'} {
					if (op == '+' || op == '*') && i > j {
						continue // commutative: one order is enough
					}
					n := &cdNode{op: op, l: a, r: b, prec: 1}
					switch op {
					case '+':
						n.val = a.val + b.val
					case '-':
						n.val = a.val - b.val
					case '*':
						n.val, n.prec = a.val*b.val, 2
					case '/':
						if b.val == 0 {
							continue
						}
						n.val, n.prec = a.val/b.val, 2
					}
					if math.Abs(n.val-want) < 1e-6 {
						found[n.String()] = true
					}
					if len(rest) > 0 {
						search(append(rest, n))
					}
				}
			}
		}
	}
	search(items)
	out := make([]string, 0, len(found))
	for e := range found {
		// Exact check: float64 only proposes.
		if v, _, err := CountdownExpr(e); err == nil && v.Cmp(big.NewRat(int64(target), 1)) == 0 {
			out = append(out, e)
		}
	}
	slices.Sort(out)
	solMu.Lock()
	if len(solCache) >= maxSolCache {
		clear(solCache)
	}
	solCache[key] = out
	solMu.Unlock()
	return out
}

// Rewards returns the rewards of an incorrect and a correct answer
// (core.RewardLevels).
func (v CountdownVerifier) Rewards() (incorrect, correct float64) {
	return v.IncorrectReward, v.CorrectReward
}

// AnswerKey is the exact value of the response's expression, as a
// fraction or integer ("" when it has none or it does not parse):
// core.AnswerKeyer, so maj@k votes on the number reached. The vote is
// right when the first response with the winning value is correct (a
// response reaching the target with numbers it was not given is not).
func (v CountdownVerifier) AnswerKey(_ core.Problem, response string) string {
	expr, ok := ExtractAnswer(response)
	if !ok {
		return ""
	}
	val, _, err := CountdownExpr(expr)
	if err != nil {
		return ""
	}
	return val.RatString()
}
