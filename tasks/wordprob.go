package tasks

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/cde-rl/cde/core"
)

// WordProb is the "wordprob" task: multi-step arithmetic word problems
// generated from templates, solved with a short chain of thought that ends
// in \boxed{N} and judged by the math verifier (WordProbVerifier is
// MathVerifier plus a solution key). It is the second exploration testbed
// beside countdown: every answer is one integer, but most problems can be
// worked along several distinct paths (orders and groupings of a sum,
// factoring or distributing a product), which the warm start sees a spread
// of and which SolutionKey tells apart for distinct@k and rare_correct.
//
// A prompt is the question, a newline, the instruction and a newline:
//
//	Ned buys 3 mugs at $4 each. Ned pays with $20. How much change does Ned get?
//	Think step by step; end with \boxed{answer}.
//
// and a worked solution is one line "a op b=c" per step, then the box:
//
//	3*4=12
//	20-12=8
//	\boxed{8}
//
// Problem types (WordProbTypes), each with levels 1..4 whose story-order
// solution has level+1 steps, operands growing with the level; every
// intermediate is a non-negative integer:
//
//	shop       items at a price each (and one single item), paid with a bill: the change
//	rate       a rate over several time spans: the total (factored or distributed)
//	share      parts (some in bags of b) shared equally: each one's share (exact by construction)
//	age        a chain of "n years older/younger", then "in y years"/"y years ago"
//	giveaway   has, buys (packs of), gives away (to each of), loses: what is left
//	unitprice  n items cost $t: the cost of k, the change, the saving at the cheaper shop, a two-item bill
//
// Config keys (all optional):
//
//	train_max_level   training levels are 1..train_max_level, in 1..4    default 2
//	types             problem types, a list or a comma-separated string  default all six
//	eval_n            problems in "eval" (the training levels), >= 1     default 240
//	eval_hard_n       problems in "eval_hard" (the levels above          default 240
//	                  train_max_level); 0 leaves the set out
//	eval_seed         draws other (equally stable) eval sets             default 0
//	solution_path     random | fixed | canonical (below)                 default random
//	instruction       the line after the question ("" for none)          default WordProbInstruction
//	correct_reward    reward of a correct answer                         default 1
//	incorrect_reward  reward of a wrong or missing answer                default -1
//	tokenizer         "char" or a model directory holding tokenizer.json default char
//	                  (tokenizer_config.json), as the math task's
//	chat_template     auto | chatml | qwen3 | llama3 | none              default auto
//	enable_thinking   Qwen3's thinking switch (qwen3 only)               default false
//	eos_token         token that ends a response (text)                  default the tokenizer's
//
// The last four are the math task's keys, read the same way (mathTokenizer):
// chat_template auto is none with the character tokenizer, else detected
// from the model directory's tokenizer_config.json. With a template other
// than none, a prompt is the template's rendering of one user message, the
// question, a newline and the instruction (no newline after it), followed
// by the generation prompt (with qwen3 and enable_thinking false, Qwen3's
// empty thinking block); with none it is the plain text above. Problem IDs,
// answers, solutions and eval sets do not depend on these keys.
//
// Eval sets are drawn from PCG streams seeded by WordProbVersion, eval_seed,
// the set's name, the level and the type (never the run seed), round-robin
// over (level, type) so each pair gets an equal share, without repeating a
// canonical problem (type, level and numbers: the names and items of a
// prompt are a function of them). SampleTrain draws a level uniformly from
// 1..train_max_level, a type uniformly from types, then the numbers, and
// rejects any canonical problem of an eval set, so training never sees an
// eval problem.
//
// Solution paths. A problem's paths are every choice of a way to compute
// each term (unitprice: t/n*k, t*k/n, or k/n*t when n divides k), every
// order and grouping of its sum whose intermediates are positive integers
// (a gain and a loss may net first: "5 older, then 8 younger" is "3
// younger"), then the outer step, plus, for rate and unitprice level 3, the
// distributed form (r*h1+r*h2 for r*(h1+h2)) and, for share when every part
// divides, dividing each part first. Two paths are distinct when the
// sorted results of their steps differ (WordProbVerifier.SolutionKey). Per
// problem, on average (tasks tests): shop 1, 3, 3, 14 paths at levels 1..4
// (level 1 has one); rate 2, 5, 22, 140; share 1.4, 3, 3, 3.5; age 3, 11,
// 85, 690; giveaway 3, 3, 3, 14; unitprice 2, 2, 5, 5. A training
// problem's warm-start solution is, by solution_path: random, a path drawn
// anew at each draw (wpBuilt.randomPath: factored or distributed, a way per
// term, then a uniformly drawn pair at each step of the sum; it can draw
// every path, not uniformly); fixed, one such path per problem, drawn with
// a seed hashed from the problem; canonical, the story-order path, whose
// steps number level+1. Eval problems carry the story-order solution.
type WordProb struct {
	TrainMaxLevel int
	Types         []string
	EvalN         int
	EvalHardN     int
	EvalSeed      int
	SolutionPath  string
	Instruction   string
	tok           core.Tokenizer
	template      ChatTemplate
	verifier      WordProbVerifier
	evals         []core.EvalSet
	evalKeys      map[string]bool
}

var _ core.Task = (*WordProb)(nil)

// WordProbVersion names the generator: the templates, vocabularies, number
// ranges and eval-set seeds. Problems, IDs and eval sets are stable for a
// version across runs and machines; any change to what the generator
// produces must bump it (IDs start with it).
const WordProbVersion = "wordprob-v1"

// WordProbInstruction is the default instruction line.
const WordProbInstruction = `Think step by step; end with \boxed{answer}.`

