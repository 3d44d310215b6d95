package tasks

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
)

func newWordProbT(t *testing.T, m map[string]any) *WordProb {
	t.Helper()
	task, err := New(core.NewParams("task", mergeMaps(map[string]any{"name": "wordprob"}, m)))
	if err != nil {
		t.Fatal(err)
	}
	return task.(*WordProb)
}

func mergeMaps(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// Each type at each level against answers worked by hand from explicit
// numbers, with the story-order solution for a few; bad numbers are
// refused.
func TestWordProbHandWorked(t *testing.T) {
	for _, c := range []struct {
		typ    string
		level  int
		n      []int
		answer int    // worked by hand; 0: build must fail
		sol    string // story-order solution, "" to skip
		has    string // a fragment of the question, "" to skip
	}{
		// change = bill - sum of count*price - single price
		{"shop", 1, []int{3, 4, 20}, 8, "3*4=12\n20-12=8\n\\boxed{8}", "3 "},                    // 20 - 12
		{"shop", 2, []int{3, 4, 7, 50}, 31, "3*4=12\n50-12=38\n38-7=31\n\\boxed{31}", "for $7"}, // 50 - 12 - 7
		{"shop", 3, []int{4, 29, 2, 38, 220}, 28, "", "pays with $220"},                         // 220 - 116 - 76
		{"shop", 4, []int{5, 13, 7, 11, 54, 240}, 44, "", "$13 each"},                           // 240 - 65 - 77 - 54
		{"shop", 1, []int{3, 4, 12}, 0, "", ""},                                                 // no change from an exact bill
		// total = rate * sum of spans
		{"rate", 1, []int{7, 3, 4}, 49, "3+4=7\n7*7=49\n\\boxed{49}", "7 "},
		{"rate", 2, []int{13, 7, 8, 8}, 299, "", "then 8"}, // 13 * 23
		{"rate", 3, []int{12, 8, 11, 11, 7}, 444, "", ""},  // 12 * 37
		{"rate", 4, []int{4, 3, 2, 3, 12, 11}, 124, "3+2=5\n5+3=8\n8+12=20\n20+11=31\n31*4=124\n\\boxed{124}", ""},
		// each = sum of parts / kids
		{"share", 1, []int{4, 10, 14}, 6, "10+14=24\n24/4=6\n\\boxed{6}", "among 4 kids"},
		{"share", 2, []int{5, 38, 9, 3}, 10, "", "finds 3 more"},
		{"share", 3, []int{5, 2, 4, 32, 25}, 13, "2*4=8\n8+32=40\n40+25=65\n65/5=13\n\\boxed{13}", "32 loose"},
		{"share", 4, []int{6, 3, 8, 2, 5, 8}, 7, "", ""}, // (24 + 10 + 8) / 6
		{"share", 1, []int{4, 10, 13}, 0, "", ""},        // 23 is not a multiple of 4
		// age = first + signed differences + signed years
		{"age", 1, []int{12, 5, 3}, 20, "12+5=17\n17+3=20\n\\boxed{20}", "in 3 years"},
		{"age", 2, []int{21, 7, 8, -1}, 35, "", "1 year ago"},
		{"age", 3, []int{22, 10, 13, -1, 12}, 56, "", "1 year younger"},
		{"age", 4, []int{9, -8, 13, -10, 3, 4}, 11, "9-8=1\n1+13=14\n14-10=4\n4+3=7\n7+4=11\n\\boxed{11}", ""},
		{"age", 1, []int{12, -12, 3}, 0, "", ""}, // aged 0
		{"age", 1, []int{-1, 5, 3}, 0, "", ""},
		// left = has + bought - given - lost
		{"giveaway", 1, []int{12, 7, 5}, 14, "12+7=19\n19-5=14\n\\boxed{14}", "gives 5 away"},
		{"giveaway", 2, []int{25, 2, 9, 34}, 9, "", "2 packs of 9"},
		{"giveaway", 3, []int{25, 5, 14, 6, 4}, 71, "5*14=70\n6*4=24\n25+70=95\n95-24=71\n\\boxed{71}", "to each of 4"},
		{"giveaway", 4, []int{10, 3, 15, 3, 7, 29}, 5, "", "loses 29"},
		{"giveaway", 1, []int{12, 7, 19}, 0, "", ""}, // nothing left
		// unit price t/n
		{"unitprice", 1, []int{5, 20, 3}, 12, "20/5=4\n4*3=12\n\\boxed{12}", "5 "},
		{"unitprice", 2, []int{7, 91, 12, 190}, 34, "91/7=13\n13*12=156\n190-156=34\n\\boxed{34}", "$190"}, // 190 - 13*12
		{"unitprice", 3, []int{4, 72, 2, 48, 9}, 54, "", "Shop B"},                                         // (24 - 18) * 9
		{"unitprice", 4, []int{5, 40, 7, 49, 15, 13}, 211, "", ""},                                         // 8*15 + 7*13
		{"unitprice", 1, []int{5, 21, 3}, 0, "", ""},                                                       // $4.20 each
		{"unitprice", 3, []int{4, 72, 2, 36, 9}, 0, "", ""},                                                // same price
		// malformed
		{"shop", 2, []int{3, 4, 20}, 0, "", ""},
		{"shop", 5, []int{3, 4, 20}, 0, "", ""},
		{"bake", 1, []int{3, 4, 20}, 0, "", ""},
	} {
		s := wpSpec{Type: c.typ, Level: c.level, N: c.n}
		b, err := s.build()
		if c.answer == 0 {
			if err == nil {
				t.Errorf("%s: built (answer %d), want an error", s.key(), b.answer)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", s.key(), err)
			continue
		}
		if b.answer != c.answer {
			t.Errorf("%s: answer %d, worked by hand %d", s.key(), b.answer, c.answer)
		}
		canon := b.canonical()
		if got := wpRender(canon, b.answer); c.sol != "" && got != c.sol {
			t.Errorf("%s: solution\n%s\nwant\n%s", s.key(), got, c.sol)
		}
		if len(canon) != c.level+1 {
			t.Errorf("%s: story-order solution has %d steps, want level+1 = %d", s.key(), len(canon), c.level+1)
		}
		if !strings.Contains(b.question, c.has) {
			t.Errorf("%s: question %q lacks %q", s.key(), b.question, c.has)
		}
		checkWordProbSolution(t, s.key(), b.question, strconv.Itoa(c.answer), wpRender(canon, b.answer))
	}
}

// The exact wording of one problem per type: wording is a function of the
// canonical problem and the version, so a change here must bump
// WordProbVersion.
func TestWordProbGolden(t *testing.T) {
	w := newWordProbT(t, nil)
	for _, c := range []struct {
		s    wpSpec
		want string
	}{
		{wpSpec{"shop", 2, []int{3, 4, 7, 50}}, "Uma buys 3 books at $4 each and a cup for $7. Uma pays with $50. How much change does Uma get?\nThink step by step; end with \\boxed{answer}.\n"},
		{wpSpec{"rate", 1, []int{7, 3, 4}}, "A robot packs 7 boxes per hour. It runs for 3 hours and then 4 hours. How many boxes does it make in all?\nThink step by step; end with \\boxed{answer}.\n"},
		{wpSpec{"share", 3, []int{5, 2, 4, 32, 25}}, "Gus has 2 boxes of 4 coins and 32 loose ones, and gets 25 more. They are shared equally among 5 kids. How many coins does each kid get?\nThink step by step; end with \\boxed{answer}.\n"},
		{wpSpec{"age", 2, []int{21, 7, 8, -1}}, "Gus is 21. Tom is 7 years older than Gus. Dan is 8 years older than Tom. How old was Dan 1 year ago?\nThink step by step; end with \\boxed{answer}.\n"},
		{wpSpec{"giveaway", 4, []int{10, 3, 15, 3, 7, 29}}, "Cal has 10 beads. Cal buys 3 packs of 15 and gives 3 to each of 7 friends. Then Cal loses 29. How many beads does Cal have now?\nThink step by step; end with \\boxed{answer}.\n"},
		{wpSpec{"unitprice", 3, []int{4, 72, 2, 48, 9}}, "Shop A sells 4 toys for $72. Shop B sells 2 toys for $48. How much do you save on 9 toys at the cheaper shop?\nThink step by step; end with \\boxed{answer}.\n"},
	} {
		b, err := c.s.build()
		if err != nil {
			t.Fatal(err)
		}
		p := w.problem(c.s, b, b.canonical())
		if want := WordProbVersion + "/" + c.s.key(); p.ID != want {
			t.Errorf("ID %q, want %q", p.ID, want)
		}
		if p.Prompt != c.want {
			t.Errorf("%s: prompt %q, want %q", c.s.key(), p.Prompt, c.want)
		}
	}
}

// wpLine is a solution step line, checked independently of the generator.
var wpLine = regexp.MustCompile(`^(\d+)([-+*/])(\d+)=(\d+)$`)

// checkWordProbSolution checks a worked solution: every line but the last
// is "a op b=c" with c right over the non-negative integers (exact
// division), each operand is a number of the prompt or an earlier result,
// the last step's result is the answer, and the last line is \boxed{answer}.
func checkWordProbSolution(t *testing.T, id, prompt, answer, sol string) {
	t.Helper()
	known := map[string]bool{}
	for _, f := range regexp.MustCompile(`\d+`).FindAllString(prompt, -1) {
		known[f] = true
	}
	lines := strings.Split(sol, "\n")
	if len(lines) < 2 {
		t.Errorf("%s: solution %q has no step", id, sol)
		return
	}
	last := ""
	for _, l := range lines[:len(lines)-1] {
		m := wpLine.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("%s: line %q is not a step a op b=c", id, l)
			return
		}
		a, _ := strconv.ParseInt(m[1], 10, 64)
		b, _ := strconv.ParseInt(m[3], 10, 64)
		c, _ := strconv.ParseInt(m[4], 10, 64)
		var r int64
		switch m[2] {
		case "+":
			r = a + b
		case "-":
			r = a - b
		case "*":
			r = a * b
		case "/":
			if b == 0 || a%b != 0 {
				t.Errorf("%s: step %q is not an exact division", id, l)
				return
			}
			r = a / b
		}
		if r != c || r < 0 {
			t.Errorf("%s: step %q: %d %s %d is %d", id, l, a, m[2], b, r)
		}
		for _, o := range []string{m[1], m[3]} {
			if !known[o] {
				t.Errorf("%s: step %q uses %s, neither in the prompt nor an earlier result", id, l, o)
			}
		}
		known[m[4]] = true
		last = m[4]
	}
	if last != answer {
		t.Errorf("%s: last step gives %s, answer %s", id, last, answer)
	}
	if lines[len(lines)-1] != `\boxed{`+answer+`}` {
		t.Errorf("%s: last line %q, want \\boxed{%s}", id, lines[len(lines)-1], answer)
	}
}

// Every generated solution, of every solution_path mode, of training and
// eval problems, checks; the math verifier accepts it and refuses a wrong
// answer; levels and types are those configured; eval problems carry the
// story-order solution of level+1 steps.
func TestWordProbSolutions(t *testing.T) {
	for _, mode := range []string{WordProbPathRandom, WordProbPathFixed, WordProbPathCanonical} {
		w := newWordProbT(t, map[string]any{"train_max_level": 3, "solution_path": mode, "eval_n": 60, "eval_hard_n": 30})
		v := w.Verifier()
		probs := w.SampleTrain(rand.New(rand.NewPCG(7, 7)), 1500)
		levels := map[int]int{}
		for _, p := range probs {
			levels[p.Level]++
			if p.Level < 1 || p.Level > 3 {
				t.Fatalf("%s: level %d outside 1..3", p.ID, p.Level)
			}
		}
		for l := 1; l <= 3; l++ {
			if levels[l] < 400 {
				t.Errorf("%s: level %d drawn %d times in 1500", mode, l, levels[l])
			}
		}
		for _, set := range w.EvalSets() {
			for _, p := range set.Problems {
				if n := strings.Count(p.Solution, "\n"); n != p.Level+1 {
					t.Errorf("%s: eval solution of %d steps, want %d", p.ID, n, p.Level+1)
				}
			}
			probs = append(probs, set.Problems...)
		}
		for _, p := range probs {
			checkWordProbSolution(t, p.ID, p.Prompt, p.Answer, p.Solution)
			if !strings.HasPrefix(p.ID, WordProbVersion+"/") {
				t.Errorf("ID %q", p.ID)
			}
			if r, ok := v.Verify(p, p.Solution); !ok || r != 1 {
				t.Errorf("%s: verifier refuses the solution %q", p.ID, p.Solution)
			}
			ans, _ := strconv.Atoi(p.Answer)
			wrong := strings.Replace(p.Solution, `\boxed{`+p.Answer+`}`, `\boxed{`+strconv.Itoa(ans+1)+`}`, 1)
			if r, ok := v.Verify(p, wrong); ok || r != -1 {
				t.Errorf("%s: verifier accepts %q", p.ID, wrong)
			}
			if l := len(p.Prompt); l < 80 || l > 300 {
				t.Errorf("%s: prompt of %d characters", p.ID, l)
			}
			if mode == WordProbPathCanonical && strings.Count(p.Solution, "\n") != p.Level+1 {
				t.Errorf("%s: canonical solution %q", p.ID, p.Solution)
			}
		}
		if t.Failed() {
			return
		}
	}
}

// paths enumerates a problem's distinct solution paths (by wpPathKey), the
// canonical one first: every choice of a way per term with every order and
// grouping of the sum that keeps each intermediate non-negative and
// non-zero, then the outer operation; with an outer '*', also the
// distributed form; with an outer '/' whose terms all divide, also
// dividing each term first. It is the space randomPath draws from.
func (b wpBuilt) paths() [][]wpStep {
	seen := map[string]bool{}
	var out [][]wpStep
	add := func(steps []wpStep) {
		if k := wpPathKey(steps); !seen[k] {
			seen[k] = true
			out = append(out, steps)
		}
	}
	add(b.canonical())
	combos := func(ways func(t wpTerm) [][]wpStep, f func(prefix []wpStep)) {
		var rec func(i int, prefix []wpStep)
		rec = func(i int, prefix []wpStep) {
			if i == len(b.terms) {
				f(prefix)
				return
			}
			for _, w := range ways(b.terms[i]) {
				rec(i+1, append(slices.Clone(prefix), w...))
			}
		}
		rec(0, nil)
	}
	signed := func(scale func(v int) int) []int {
		out := make([]int, len(b.terms))
		for i, t := range b.terms {
			out[i] = t.sign * scale(t.val)
		}
		return out
	}
	sum := 0
	for _, t := range b.terms {
		sum += t.sign * t.val
	}
	sums := wpSumPaths(signed(func(v int) int { return v }))
	combos(func(t wpTerm) [][]wpStep { return t.alts }, func(prefix []wpStep) {
		for _, sp := range sums {
			steps := append(slices.Clone(prefix), sp...)
			if b.outer != 0 {
				steps = append(steps, wpOuter(sum, b.outer, b.outerArg))
			}
			add(steps)
		}
	})
	c := b.outerArg
	switch b.outer {
	case '*':
		dsums := wpSumPaths(signed(func(v int) int { return v * c }))
		combos(func(t wpTerm) [][]wpStep {
			if t.scaled != nil {
				return t.scaled
			}
			var ws [][]wpStep
			for _, a := range t.alts {
				ws = append(ws, append(slices.Clone(a), wpStep{t.val, '*', c, t.val * c}))
			}
			return ws
		}, func(prefix []wpStep) {
			for _, sp := range dsums {
				add(append(slices.Clone(prefix), sp...))
			}
		})
	case '/':
		for _, t := range b.terms {
			if t.val%c != 0 {
				return out
			}
		}
		dsums := wpSumPaths(signed(func(v int) int { return v / c }))
		combos(func(t wpTerm) [][]wpStep {
			var ws [][]wpStep
			for _, a := range t.alts {
				ws = append(ws, append(slices.Clone(a), wpStep{t.val, '/', c, t.val / c}))
			}
			return ws
		}, func(prefix []wpStep) {
			for _, sp := range dsums {
				add(append(slices.Clone(prefix), sp...))
			}
		})
	}
	return out
}

// wpSumPaths returns the distinct ways (by wpPathKey) to add up signed
// terms two at a time in any order and grouping (wpCombine), no
// intermediate 0.
func wpSumPaths(terms []int) [][]wpStep {
	seen := map[string]bool{}
	var out [][]wpStep
	var rec func(vals []int, steps []wpStep)
	rec = func(vals []int, steps []wpStep) {
		if len(vals) == 1 {
			if k := wpPathKey(steps); vals[0] >= 0 && !seen[k] {
				seen[k] = true
				out = append(out, slices.Clone(steps))
			}
			return
		}
		for i := range vals {
			for j := i + 1; j < len(vals); j++ {
				st, r := wpCombine(vals[i], vals[j])
				if r == 0 && len(vals) > 2 {
					continue
				}
				rest := make([]int, 0, len(vals)-1)
				for k, v := range vals {
					if k != i && k != j {
						rest = append(rest, v)
					}
				}
				rec(append(rest, r), append(steps, st))
			}
		}
	}
	rec(terms, nil)
	return out
}

// wpPathKey is the solution key of a path: its sorted results.
func wpPathKey(steps []wpStep) string {
	results := make([]int, len(steps))
	for i, s := range steps {
		results[i] = s.C
	}
	return wpResultsKey(results)
}

// The solution paths: every enumerated path is a correct solution with its
// own solution key (the verifier's SolutionKey of its text), the canonical
// path is among them, randomPath draws only enumerated paths and, over
// draws, several of them; every type but shop (one path at level 1) has
// problems with several paths at every level.
func TestWordProbPaths(t *testing.T) {
	v := WordProbVerifier{NewMathVerifier()}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, typ := range WordProbTypes {
		for level := MinWordProbLevel; level <= MaxWordProbLevel; level++ {
			total, multi, drawnTotal := 0, 0, 0
			const problems = 12
			for range problems {
				s, b, ok := wpGenerate(rng, typ, level)
				for !ok {
					s, b, ok = wpGenerate(rng, typ, level)
				}
				paths := b.paths()
				keys := map[string]bool{}
				p := core.Problem{Prompt: b.question, Answer: strconv.Itoa(b.answer)}
				for _, path := range paths {
					sol := wpRender(path, b.answer)
					checkWordProbSolution(t, s.key(), b.question, p.Answer, sol)
					k := v.SolutionKey(p, sol)
					if k == "" || keys[k] {
						t.Fatalf("%s: path %q: key %q empty or repeated", s.key(), sol, k)
					}
					keys[k] = true
				}
				if wpPathKey(paths[0]) != wpPathKey(b.canonical()) {
					t.Fatalf("%s: canonical path is not first", s.key())
				}
				drawn := map[string]bool{}
				for range 60 {
					path := b.randomPath(rng)
					sol := wpRender(path, b.answer)
					k := v.SolutionKey(p, sol)
					if !keys[k] {
						checkWordProbSolution(t, s.key(), b.question, p.Answer, sol)
						t.Fatalf("%s: drawn path %q (key %q) not enumerated", s.key(), sol, k)
					}
					drawn[k] = true
				}
				if want := min(len(paths), 3); len(drawn) < want {
					t.Errorf("%s: %d draws hit %d of %d paths", s.key(), 60, len(drawn), len(paths))
				}
				total += len(paths)
				drawnTotal += len(drawn)
				if len(paths) > 1 {
					multi++
				}
			}
			t.Logf("%-9s L%d: %5.1f distinct paths per problem (%d of %d problems with several); 60 draws hit %.1f",
				typ, level, float64(total)/problems, multi, problems, float64(drawnTotal)/problems)
			if multi == 0 && !(typ == "shop" && level == 1) {
				t.Errorf("%s level %d: no problem with several solution paths", typ, level)
			}
		}
	}
}

// SolutionKey: the order of a sum's operands, spacing and independent
// steps do not matter; a different grouping does; an incorrect response
// has none; a bare correct answer is "direct".
func TestWordProbSolutionKey(t *testing.T) {
	v := WordProbVerifier{NewMathVerifier()}
	p := core.Problem{Answer: "31"}
	a := v.SolutionKey(p, "3*4=12\n12+7=19\n50-19=31\n\\boxed{31}")
	for _, c := range []struct {
		resp string
		same bool
	}{
		{"4 * 3 = 12\n7 + 12 = 19\n50 - 19 = 31\nso \\boxed{31}", true},
		{"3x4=12, 12+7=19, 50-19=31. \\boxed{31}", true},
		{"3*4=12\n50-12=38\n38-7=31\n\\boxed{31}", false},
		{"3*4=13\n12+7=19\n50-19=31\n\\boxed{31}", false}, // a wrong step does not count
	} {
		if got := v.SolutionKey(p, c.resp); (got == a) != c.same || got == "" {
			t.Errorf("%q: key %q vs %q, want same %v", c.resp, got, a, c.same)
		}
	}
	if a != "12,19,31" {
		t.Errorf("key %q", a)
	}
	if k := v.SolutionKey(p, "3*4=12\n\\boxed{30}"); k != "" {
		t.Errorf("incorrect response key %q", k)
	}
	if k := v.SolutionKey(p, "\\boxed{31}"); k != "direct" {
		t.Errorf("bare answer key %q", k)
	}
	if r, ok := v.Verify(p, "Answer: 31"); !ok || r != 1 {
		t.Error("the math verifier's Answer: line is not accepted")
	}
}

func wordProbDigest(sets []core.EvalSet) string {
	h := fnv.New64a()
	for _, s := range sets {
		fmt.Fprintf(h, "%s\n", s.Name)
		for _, p := range s.Problems {
			fmt.Fprintf(h, "%s\n%s\n%s\n%s\n%d\n", p.ID, p.Prompt, p.Answer, p.Solution, p.Level)
		}
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

// The eval sets are stable (two constructions agree, and a digest pins
// them: a change must bump WordProbVersion), balanced over (level, type),
// of the right levels, without repeats, disjoint from each other and from
// 10,000 training draws; eval_seed draws others; restricting types keeps
// the remaining types' problems.
func TestWordProbEvalSets(t *testing.T) {
	w := newWordProbT(t, nil)
	w2 := newWordProbT(t, nil)
	if !reflect.DeepEqual(w.EvalSets(), w2.EvalSets()) {
		t.Fatal("two constructions give different eval sets")
	}
	if d := wordProbDigest(w.EvalSets()); d != "c0d8ce6daecd9810" {
		t.Errorf("eval set digest %s changed: bump WordProbVersion if the generator changed on purpose", d)
	}
	sets := w.EvalSets()
	if len(sets) != 2 || sets[0].Name != "eval" || sets[1].Name != "eval_hard" || len(sets[0].Problems) != 240 || len(sets[1].Problems) != 240 {
		t.Fatalf("eval sets %d", len(sets))
	}
	where := map[string]string{}
	for _, s := range sets {
		count := map[string]int{}
		for _, p := range s.Problems {
			if prev, dup := where[p.ID]; dup {
				t.Errorf("%s in %s and %s", p.ID, prev, s.Name)
			}
			where[p.ID] = s.Name
			if (s.Name == "eval") != (p.Level <= 2) {
				t.Errorf("%s: level %d in %s", p.ID, p.Level, s.Name)
			}
			parts := strings.Split(p.ID, "/")
			count[parts[1]+"/"+parts[2]]++
		}
		if len(count) != 12 {
			t.Errorf("%s: %d (type, level) pairs, want 12", s.Name, len(count))
		}
		for k, n := range count {
			if n != 20 {
				t.Errorf("%s: %s has %d problems, want 20", s.Name, k, n)
			}
		}
	}
	prompts := map[string]bool{}
	for _, s := range sets {
		for _, p := range s.Problems {
			prompts[p.Prompt] = true
		}
	}
	train := w.SampleTrain(rand.New(rand.NewPCG(1, 2)), 10000)
	for _, p := range train {
		if _, in := where[p.ID]; in || prompts[p.Prompt] {
			t.Fatalf("training problem %s is in eval set %s", p.ID, where[p.ID])
		}
	}
	// The train split is not degenerate: most draws are distinct.
	distinct := map[string]bool{}
	for _, p := range train {
		distinct[p.ID] = true
	}
	if len(distinct) < 7000 {
		t.Errorf("%d distinct of 10000 training draws", len(distinct))
	}

	other := newWordProbT(t, map[string]any{"eval_seed": 5})
	if wordProbDigest(other.EvalSets()) == wordProbDigest(sets) {
		t.Error("eval_seed does not change the eval sets")
	}
	shop := newWordProbT(t, map[string]any{"types": "shop", "eval_n": 40})
	var want []string
	for _, p := range sets[0].Problems {
		if strings.Contains(p.ID, "/shop/") {
			want = append(want, p.ID)
		}
	}
	var got []string
	for _, p := range shop.EvalSets()[0].Problems {
		got = append(got, p.ID)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("types: shop: eval %v, want the shop problems of the default set %v", got, want)
	}
}

// SampleTrain is deterministic for a seed and differs across seeds.
func TestWordProbSampleTrainDeterministic(t *testing.T) {
	w := newWordProbT(t, nil)
	a := w.SampleTrain(rand.New(rand.NewPCG(9, 9)), 300)
	b := newWordProbT(t, nil).SampleTrain(rand.New(rand.NewPCG(9, 9)), 300)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different problems")
	}
	c := w.SampleTrain(rand.New(rand.NewPCG(9, 10)), 300)
	if reflect.DeepEqual(a, c) {
		t.Fatal("different seeds, same problems")
	}
	if len(w.SampleTrain(rand.New(rand.NewPCG(1, 1)), 0)) != 0 {
		t.Fatal("n = 0")
	}
	// fixed: a problem's solution does not depend on the draw.
	f := newWordProbT(t, map[string]any{"solution_path": "fixed", "train_max_level": 1, "eval_hard_n": 0, "types": "age"})
	sol := map[string]string{}
	repeats := 0
	for _, p := range f.SampleTrain(rand.New(rand.NewPCG(2, 2)), 3000) {
		if s, ok := sol[p.ID]; ok {
			repeats++
			if s != p.Solution {
				t.Fatalf("%s: fixed solutions %q and %q", p.ID, s, p.Solution)
			}
		}
		sol[p.ID] = p.Solution
	}
	if repeats == 0 {
		t.Fatal("no repeated problem to compare")
	}
}

// Config keys: defaults, normalisation and errors naming the key.
func TestWordProbParams(t *testing.T) {
	w := newWordProbT(t, nil)
	if w.TrainMaxLevel != 2 || !slices.Equal(w.Types, WordProbTypes) || w.EvalN != 240 || w.EvalHardN != 240 || w.EvalSeed != 0 ||
		w.SolutionPath != "random" || w.Instruction != WordProbInstruction || w.Name() != "wordprob" {
		t.Fatalf("defaults %+v", w)
	}
	if got := newWordProbT(t, map[string]any{"types": " share, age"}).Types; !slices.Equal(got, []string{"share", "age"}) {
		t.Errorf("types string: %v", got)
	}
	if got := newWordProbT(t, map[string]any{"types": []any{"unitprice", "shop"}}).Types; !slices.Equal(got, []string{"shop", "unitprice"}) {
		t.Errorf("types list: %v", got)
	}
	one := newWordProbT(t, map[string]any{"train_max_level": 4, "eval_hard_n": 0, "instruction": "", "eval_n": 10})
	if len(one.EvalSets()) != 1 || len(one.EvalSets()[0].Problems) != 10 {
		t.Errorf("eval_hard_n 0: %d sets", len(one.EvalSets()))
	}
	for _, p := range one.EvalSets()[0].Problems {
		if strings.Count(p.Prompt, "\n") != 1 || !strings.HasSuffix(p.Prompt, "?\n") {
			t.Errorf("instruction \"\": prompt %q", p.Prompt)
		}
	}
	for _, c := range []struct {
		m    map[string]any
		want string
	}{
		{map[string]any{"levels": []any{1, 2}}, "config: task.levels: unknown key"},
		{map[string]any{"train_max_level": 0}, "config: task.train_max_level: must be in 1..4, got 0"},
		{map[string]any{"train_max_level": 5}, "config: task.train_max_level: must be in 1..4"},
		{map[string]any{"train_max_level": 4}, "config: task.eval_hard_n: train_max_level 4 leaves no harder level"},
		{map[string]any{"types": "shop,bake"}, `config: task.types: unknown type "bake"`},
		{map[string]any{"types": "shop,shop"}, `config: task.types: type "shop" listed twice`},
		{map[string]any{"types": []any{}}, "config: task.types: must name at least one type"},
		{map[string]any{"types": []any{"shop", 3}}, "config: task.types: item 1: want a type name"},
		{map[string]any{"types": 3}, "config: task.types: want a list"},
		{map[string]any{"eval_n": 0}, "config: task.eval_n: must be in 1..100000"},
		{map[string]any{"eval_hard_n": -1}, "config: task.eval_hard_n: must be in 0..100000"},
		{map[string]any{"eval_n": 100001}, "config: task.eval_n: must be in 1..100000"},
		{map[string]any{"eval_hard_n": 100001}, "config: task.eval_hard_n: must be in 0..100000"},
		{map[string]any{"eval_n": 100000, "types": "shop", "train_max_level": 1}, "config: task.eval_n: eval: could not draw"},
		{map[string]any{"eval_n": 600, "types": "shop", "train_max_level": 1}, "config: task.eval_n: eval holds"},
		{map[string]any{"eval_seed": 1.5}, "config: task.eval_seed: want an integer"},
		{map[string]any{"solution_path": "best"}, `config: task.solution_path: unknown value "best"`},
		{map[string]any{"instruction": "a\nb"}, "config: task.instruction: must be one line"},
		{map[string]any{"correct_reward": 1e9}, "config: task.correct_reward: must be in"},
	} {
		task, err := New(core.NewParams("task", mergeMaps(map[string]any{"name": "wordprob"}, c.m)))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || task != nil {
			t.Errorf("%v: %v, %v; want an error starting %q", c.m, task, err, c.want)
		}
	}
}

// Prompt and solution lengths per level, for the docs (go test -v).
func TestWordProbLengths(t *testing.T) {
	w := newWordProbT(t, map[string]any{"train_max_level": 4, "eval_hard_n": 0, "eval_n": 24})
	probs := w.SampleTrain(rand.New(rand.NewPCG(5, 5)), 4000)
	for level := 1; level <= 4; level++ {
		n, pl, sl, pmax, smax := 0, 0, 0, 0, 0
		for _, p := range probs {
			if p.Level == level {
				n++
				pl += len(p.Prompt)
				sl += len(p.Solution)
				pmax = max(pmax, len(p.Prompt))
				smax = max(smax, len(p.Solution))
			}
		}
		t.Logf("L%d: %d problems, prompt %.0f chars (max %d), solution %.0f chars (max %d)", level, n, float64(pl)/float64(n), pmax, float64(sl)/float64(n), smax)
	}
}

// tokenizer, chat_template, enable_thinking and eos_token: the math task's
// keys. A template wraps the question and instruction as one user message;
// the problems themselves (IDs, answers, solutions) do not change.
func TestWordProbTokenizerKeys(t *testing.T) {
	plain := newWordProbT(t, map[string]any{"eval_n": 12, "eval_hard_n": 12})
	if _, ok := plain.Tokenizer().(CharTokenizer); !ok || plain.ChatTemplate().Name != ChatNone {
		t.Fatalf("default: %T, %q", plain.Tokenizer(), plain.ChatTemplate().Name)
	}
	q := newWordProbT(t, map[string]any{"eval_n": 12, "eval_hard_n": 12, "tokenizer": qwen3Dir})
	if q.ChatTemplate().Name != ChatQwen3 || q.ChatTemplate().EnableThinking {
		t.Fatalf("auto template: %+v", q.ChatTemplate())
	}
	tok := q.Tokenizer()
	if tok.VocabSize() != 151669 || tok.BOS() != -1 {
		t.Fatalf("vocab %d, bos %d", tok.VocabSize(), tok.BOS())
	}
	if id, _ := tok.(*chatTokenizer).TokenToID("<|im_end|>"); tok.EOS() != id || tok.PAD() != 151643 {
		t.Fatalf("eos %d (want %d), pad %d", tok.EOS(), id, tok.PAD())
	}
	for si, set := range q.EvalSets() {
		for i, p := range set.Problems {
			want := plain.EvalSets()[si].Problems[i]
			if p.ID != want.ID || p.Answer != want.Answer || p.Solution != want.Solution {
				t.Fatalf("%s: the template changed the problem", p.ID)
			}
			wantPrompt := "<|im_start|>user\n" + strings.TrimSuffix(want.Prompt, "\n") + "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
			if p.Prompt != wantPrompt {
				t.Fatalf("prompt %q, want %q", p.Prompt, wantPrompt)
			}
			if got := tok.Decode(tok.Encode(p.Prompt)); got != p.Prompt {
				t.Fatalf("round trip %q", got)
			}
		}
	}
	train := q.SampleTrain(rand.New(rand.NewPCG(3, 3)), 20)
	plainTrain := plain.SampleTrain(rand.New(rand.NewPCG(3, 3)), 20)
	for i, p := range train {
		if p.ID != plainTrain[i].ID || p.Solution != plainTrain[i].Solution || !strings.HasPrefix(p.Prompt, "<|im_start|>user\n") {
			t.Fatalf("train %d: %+v against %+v", i, p, plainTrain[i])
		}
	}

	think := newWordProbT(t, map[string]any{"eval_n": 12, "eval_hard_n": 12, "tokenizer": qwen3Dir, "enable_thinking": true})
	if p := think.EvalSets()[0].Problems[0].Prompt; !strings.HasSuffix(p, "<|im_end|>\n<|im_start|>assistant\n") {
		t.Errorf("enable_thinking: %q", p)
	}
	cm := newWordProbT(t, map[string]any{"eval_n": 12, "eval_hard_n": 12, "chat_template": "chatml"})
	if p := cm.EvalSets()[0].Problems[0].Prompt; !strings.HasPrefix(p, "<|im_start|>user\n") || !strings.HasSuffix(p, "<|im_start|>assistant\n") {
		t.Errorf("chatml with char: %q", p)
	}
	none := newWordProbT(t, map[string]any{"eval_n": 12, "eval_hard_n": 12, "tokenizer": qwen3Dir, "chat_template": "none"})
	if none.EvalSets()[0].Problems[0].Prompt != plain.EvalSets()[0].Problems[0].Prompt {
		t.Errorf("none with the Qwen3 tokenizer: %q", none.EvalSets()[0].Problems[0].Prompt)
	}
	eos := newWordProbT(t, map[string]any{"eval_n": 12, "eval_hard_n": 12, "tokenizer": qwen3Dir, "eos_token": "<|endoftext|>"})
	if eos.Tokenizer().EOS() != 151643 {
		t.Errorf("eos_token: %d", eos.Tokenizer().EOS())
	}

	// TokenizerOf (serve) reads the same keys without building the task.
	tk, tpl, err := TokenizerOf(map[string]any{"name": "wordprob", "tokenizer": qwen3Dir})
	if err != nil || tpl.Name != ChatQwen3 || tpl.EnableThinking || tk.VocabSize() != 151669 || tk.EOS() != tok.EOS() {
		t.Errorf("TokenizerOf: %v, %+v, %v", tk, tpl, err)
	}
	if tk, tpl, err := TokenizerOf(map[string]any{"name": "wordprob"}); err != nil || tpl.Name != ChatNone || tk.VocabSize() != NewCharTokenizer().VocabSize() {
		t.Errorf("TokenizerOf char: %+v, %v", tpl, err)
	}

	for _, c := range []struct {
		m    map[string]any
		want string
	}{
		{map[string]any{"chat_template": "llama3"}, "config: task.chat_template: llama3 writes a BOS token"},
		{map[string]any{"chat_template": "vicuna"}, `config: task.chat_template: unknown chat template "vicuna"`},
		{map[string]any{"eos_token": "x"}, "config: task.eos_token: the character tokenizer"},
		{map[string]any{"enable_thinking": true}, "config: task.enable_thinking: true needs Qwen3's thinking switch"},
		{map[string]any{"tokenizer": qwen3Dir, "eos_token": "<|nope|>"}, `config: task.eos_token: "<|nope|>" is not a token`},
		{map[string]any{"tokenizer": ""}, "config: task.tokenizer: want \"char\" or a model directory"},
		{map[string]any{"tokenizer": t.TempDir()}, "config: task.tokenizer: open "},
	} {
		task, err := New(core.NewParams("task", mergeMaps(map[string]any{"name": "wordprob"}, c.m)))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || task != nil {
			t.Errorf("%v: %v, %v; want an error starting %q", c.m, task, err, c.want)
		}
	}
}
