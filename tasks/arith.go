package tasks

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/cde-rl/cde/core"
)

// Split is the partition a problem belongs to.
type Split int

// Splits. Every arith prompt belongs to exactly one, by SplitOf.
const (
	SplitTrain Split = iota
	SplitVal
	SplitTest
)

func (s Split) String() string {
	switch s {
	case SplitTrain:
		return "train"
	case SplitVal:
		return "val"
	case SplitTest:
		return "test"
	}
	return "Split(" + strconv.Itoa(int(s)) + ")"
}

// SplitOf partitions prompts by FNV-1a 64 of the prompt text mod 10:
// 0 is test, 1 is validation, 2..9 are training. The partition depends only
// on the prompt, so train, validation and test never share a prompt.
func SplitOf(prompt string) Split {
	h := fnv.New64a()
	h.Write([]byte(prompt))
	switch h.Sum64() % 10 {
	case 0:
		return SplitTest
	case 1:
		return SplitVal
	}
	return SplitTrain
}

// Arith levels: level L has L-digit operands.
const (
	MinArithLevel = 1
	MaxArithLevel = 6
)

// ArithEvalSpec describes one arith eval set.
type ArithEvalSpec struct {
	Name  string
	Level int
	Split Split // SplitVal or SplitTest
}

// Arith is the built-in "arith" task: a+b or a-b with L-digit operands
// (level 1: 0..9; level L>1: 10^(L-1)..10^L-1). The prompt is "47+38=", the
// answer "85" and the warm-start solution "Answer: 85". Results may be
// negative ("3-8=" -> "-5").
//
// Config keys (all optional):
//
//	levels            training levels, list of ints in 1..6   default [1, 2]
//	ops               operator characters, from "+-"          default "+-"
//	eval_n            problems per eval set, >= 1             default 128
//	eval_sets         list of {name, level, split}            default
//	                    [{name: l1, level: 1, split: val},
//	                     {name: l2, level: 2, split: val}]
//	                  name is required and unique, level is in 1..6, split is
//	                  val or test (default val)
//	correct_reward    reward of a correct answer              default 1
//	incorrect_reward  reward of a wrong or missing answer     default -1
//	                  (both finite, |r| <= MaxRewardMagnitude)
//
// Training samples are drawn from the train split only; eval sets draw from
// their split only, with a fixed seed independent of the run seed. An eval set
// holds eval_n distinct problems, or all problems of its level and split when
// there are fewer (level 1 has about 20 per split with both ops).
type Arith struct {
	Levels   []int
	Ops      string
	EvalN    int
	Specs    []ArithEvalSpec
	verifier AnswerVerifier
	evals    []core.EvalSet
}

var _ core.Task = (*Arith)(nil)

// DefaultArithEvalSets are the eval sets used when eval_sets is absent: the
// held-out validation problems of the default training levels. An
// out-of-distribution set (longer operands than trained on) is one entry
// away: {name: ood, level: 3}.
var DefaultArithEvalSets = []ArithEvalSpec{
	{Name: "l1", Level: 1, Split: SplitVal},
	{Name: "l2", Level: 2, Split: SplitVal},
}

// NewArith builds the arith task from p (see Arith for the keys). It does
// not call p.Finish; New does.
func NewArith(p *core.Params) (*Arith, error) {
	a := &Arith{}
	a.Levels = readInts(p, "levels", []int{1, 2})
	p.Check(len(a.Levels) > 0, "levels", "must list at least one level")
	for _, l := range a.Levels {
		if l < MinArithLevel || l > MaxArithLevel {
			p.Fail("levels", "level %d out of range %d..%d", l, MinArithLevel, MaxArithLevel)
		}
	}
	a.Ops = p.String("ops", "+-")
	p.Check(a.Ops != "", "ops", "must name at least one operator (from \"+-\")")
	for i, c := range a.Ops {
		if c != '+' && c != '-' {
			p.Fail("ops", "unknown operator %q (known: +, -)", c)
		} else if strings.ContainsRune(a.Ops[:i], c) {
			p.Fail("ops", "operator %q listed twice", c)
		}
	}
	a.EvalN = p.Int("eval_n", 128)
	p.Check(a.EvalN >= 1, "eval_n", "must be >= 1, got %d", a.EvalN)
	a.verifier = readRewards(p)
	var err error
	if a.Specs, err = readLevelSets(p, "eval_sets", MinArithLevel, MaxArithLevel, DefaultArithEvalSets); err != nil {
		return nil, err
	}
	for _, s := range a.Specs {
		a.evals = append(a.evals, core.EvalSet{Name: s.Name, Problems: a.heldOut(s.Level, s.Split, a.EvalN)})
	}
	return a, nil
}

// Name returns "arith".
func (a *Arith) Name() string { return "arith" }

// Tokenizer returns the character tokenizer.
func (a *Arith) Tokenizer() core.Tokenizer { return NewCharTokenizer() }

// Verifier returns the configured AnswerVerifier.
func (a *Arith) Verifier() core.Verifier { return a.verifier }

// EvalSets returns the configured eval sets (built once, deterministic).
func (a *Arith) EvalSets() []core.EvalSet { return a.evals }