// WordProb bounds.
const (
	MinWordProbLevel = 1
	MaxWordProbLevel = 4
	// MaxWordProbEvalN bounds eval_n and eval_hard_n.
	MaxWordProbEvalN = 100000
)

// Solution paths (the solution_path key).
const (
	WordProbPathRandom    = "random"
	WordProbPathFixed     = "fixed"
	WordProbPathCanonical = "canonical"
)

// WordProbTypes are the problem types, in their fixed order (types is
// normalised to it, so the order a config lists them in does not matter).
var WordProbTypes = []string{"shop", "rate", "share", "age", "giveaway", "unitprice"}

// NewWordProb builds the wordprob task from p. It does not call p.Finish;
// New does.
func NewWordProb(p *core.Params) (*WordProb, error) {
	w := &WordProb{}
	w.TrainMaxLevel = p.Int("train_max_level", 2)
	p.Check(w.TrainMaxLevel >= MinWordProbLevel && w.TrainMaxLevel <= MaxWordProbLevel, "train_max_level",
		"must be in %d..%d, got %d", MinWordProbLevel, MaxWordProbLevel, w.TrainMaxLevel)
	w.Types = readWordProbTypes(p)
	w.EvalN = p.Int("eval_n", 240)
	p.Check(w.EvalN >= 1 && w.EvalN <= MaxWordProbEvalN, "eval_n", "must be in 1..%d, got %d", MaxWordProbEvalN, w.EvalN)
	w.EvalHardN = p.Int("eval_hard_n", 240)
	p.Check(w.EvalHardN >= 0 && w.EvalHardN <= MaxWordProbEvalN, "eval_hard_n",
		"must be in 0..%d (0 leaves eval_hard out), got %d", MaxWordProbEvalN, w.EvalHardN)
	if w.EvalHardN > 0 && w.TrainMaxLevel == MaxWordProbLevel {
		p.Fail("eval_hard_n", "train_max_level %d leaves no harder level for eval_hard; set eval_hard_n: 0", w.TrainMaxLevel)
	}
	w.EvalSeed = p.Int("eval_seed", 0)
	w.SolutionPath = p.OneOf("solution_path", WordProbPathRandom, WordProbPathRandom, WordProbPathFixed, WordProbPathCanonical)
	w.Instruction = p.String("instruction", WordProbInstruction)
	p.Check(len(w.Instruction) <= 1024 && !strings.ContainsAny(w.Instruction, "\r\n"), "instruction",
		"must be one line of at most 1024 bytes")
	rw := readRewards(p)
	w.verifier = WordProbVerifier{MathVerifier{CorrectReward: rw.CorrectReward, IncorrectReward: rw.IncorrectReward}}
	tokName := p.String("tokenizer", "char")
	p.Check(tokName != "", "tokenizer", `want "char" or a model directory`)
	tplName := p.String("chat_template", "auto")
	thinking := p.Bool("enable_thinking", false)
	eosText := p.String("eos_token", "")
	if err := p.Err(); err != nil {
		return nil, err
	}
	var err error
	if w.tok, w.template, err = mathTokenizer(p, tokName, tplName, eosText, thinking); err != nil {
		return nil, err
	}
	w.evalKeys = map[string]bool{}
	sets := []struct {
		name, key string
		lo, hi    int
		n         int
	}{
		{"eval", "eval_n", MinWordProbLevel, w.TrainMaxLevel, w.EvalN},
		{"eval_hard", "eval_hard_n", w.TrainMaxLevel + 1, MaxWordProbLevel, w.EvalHardN},
	}
	for _, s := range sets {
		if s.n == 0 {
			continue
		}
		probs, err := w.heldOut(s.name, s.lo, s.hi, s.n)
		if err != nil {
			return nil, fmt.Errorf("config: %s: %w", keyPath(p, s.key), err)
		}
		w.evals = append(w.evals, core.EvalSet{Name: s.name, Problems: probs})
	}
	// Training must have room: were the eval set to hold most of a
	// (level, type)'s problems, SampleTrain would reject most draws (all
	// of them, and never return, were it to hold every one).
	rng := rand.New(rand.NewPCG(wpHash(WordProbVersion+"/room"), 0))
	for level := MinWordProbLevel; level <= w.TrainMaxLevel; level++ {
		for _, typ := range w.Types {
			in, draws := 0, 0
			for draws < 200 {
				if s, _, ok := wpGenerate(rng, typ, level); ok {
					draws++
					if w.evalKeys[s.key()] {
						in++
					}
				}
			}
			if 2*in > draws {
				return nil, fmt.Errorf("config: %s: eval holds %d of %d level-%d %s problems drawn for training; lower it",
					keyPath(p, "eval_n"), in, draws, level, typ)
			}
		}
	}
	return w, nil
}

// readWordProbTypes reads types: a list of names or a comma-separated
// string, each a known type, none twice; all of WordProbTypes when absent.
// The result is in WordProbTypes order.
func readWordProbTypes(p *core.Params) []string {
	v, ok := p.Raw("types")
	if !ok {
		return slices.Clone(WordProbTypes)
	}
	var names []string
	switch x := v.(type) {
	case string:
		for f := range strings.SplitSeq(x, ",") {
			names = append(names, strings.TrimSpace(f))
		}
	case []string:
		names = x
	case []any:
		for i, it := range x {
			s, isStr := it.(string)
			if !isStr {
				p.Fail("types", "item %d: want a type name, got %s", i, core.DescribeValue(it))
				return slices.Clone(WordProbTypes)
			}
			names = append(names, strings.TrimSpace(s))
		}
	default:
		p.Fail("types", "want a list of type names or a comma-separated string, got %s", core.DescribeValue(v))
		return slices.Clone(WordProbTypes)
	}
	seen := map[string]bool{}
	for _, n := range names {
		switch {
		case !slices.Contains(WordProbTypes, n):
			p.Fail("types", "unknown type %q (known: %s)", n, strings.Join(WordProbTypes, ", "))
		case seen[n]:
			p.Fail("types", "type %q listed twice", n)
		}
		seen[n] = true
	}
	var out []string
	for _, t := range WordProbTypes {
		if seen[t] {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		p.Fail("types", "must name at least one type (known: %s)", strings.Join(WordProbTypes, ", "))
		return slices.Clone(WordProbTypes)
	}
	return out
}

// Name returns "wordprob".
func (w *WordProb) Name() string { return "wordprob" }

// Tokenizer returns the configured tokenizer (the character tokenizer by
// default, and for a WordProb not made by NewWordProb).
func (w *WordProb) Tokenizer() core.Tokenizer {
	if w.tok == nil {
		return NewCharTokenizer()
	}
	return w.tok
}

// ChatTemplate returns the template the prompts are rendered with.
func (w *WordProb) ChatTemplate() ChatTemplate { return w.template }

// Verifier returns the configured WordProbVerifier.
func (w *WordProb) Verifier() core.Verifier { return w.verifier }

// EvalSets returns "eval" and, unless eval_hard_n is 0, "eval_hard".
func (w *WordProb) EvalSets() []core.EvalSet { return w.evals }

// SampleTrain draws n training problems: a level uniform over
// 1..TrainMaxLevel, a type uniform over Types, then the numbers; a problem
// of an eval set is rejected. Duplicates are possible.
func (w *WordProb) SampleTrain(rng *rand.Rand, n int) []core.Problem {
	out := make([]core.Problem, 0, max(n, 0))
	for len(out) < n {
		level := MinWordProbLevel + rng.IntN(w.TrainMaxLevel)
		typ := w.Types[rng.IntN(len(w.Types))]
		s, b, ok := wpGenerate(rng, typ, level)
		if !ok || w.evalKeys[s.key()] {
			continue
		}
		var steps []wpStep
		switch w.SolutionPath {
		case WordProbPathCanonical:
			steps = b.canonical()
		case WordProbPathFixed:
			steps = b.randomPath(rand.New(rand.NewPCG(wpHash(s.key()), 0x7061746866697865)))
		default:
			steps = b.randomPath(rng)
		}
		out = append(out, w.problem(s, b, steps))
	}
	return out
}

// heldOut draws the eval set name: n distinct problems, round-robin over
// (level, type) for levels lo..hi, each pair from its own stream seeded by
// the version, EvalSeed, name, level and type.
func (w *WordProb) heldOut(name string, lo, hi, n int) ([]core.Problem, error) {
	type stream struct {
		typ   string
		level int
		rng   *rand.Rand
		seen  map[string]bool
	}
	var streams []*stream
	for level := lo; level <= hi; level++ {
		for _, typ := range w.Types {
			seed := wpHash(fmt.Sprintf("%s/%s/L%d/%s", WordProbVersion, name, level, typ))
			streams = append(streams, &stream{typ: typ, level: level,
				rng: rand.New(rand.NewPCG(seed, uint64(w.EvalSeed))), seen: map[string]bool{}})
		}
	}
	out := make([]core.Problem, 0, n)
	for i := range n {
		st := streams[i%len(streams)]
		found := false
		for tries := 0; tries < 10000; tries++ {
			s, b, ok := wpGenerate(st.rng, st.typ, st.level)
			if !ok || st.seen[s.key()] {
				continue
			}
			st.seen[s.key()] = true
			w.evalKeys[s.key()] = true
			out = append(out, w.problem(s, b, b.canonical()))
			found = true
			break
		}
		if !found {
			return nil, fmt.Errorf("%s: could not draw %d distinct %s problems of level %d (%d problems asked for)",
				name, len(st.seen)+1, st.typ, st.level, n)
		}
	}
	return out, nil
}

// problem renders s (built as b) with the solution steps.
func (w *WordProb) problem(s wpSpec, b wpBuilt, steps []wpStep) core.Problem {
	prompt := b.question + "\n"
	if w.Instruction != "" {
		prompt += w.Instruction + "\n"
	}
	if w.template.Name != "" && w.template.Name != ChatNone {
		prompt = w.template.Render([]Message{{Role: "user", Content: strings.TrimSuffix(prompt, "\n")}})
	}
	return core.Problem{
		ID:       WordProbVersion + "/" + s.key(),
		Prompt:   prompt,
		Answer:   strconv.Itoa(b.answer),
		Solution: wpRender(steps, b.answer),
		Level:    s.Level,
	}
}

// WordProbVerifier is the math verifier (the last \boxed{} against the
// answer) with a solution key: core.SolutionKeyer, so distinct@k counts
// distinct solution paths and rare_correct can cluster by them.
type WordProbVerifier struct {
	MathVerifier
}

var (
	_ core.Verifier      = WordProbVerifier{}
	_ core.SolutionKeyer = WordProbVerifier{}
)

// wpStepLine matches a step "a op b = c" (op one of + - * / x).
var wpStepLine = regexp.MustCompile(`(\d{1,9})[ \t]*([-+*/x])[ \t]*(\d{1,9})[ \t]*=[ \t]*(\d{1,9})`)

// SolutionKey names a correct response's solution path: the sorted results
// of its arithmetically right steps "a op b = c", joined by commas (so
// 12+7=19, 50-19=31 and 50-12=38, 38-7=31 are two paths, and the order of
// independent steps or of a sum's operands does not matter); "direct" for a
// correct response with no such step; "" for an incorrect one.
func (v WordProbVerifier) SolutionKey(p core.Problem, response string) string {
	if _, ok := v.Verify(p, response); !ok {
		return ""
	}
	return wpResponseKey(response)
}

// wpResponseKey is the solution key of a response (correct or not).
func wpResponseKey(response string) string {
	var results []int
	for _, m := range wpStepLine.FindAllStringSubmatch(response, -1) {
		a, _ := strconv.Atoi(m[1])
		b, _ := strconv.Atoi(m[3])
		c, _ := strconv.Atoi(m[4])
		if r, ok := wpApply(a, m[2][0], b); ok && r == c {
			results = append(results, c)
		}
	}
	if len(results) == 0 {
		return "direct"
	}
	return wpResultsKey(results)
}

// wpApply computes a op b over the non-negative integers: ok is false for a
// negative difference or an inexact or zero division.
func wpApply(a int, op byte, b int) (int, bool) {
	switch op {
	case '+':
		return a + b, true
	case '-':
		return a - b, a >= b
	case '*', 'x':
		return a * b, true
	case '/':
		if b == 0 || a%b != 0 {
			return 0, false
		}
		return a / b, true
	}
	return 0, false
}

func wpResultsKey(results []int) string {
	results = slices.Clone(results)
	slices.Sort(results)
	parts := make([]string, len(results))
	for i, r := range results {
		parts[i] = strconv.Itoa(r)
	}
	return strings.Join(parts, ",")
}

// wpHash is FNV-1a 64 of s.
func wpHash(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// wpStep is one solution line "A op B=C".
type wpStep struct {
	A  int
	Op byte
	B  int
	C  int
}

func (s wpStep) String() string {
	return strconv.Itoa(s.A) + string(s.Op) + strconv.Itoa(s.B) + "=" + strconv.Itoa(s.C)
}

// wpRender is the solution text: one line per step, then \boxed{answer}.
func wpRender(steps []wpStep, answer int) string {
	var b strings.Builder
	for _, s := range steps {
		b.WriteString(s.String())
		b.WriteByte('\n')
	}
	b.WriteString(`\boxed{` + strconv.Itoa(answer) + "}")
	return b.String()
}

// wpSpec is a canonical problem: its type, level and numbers. Everything
// else (names, items, wording) is a function of it.
type wpSpec struct {
	Type  string
	Level int
	N     []int
}

// key is "type/Llevel/n1,n2,...".
func (s wpSpec) key() string {
	parts := make([]string, len(s.N))
	for i, n := range s.N {
		parts[i] = strconv.Itoa(n)
	}
	return s.Type + "/L" + strconv.Itoa(s.Level) + "/" + strings.Join(parts, ",")
}

// wpTerm is one signed term of a problem's sum.
type wpTerm struct {
	sign int // +1 or -1
	val  int // > 0
	// alts are the ways to compute val (one empty way when val is given);
	// the first is the story order's.
	alts [][]wpStep
	// scaled are the ways to compute val*outerArg directly, for a
	// distributed outer '*'; nil: each alt then "val*c".
	scaled [][]wpStep
}

// wpBuilt is a problem's question, answer and computation plan: the signed
// terms summed, then an optional outer operation on the sum ('*' or '/' by
// outerArg).
type wpBuilt struct {
	question string
	answer   int
	terms    []wpTerm
	outer    byte
	outerArg int
}

// canonical is the story-order path: each term by its first way, the terms
// summed left to right, then the outer operation.
func (b wpBuilt) canonical() []wpStep {
	var steps []wpStep
	for _, t := range b.terms {
		steps = append(steps, t.alts[0]...)
	}
	acc := b.terms[0].val
	for _, t := range b.terms[1:] {
		if t.sign > 0 {
			steps = append(steps, wpStep{acc, '+', t.val, acc + t.val})
			acc += t.val
		} else {
			steps = append(steps, wpStep{acc, '-', t.val, acc - t.val})
			acc -= t.val
		}
	}
	if b.outer != 0 {
		steps = append(steps, wpOuter(acc, b.outer, b.outerArg))
	}
	return steps
}

// randomPath draws a solution path with rng: with an outer '*', factored
// or distributed (each term times the factor, then summed), and with an
// outer '/' whose every term divides, dividing the sum or each term first,
// each with probability 1/2; then a way to compute each term, uniformly;
// then the sum two at a time, each step combining a uniformly drawn pair
// of the values left (wpCombine) that does not make an intermediate 0.
// Every path it draws is a correct solution, and every path of
// wpBuilt.paths (the enumeration in the tests) can be drawn.
func (b wpBuilt) randomPath(rng *rand.Rand) []wpStep {
	c := b.outerArg
	scale := func(v int) int { return v }
	var steps []wpStep
	distribute := false
	switch b.outer {
	case '*':
		distribute = rng.IntN(2) == 1
		if distribute {
			scale = func(v int) int { return v * c }
		}
	case '/':
		divisible := true
		for _, t := range b.terms {
			divisible = divisible && t.val%c == 0
		}
		distribute = divisible && rng.IntN(2) == 1
		if distribute {
			scale = func(v int) int { return v / c }
		}
	}
	vals := make([]int, len(b.terms))
	for i, t := range b.terms {
		vals[i] = t.sign * scale(t.val)
		switch {
		case !distribute:
			steps = append(steps, t.alts[rng.IntN(len(t.alts))]...)
		case b.outer == '*' && t.scaled != nil:
			steps = append(steps, t.scaled[rng.IntN(len(t.scaled))]...)
		default:
			steps = append(steps, t.alts[rng.IntN(len(t.alts))]...)
			steps = append(steps, wpStep{t.val, b.outer, c, scale(t.val)})
		}
	}
	for len(vals) > 1 {
		type pair struct{ i, j int }
		var ok []pair
		for i := range vals {
			for j := i + 1; j < len(vals); j++ {
				if vals[i]+vals[j] != 0 || len(vals) == 2 {
					ok = append(ok, pair{i, j})
				}
			}
		}
		pr := ok[rng.IntN(len(ok))]
		st, r := wpCombine(vals[pr.i], vals[pr.j])
		steps = append(steps, st)
		rest := make([]int, 0, len(vals)-1)
		for k, v := range vals {
			if k != pr.i && k != pr.j {
				rest = append(rest, v)
			}
		}
		vals = append(rest, r)
	}
	if !distribute && b.outer != 0 {
		steps = append(steps, wpOuter(vals[0], b.outer, c))
	}
	return steps
}

// wpOuter is the step "sum op c" for op '*' or '/'.
func wpOuter(sum int, op byte, c int) wpStep {
	if op == '*' {
		return wpStep{sum, '*', c, sum * c}
	}
	return wpStep{sum, '/', c, sum / c}
}

// wpCombine adds two signed values of a sum (gains positive, losses
// negative) as one step over non-negative numbers: two gains add, two
// losses add into a larger loss, a gain and a loss subtract the smaller
// from the larger. r is the signed result.
func wpCombine(a, b int) (st wpStep, r int) {
	r = a + b
	switch {
	case a >= 0 && b >= 0:
		return wpStep{a, '+', b, r}, r
	case a < 0 && b < 0:
		return wpStep{-a, '+', -b, -r}, r
	}
	p, n := max(a, b), -min(a, b)
	if p >= n {
		return wpStep{p, '-', n, p - n}, r
	}
	return wpStep{n, '-', p, n - p}, r
}

// given is a term whose value is a number of the question.
func wpGiven(sign, v int) wpTerm { return wpTerm{sign: sign, val: v, alts: [][]wpStep{nil}} }

// product is a term a*b.
func wpProduct(sign, a, b int) wpTerm {
	return wpTerm{sign: sign, val: a * b, alts: [][]wpStep{{{a, '*', b, a * b}}}}
}

// unitCost is the term "n items cost t; k of them cost?": t/n then *k, or
// t*k then /n, or (when n divides k) k/n then *t.
func wpUnitCost(sign, n, t, k int) wpTerm {
	u := t / n
	alts := [][]wpStep{
		{{t, '/', n, u}, {u, '*', k, u * k}},
		{{t, '*', k, t * k}, {t * k, '/', n, u * k}},
	}
	if k%n == 0 {
		alts = append(alts, []wpStep{{k, '/', n, k / n}, {k / n, '*', t, u * k}})
	}
	return wpTerm{sign: sign, val: u * k, alts: alts}
}

// Vocabularies. Changing any of them changes the prompts: bump
// WordProbVersion.
var (
	wpNames = []string{"Ann", "Ben", "Cal", "Dan", "Eve", "Fay", "Gus", "Hal", "Ivy", "Jon",
		"Kim", "Liv", "Max", "Ned", "Pam", "Ray", "Sam", "Tom", "Uma", "Zoe"}
	// wpGoods are things bought, singular and plural.
	wpGoods = [][2]string{{"pen", "pens"}, {"cup", "cups"}, {"book", "books"}, {"hat", "hats"}, {"pie", "pies"},
		{"toy", "toys"}, {"mug", "mugs"}, {"kite", "kites"}, {"card", "cards"}, {"bag", "bags"}}
	// wpMakers are rate subjects: who, verb, what.
	wpMakers = [][3]string{{"A machine", "makes", "toys"}, {"A printer", "prints", "pages"}, {"A pump", "fills", "buckets"},
		{"A robot", "packs", "boxes"}, {"An oven", "bakes", "buns"}}
	wpUnits = []string{"hour", "minute"}
	// wpThings are counted things, wpBoxes what holds them.
	wpThings = []string{"marbles", "apples", "coins", "shells", "beads", "stickers", "stamps"}
	wpBoxes  = []string{"bags", "boxes", "jars", "packs"}
)

// plural is "1 year" or "n years".
func wpPlural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return strconv.Itoa(n) + " " + unit + "s"
}

// wpPick draws distinct indices below n (k of them).
func wpPick(r *rand.Rand, n, k int) []int { return r.Perm(n)[:k] }

// wpArity is the number of numbers of a type at a level.
func wpArity(typ string, level int) int {
	switch typ {
	case "shop":
		return []int{3, 4, 5, 6}[level-1]
	case "rate":
		return level + 2
	case "share":
		return []int{3, 4, 5, 6}[level-1]
	case "age":
		return level + 2
	case "giveaway":
		return []int{3, 4, 5, 6}[level-1]
	case "unitprice":
		return []int{3, 4, 5, 6}[level-1]
	}
	return -1
}

// build checks s and returns its question, answer and plan; an error says
// what is wrong with the numbers. The wording is drawn from a PCG stream
// seeded by a hash of s.key().
func (s wpSpec) build() (wpBuilt, error) {
	if s.Level < MinWordProbLevel || s.Level > MaxWordProbLevel {
		return wpBuilt{}, fmt.Errorf("level %d out of range %d..%d", s.Level, MinWordProbLevel, MaxWordProbLevel)
	}
	want := wpArity(s.Type, s.Level)
	if want < 0 {
		return wpBuilt{}, fmt.Errorf("unknown type %q", s.Type)
	}
	if len(s.N) != want {
		return wpBuilt{}, fmt.Errorf("%s level %d takes %d numbers, got %d", s.Type, s.Level, want, len(s.N))
	}
	for i, n := range s.N {
		if n == 0 || n < 0 && (s.Type != "age" || i == 0) {
			return wpBuilt{}, fmt.Errorf("number %d is %d", i, n)
		}
	}
	r := rand.New(rand.NewPCG(wpHash(s.key()), 0x776f726470726f62))
	n, L := s.N, s.Level
	var b wpBuilt
	var q strings.Builder
	switch s.Type {
	case "shop":
		name := wpNames[r.IntN(len(wpNames))]
		g := wpPick(r, len(wpGoods), 3)
		quant := 1 + (L-1)/2
		single := L%2 == 0
		b.terms = []wpTerm{wpGiven(+1, n[len(n)-1])}
		total := 0
		fmt.Fprintf(&q, "%s buys", name)
		for i := range quant {
			c, p := n[2*i], n[2*i+1]
			if c < 2 || p < 2 {
				return wpBuilt{}, fmt.Errorf("counts and prices must be >= 2")
			}
			sep := " "
			if i > 0 {
				sep = ", "
				if !single {
					sep = " and "
				}
			}
			fmt.Fprintf(&q, "%s%d %s at $%d each", sep, c, wpGoods[g[i]][1], p)
			b.terms = append(b.terms, wpProduct(-1, c, p))
			total += c * p
		}
		if single {
			sp := n[2*quant]
			fmt.Fprintf(&q, " and a %s for $%d", wpGoods[g[2]][0], sp)
			b.terms = append(b.terms, wpGiven(-1, sp))
			total += sp
		}
		bill := n[len(n)-1]
		if bill <= total {
			return wpBuilt{}, fmt.Errorf("the bill $%d does not exceed the total $%d", bill, total)
		}
		fmt.Fprintf(&q, ". %s pays with $%d. How much change does %s get?", name, bill, name)
		b.answer = bill - total
	case "rate":
		m := wpMakers[r.IntN(len(wpMakers))]
		unit := wpUnits[r.IntN(len(wpUnits))]
		rate := n[0]
		if rate < 2 {
			return wpBuilt{}, fmt.Errorf("the rate must be >= 2")
		}
		fmt.Fprintf(&q, "%s %s %d %s per %s. It runs for ", m[0], m[1], rate, m[2], unit)
		sum := 0
		for i, h := range n[1:] {
			if i > 0 {
				if i == len(n)-2 {
					q.WriteString(" and then ")
				} else {
					q.WriteString(", then ")
				}
			}
			q.WriteString(wpPlural(h, unit))
			b.terms = append(b.terms, wpGiven(+1, h))
			sum += h
		}
		fmt.Fprintf(&q, ". How many %s does it make in all?", m[2])
		b.outer, b.outerArg = '*', rate
		b.answer = rate * sum
	case "share":
		name := wpNames[r.IntN(len(wpNames))]
		thing := wpThings[r.IntN(len(wpThings))]
		box := wpPick(r, len(wpBoxes), 2)
		d := n[0]
		if d < 2 {
			return wpBuilt{}, fmt.Errorf("the number of kids must be >= 2")
		}
		p := n[1:]
		switch L {
		case 1:
			fmt.Fprintf(&q, "%s has %d %s and gets %d more.", name, p[0], thing, p[1])
			b.terms = []wpTerm{wpGiven(+1, p[0]), wpGiven(+1, p[1])}
		case 2:
			fmt.Fprintf(&q, "%s has %d %s, gets %d more and finds %d more.", name, p[0], thing, p[1], p[2])
			b.terms = []wpTerm{wpGiven(+1, p[0]), wpGiven(+1, p[1]), wpGiven(+1, p[2])}
		case 3:
			if p[0] < 2 || p[1] < 2 {
				return wpBuilt{}, fmt.Errorf("bags and their sizes must be >= 2")
			}
			fmt.Fprintf(&q, "%s has %d %s of %d %s and %d loose ones, and gets %d more.", name, p[0], wpBoxes[box[0]], p[1], thing, p[2], p[3])
			b.terms = []wpTerm{wpProduct(+1, p[0], p[1]), wpGiven(+1, p[2]), wpGiven(+1, p[3])}
		case 4:
			if p[0] < 2 || p[1] < 2 || p[2] < 2 || p[3] < 2 {
				return wpBuilt{}, fmt.Errorf("bags and their sizes must be >= 2")
			}
			fmt.Fprintf(&q, "%s has %d %s of %d %s, %d %s of %d and %d loose ones.", name, p[0], wpBoxes[box[0]], p[1], thing,
				p[2], wpBoxes[box[1]], p[3], p[4])
			b.terms = []wpTerm{wpProduct(+1, p[0], p[1]), wpProduct(+1, p[2], p[3]), wpGiven(+1, p[4])}
		}
		total := 0
		for _, t := range b.terms {
			total += t.val
		}
		if total%d != 0 {
			return wpBuilt{}, fmt.Errorf("%d %s do not share equally among %d", total, thing, d)
		}
		fmt.Fprintf(&q, " They are shared equally among %d kids. How many %s does each kid get?", d, thing)
		b.outer, b.outerArg = '/', d
		b.answer = total / d
	case "age":
		ix := wpPick(r, len(wpNames), L+1)
		age := n[0]
		fmt.Fprintf(&q, "%s is %d.", wpNames[ix[0]], age)
		b.terms = []wpTerm{wpGiven(+1, age)}
		for i, dd := range n[1 : L+1] {
			rel := "older"
			if dd < 0 {
				rel = "younger"
			}
			age += dd
			if age < 1 {
				return wpBuilt{}, fmt.Errorf("%s would be %d", wpNames[ix[i+1]], age)
			}
			fmt.Fprintf(&q, " %s is %s %s than %s.", wpNames[ix[i+1]], wpPlural(wpAbs(dd), "year"), rel, wpNames[ix[i]])
			b.terms = append(b.terms, wpGiven(wpSign(dd), wpAbs(dd)))
		}
		y := n[L+1]
		last := wpNames[ix[L]]
		if y > 0 {
			fmt.Fprintf(&q, " How old will %s be in %s?", last, wpPlural(y, "year"))
		} else {
			fmt.Fprintf(&q, " How old was %s %s ago?", last, wpPlural(-y, "year"))
		}
		age += y
		if age < 1 {
			return wpBuilt{}, fmt.Errorf("%s would be %d", last, age)
		}
		b.terms = append(b.terms, wpGiven(wpSign(y), wpAbs(y)))
		b.answer = age
	case "giveaway":
		name := wpNames[r.IntN(len(wpNames))]
		thing := wpThings[r.IntN(len(wpThings))]
		x := n[0]
		fmt.Fprintf(&q, "%s has %d %s. %s", name, x, thing, name)
		b.terms = []wpTerm{wpGiven(+1, x)}
		if L == 1 {
			fmt.Fprintf(&q, " buys %d more", n[1])
			b.terms = append(b.terms, wpGiven(+1, n[1]))
		} else {
			if n[1] < 2 || n[2] < 2 {
				return wpBuilt{}, fmt.Errorf("packs and their sizes must be >= 2")
			}
			fmt.Fprintf(&q, " buys %d packs of %d", n[1], n[2])
			b.terms = append(b.terms, wpProduct(+1, n[1], n[2]))
		}
		switch L {
		case 1, 2:
			fmt.Fprintf(&q, " and gives %d away.", n[len(n)-1])
			b.terms = append(b.terms, wpGiven(-1, n[len(n)-1]))
		default:
			if n[3] < 2 || n[4] < 2 {
				return wpBuilt{}, fmt.Errorf("gifts and friends must be >= 2")
			}
			fmt.Fprintf(&q, " and gives %d to each of %d friends.", n[3], n[4])
			b.terms = append(b.terms, wpProduct(-1, n[3], n[4]))
			if L == 4 {
				fmt.Fprintf(&q, " Then %s loses %d.", name, n[5])
				b.terms = append(b.terms, wpGiven(-1, n[5]))
			}
		}
		left := 0
		for _, t := range b.terms {
			left += t.sign * t.val
			if left < 1 {
				return wpBuilt{}, fmt.Errorf("%s would have %d %s", name, left, thing)
			}
		}
		fmt.Fprintf(&q, " How many %s does %s have now?", thing, name)
		b.answer = left
	case "unitprice":
		name := wpNames[r.IntN(len(wpNames))]
		g := wpPick(r, len(wpGoods), 2)
		for i := 0; i+1 < len(n) && i < 4 && (L >= 3 || i == 0); i += 2 {
			if n[i] < 2 || n[i+1]%n[i] != 0 || n[i+1] == n[i] {
				return wpBuilt{}, fmt.Errorf("%d items for $%d is not a whole price of at least $2 each", n[i], n[i+1])
			}
		}
		switch L {
		case 1:
			nn, t, k := n[0], n[1], n[2]
			if k == nn {
				return wpBuilt{}, fmt.Errorf("asks the price of the %d items it gives", k)
			}
			fmt.Fprintf(&q, "%d %s cost $%d. How much do %d %s cost?", nn, wpGoods[g[0]][1], t, k, wpGoods[g[0]][1])
			b.terms = []wpTerm{wpUnitCost(+1, nn, t, k)}
			b.answer = t / nn * k
		case 2:
			nn, t, k, bill := n[0], n[1], n[2], n[3]
			cost := t / nn * k
			if k == nn {
				return wpBuilt{}, fmt.Errorf("asks the price of the %d items it gives", k)
			}
			if bill <= cost {
				return wpBuilt{}, fmt.Errorf("the bill $%d does not exceed the cost $%d", bill, cost)
			}
			fmt.Fprintf(&q, "%d %s cost $%d. %s buys %d %s and pays with $%d. How much change does %s get?",
				nn, wpGoods[g[0]][1], t, name, k, wpGoods[g[0]][1], bill, name)
			b.terms = []wpTerm{wpGiven(+1, bill), wpUnitCost(-1, nn, t, k)}
			b.answer = bill - cost
		case 3:
			n1, t1, n2, t2, k := n[0], n[1], n[2], n[3], n[4]
			u1, u2 := t1/n1, t2/n2
			if u1 == u2 {
				return wpBuilt{}, fmt.Errorf("both shops charge $%d each", u1)
			}
			item := wpGoods[g[0]][1]
			fmt.Fprintf(&q, "Shop A sells %d %s for $%d. Shop B sells %d %s for $%d. How much do you save on %d %s at the cheaper shop?",
				n1, item, t1, n2, item, t2, k, item)
			hi := wpTerm{sign: +1, val: u1, alts: [][]wpStep{{{t1, '/', n1, u1}}}, scaled: wpUnitCost(+1, n1, t1, k).alts}
			lo := wpTerm{sign: -1, val: u2, alts: [][]wpStep{{{t2, '/', n2, u2}}}, scaled: wpUnitCost(+1, n2, t2, k).alts}
			if u1 < u2 {
				hi, lo = lo, hi
				hi.sign, lo.sign = +1, -1
			}
			b.terms = []wpTerm{hi, lo}
			b.outer, b.outerArg = '*', k
			b.answer = (hi.val - lo.val) * k
		case 4:
			n1, t1, n2, t2, k, j := n[0], n[1], n[2], n[3], n[4], n[5]
			if k == n1 || j == n2 {
				return wpBuilt{}, fmt.Errorf("asks the price of as many items as it gives")
			}
			fmt.Fprintf(&q, "%d %s cost $%d and %d %s cost $%d. %s buys %d %s and %d %s. How much does %s pay?",
				n1, wpGoods[g[0]][1], t1, n2, wpGoods[g[1]][1], t2, name, k, wpGoods[g[0]][1], j, wpGoods[g[1]][1], name)
			b.terms = []wpTerm{wpUnitCost(+1, n1, t1, k), wpUnitCost(+1, n2, t2, j)}
			b.answer = t1/n1*k + t2/n2*j
		}
	}
	b.question = q.String()
	return b, nil
}

func wpAbs(x int) int { return max(x, -x) }

func wpSign(x int) int {
	if x < 0 {
		return -1
	}
	return 1
}

// wpGenerate draws the numbers of a problem of typ at level and builds it;
// ok is false when the draw is rejected (then draw again). The ranges grow
// with the level.
func wpGenerate(rng *rand.Rand, typ string, level int) (wpSpec, wpBuilt, bool) {
	L := level
	ri := func(lo, hi int) int { return lo + rng.IntN(hi-lo+1) }
	// bill is a round bill above total: the next multiple of 10, plus 0..40.
	bill := func(total int) int { return (total/10+1)*10 + 10*ri(0, 4) }
	var n []int
	switch typ {
	case "shop":
		quant := 1 + (L-1)/2
		total := 0
		for range quant {
			c, p := ri(2, 9), ri(2, 10+10*L)
			n = append(n, c, p)
			total += c * p
		}
		if L%2 == 0 {
			s := ri(3, 15+10*L)
			n = append(n, s)
			total += s
		}
		n = append(n, bill(total))
	case "rate":
		n = append(n, ri(2, 8+4*L))
		for range L + 1 {
			n = append(n, ri(1, 8+L))
		}
	case "share":
		d, q := ri(2, 4+L), ri(2, 6+4*L)
		total := d * q
		switch L {
		case 1:
			x := ri(1, total-1)
			n = []int{d, x, total - x}
		case 2:
			if total < 3 {
				return wpSpec{}, wpBuilt{}, false
			}
			x := ri(1, total-2)
			y := ri(1, total-x-1)
			n = []int{d, x, y, total - x - y}
		case 3:
			a, bb := ri(2, 5), ri(2, 9)
			rest := total - a*bb
			if rest < 2 {
				return wpSpec{}, wpBuilt{}, false
			}
			x := ri(1, rest-1)
			n = []int{d, a, bb, x, rest - x}
		case 4:
			a, bb, c, e := ri(2, 5), ri(2, 9), ri(2, 5), ri(2, 9)
			rest := total - a*bb - c*e
			if rest < 1 {
				return wpSpec{}, wpBuilt{}, false
			}
			n = []int{d, a, bb, c, e, rest}
		}
	case "age":
		age := ri(5, 10+8*L)
		n = append(n, age)
		for range L {
			dd := ri(1, 4+3*L)
			if rng.IntN(2) == 1 {
				dd = -dd
			}
			if age+dd < 1 {
				return wpSpec{}, wpBuilt{}, false
			}
			age += dd
			n = append(n, dd)
		}
		y := ri(1, 4+3*L)
		if rng.IntN(2) == 1 {
			if age-y < 1 {
				return wpSpec{}, wpBuilt{}, false
			}
			y = -y
		}
		n = append(n, y)
	case "giveaway":
		x := ri(5, 10+10*L)
		n = append(n, x)
		have := x
		if L == 1 {
			y := ri(2, 10+10*L)
			n = append(n, y)
			have += y
		} else {
			b, c := ri(2, 3+L), ri(2, 5+3*L)
			n = append(n, b, c)
			have += b * c
		}
		if L <= 2 {
			n = append(n, ri(1, have-1))
			break
		}
		e, f := ri(2, 3+L), ri(2, 3+L)
		if e*f > have-1-(L-3) {
			return wpSpec{}, wpBuilt{}, false
		}
		n = append(n, e, f)
		have -= e * f
		if L == 4 {
			n = append(n, ri(1, have-1))
		}
	case "unitprice":
		switch L {
		case 1:
			nn, u, k := ri(2, 8), ri(2, 15), ri(2, 15)
			n = []int{nn, nn * u, k}
		case 2:
			nn, u, k := ri(2, 8), ri(2, 20), ri(2, 15)
			n = []int{nn, nn * u, k, bill(u * k)}
		case 3:
			n1, u1, n2, u2 := ri(2, 9), ri(2, 25), ri(2, 9), ri(2, 25)
			n = []int{n1, n1 * u1, n2, n2 * u2, ri(2, 15)}
		case 4:
			n1, u1, n2, u2 := ri(2, 9), ri(2, 30), ri(2, 9), ri(2, 30)
			n = []int{n1, n1 * u1, n2, n2 * u2, ri(2, 15), ri(2, 15)}
		}
	default:
		return wpSpec{}, wpBuilt{}, false
	}
	s := wpSpec{Type: typ, Level: level, N: n}
	b, err := s.build()
	if err != nil {
		return wpSpec{}, wpBuilt{}, false
	}
	return s, b, true
}