// SampleTrain draws n training problems: a level uniformly from Levels, an
// operator uniformly from Ops and operands uniformly, rejecting prompts
// outside the train split. Duplicates are possible.
func (a *Arith) SampleTrain(rng *rand.Rand, n int) []core.Problem {
	out := make([]core.Problem, 0, max(n, 0))
	for len(out) < n {
		level := a.Levels[rng.IntN(len(a.Levels))]
		op := a.Ops[rng.IntN(len(a.Ops))]
		x, y := randOperand(rng, level), randOperand(rng, level)
		if p := ArithProblem(level, x, op, y); SplitOf(p.Prompt) == SplitTrain {
			out = append(out, p)
		}
	}
	return out
}

// TestSet returns up to n distinct test-split problems of the given level
// (deterministic, same fixed seed scheme as the eval sets), or nil when the
// level is outside 1..6 or n < 1.
func (a *Arith) TestSet(level, n int) []core.Problem {
	if level < MinArithLevel || level > MaxArithLevel || n < 1 {
		return nil
	}
	return a.heldOut(level, SplitTest, n)
}

// ArithProblem builds the problem "x op y=" with a worked solution: one
// line per digit from the least significant, carrying or borrowing as on
// paper, then the "Answer: N" line. For example 47+38 gives
//
//	7+8=15
//	4+3+1=8
//	Answer: 85
//
// and 500-123 gives "0-3+10=7", "0-2-1+10=7", "5-1-1=3", "Answer: 377".
// When x < y the first line is "x<y" and the digits of y-x follow. The
// steps give a small model a procedure it can learn imperfectly and RL can
// sharpen.
func ArithProblem(level, x int, op byte, y int) core.Problem {
	prompt := strconv.Itoa(x) + string(op) + strconv.Itoa(y) + "="
	r := x + y
	if op == '-' {
		r = x - y
	}
	ans := strconv.Itoa(r)
	return core.Problem{
		ID:       fmt.Sprintf("arith/L%d/%s", level, strings.TrimSuffix(prompt, "=")),
		Prompt:   prompt,
		Answer:   ans,
		Solution: workedSolution(x, op, y) + AnswerMarker + " " + ans,
		Level:    level,
	}
}

// workedSolution returns the digit lines of x op y, each ending in '\n'.
func workedSolution(x int, op byte, y int) string {
	var b strings.Builder
	if op == '-' && x < y {
		fmt.Fprintf(&b, "%d<%d\n", x, y)
		x, y = y, x
	}
	carry := 0
	for first := true; first || x > 0 || y > 0; first = false {
		dx, dy := x%10, y%10
		x, y = x/10, y/10
		if op == '+' {
			s := dx + dy + carry
			if carry > 0 {
				fmt.Fprintf(&b, "%d+%d+1=%d\n", dx, dy, s)
			} else {
				fmt.Fprintf(&b, "%d+%d=%d\n", dx, dy, s)
			}
			carry = s / 10
			continue
		}
		d := dx - dy - carry
		fmt.Fprintf(&b, "%d-%d", dx, dy)
		if carry > 0 {
			b.WriteString("-1")
		}
		carry = 0
		if d < 0 {
			d += 10
			carry = 1
			b.WriteString("+10")
		}
		fmt.Fprintf(&b, "=%d\n", d)
	}
	return b.String()
}

// operandRange is the inclusive operand range of a level.
func operandRange(level int) (lo, hi int) {
	hi = 1
	for range level {
		hi *= 10
	}
	if level == 1 {
		return 0, 9
	}
	return hi / 10, hi - 1
}

func randOperand(rng *rand.Rand, level int) int {
	lo, hi := operandRange(level)
	return lo + rng.IntN(hi-lo+1)
}

// enumerateLimit bounds the prompt space enumerated exhaustively for held-out
// sets (levels 1 and 2); larger spaces are sampled.
const enumerateLimit = 1 << 16

// heldOut returns up to n distinct problems of level from split, chosen with
// a fixed seed that depends only on (level, split), never on the run seed.
// The result (set and order) depends only on level, split, n and a.Ops.
func (a *Arith) heldOut(level int, split Split, n int) []core.Problem {
	rng := rand.New(rand.NewPCG(0x61726974685f6576, uint64(level)<<8|uint64(split)))
	lo, hi := operandRange(level)
	width := hi - lo + 1
	if width*width*len(a.Ops) <= enumerateLimit {
		var all []core.Problem
		for i := range len(a.Ops) {
			for x := lo; x <= hi; x++ {
				for y := lo; y <= hi; y++ {
					if p := ArithProblem(level, x, a.Ops[i], y); SplitOf(p.Prompt) == split {
						all = append(all, p)
					}
				}
			}
		}
		rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
		return all[:min(n, len(all))]
	}
	// Rejection sampling; the try cap only matters when n approaches the
	// size of the split (about 10% of the space), where fewer are returned.
	seen := map[string]bool{}
	out := make([]core.Problem, 0, n)
	for tries := 0; len(out) < n && tries < 1000*n+10000; tries++ {
		op := a.Ops[rng.IntN(len(a.Ops))]
		x, y := lo+rng.IntN(width), lo+rng.IntN(width)
		p := ArithProblem(level, x, op, y)
		if SplitOf(p.Prompt) != split || seen[p.Prompt] {
			continue
		}
		seen[p.Prompt] = true
		out = append(out, p)
	}
	return out
}
