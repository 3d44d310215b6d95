package tasks

import (
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
)

func newArith(t *testing.T, m map[string]any) *Arith {
	t.Helper()
	if m == nil {
		m = map[string]any{}
	}
	m["name"] = "arith"
	task, err := New(core.NewParams("task", m))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return task.(*Arith)
}

// parsePrompt splits "x op y=" into its operands.
func parsePrompt(t *testing.T, prompt string) (x string, op byte, y string) {
	t.Helper()
	body, ok := strings.CutSuffix(prompt, "=")
	i := strings.IndexAny(body[1:], "+-") + 1
	if !ok || i < 1 {
		t.Fatalf("bad prompt %q", prompt)
	}
	return body[:i], body[i], body[i+1:]
}

func TestArithProblem(t *testing.T) {
	cases := []struct {
		level, x int
		op       byte
		y        int
		want     core.Problem
	}{
		{2, 47, '+', 38, core.Problem{ID: "arith/L2/47+38", Prompt: "47+38=", Answer: "85", Solution: "7+8=15\n4+3+1=8\nAnswer: 85", Level: 2}},
		{1, 3, '-', 8, core.Problem{ID: "arith/L1/3-8", Prompt: "3-8=", Answer: "-5", Solution: "3<8\n8-3=5\nAnswer: -5", Level: 1}},
		{1, 0, '+', 0, core.Problem{ID: "arith/L1/0+0", Prompt: "0+0=", Answer: "0", Solution: "0+0=0\nAnswer: 0", Level: 1}},
		{3, 500, '-', 123, core.Problem{ID: "arith/L3/500-123", Prompt: "500-123=", Answer: "377", Solution: "0-3+10=7\n0-2-1+10=7\n5-1-1=3\nAnswer: 377", Level: 3}},
		{2, 95, '+', 17, core.Problem{ID: "arith/L2/95+17", Prompt: "95+17=", Answer: "112", Solution: "5+7=12\n9+1+1=11\nAnswer: 112", Level: 2}},
		{3, 500, '-', 499, core.Problem{ID: "arith/L3/500-499", Prompt: "500-499=", Answer: "1", Solution: "0-9+10=1\n0-9-1+10=0\n5-4-1=0\nAnswer: 1", Level: 3}},
	}
	for _, c := range cases {
		if got := ArithProblem(c.level, c.x, c.op, c.y); got != c.want {
			t.Errorf("ArithProblem(%d, %d, %c, %d) = %+v, want %+v", c.level, c.x, c.op, c.y, got, c.want)
		}
	}
	// The reference solution verifies as correct.
	a := newArith(t, nil)
	for _, p := range a.SampleTrain(rand.New(rand.NewPCG(5, 5)), 100) {
		if r, ok := a.Verifier().Verify(p, p.Solution); !ok || r != 1 {
			t.Fatalf("solution %q of %q does not verify", p.Solution, p.Prompt)
		}
	}
}

func TestSplitOfIsFNV1a(t *testing.T) {
	// Independent FNV-1a 64 to pin the partition rule.
	fnv := func(s string) uint64 {
		h := uint64(14695981039346656037)
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= 1099511628211
		}
		return h
	}
	want := map[uint64]Split{0: SplitTest, 1: SplitVal}
	for x := range 10 {
		for y := range 10 {
			s := strconv.Itoa(x) + "+" + strconv.Itoa(y) + "="
			w, ok := want[fnv(s)%10]
			if !ok {
				w = SplitTrain
			}
			if got := SplitOf(s); got != w {
				t.Errorf("SplitOf(%q) = %v, want %v", s, got, w)
			}
		}
	}
}

func TestArithLevelsDigitCounts(t *testing.T) {
	for level := MinArithLevel; level <= MaxArithLevel; level++ {
		a := newArith(t, map[string]any{"levels": []any{level}, "eval_sets": []any{}})
		seen := map[string]bool{}
		for _, p := range a.SampleTrain(rand.New(rand.NewPCG(uint64(level), 0)), 500) {
			x, op, y := parsePrompt(t, p.Prompt)
			for _, v := range []string{x, y} {
				if len(v) != level || (level > 1 && v[0] == '0') {
					t.Fatalf("level %d: operand %q of %q has the wrong digit count", level, v, p.Prompt)
				}
			}
			xi, _ := strconv.Atoi(x)
			yi, _ := strconv.Atoi(y)
			want := xi + yi
			if op == '-' {
				want = xi - yi
			}
			if p.Answer != strconv.Itoa(want) || p.Level != level {
				t.Fatalf("%q: answer %q level %d", p.Prompt, p.Answer, p.Level)
			}
			seen[string(op)] = true
		}
		if !seen["+"] || !seen["-"] {
			t.Errorf("level %d: ops seen %v, want both", level, seen)
		}
	}
	// Level 1 reaches both ends of 0..9.
	a := newArith(t, map[string]any{"levels": []any{1}, "ops": "+"})
	digits := map[string]bool{}
	for _, p := range a.SampleTrain(rand.New(rand.NewPCG(9, 9)), 2000) {
		x, _, y := parsePrompt(t, p.Prompt)
		digits[x], digits[y] = true, true
	}
	if !digits["0"] || !digits["9"] || len(digits) != 10 {
		t.Errorf("level-1 operands seen %v, want 0..9", digits)
	}
}

func TestArithOpsConfig(t *testing.T) {
	a := newArith(t, map[string]any{"ops": "-"})
	for _, p := range a.SampleTrain(rand.New(rand.NewPCG(1, 1)), 200) {
		if _, op, _ := parsePrompt(t, p.Prompt); op != '-' {
			t.Fatalf("ops \"-\" produced %q", p.Prompt)
		}
	}
}

func TestArithDeterminism(t *testing.T) {
	a := newArith(t, nil)
	s1 := a.SampleTrain(rand.New(rand.NewPCG(42, 7)), 300)
	s2 := a.SampleTrain(rand.New(rand.NewPCG(42, 7)), 300)
	s3 := a.SampleTrain(rand.New(rand.NewPCG(43, 7)), 300)
	if !reflect.DeepEqual(s1, s2) {
		t.Error("same seed gave different samples")
	}
	if reflect.DeepEqual(s1, s3) {
		t.Error("different seeds gave the same samples")
	}
	if len(a.SampleTrain(rand.New(rand.NewPCG(1, 1)), 0)) != 0 {
		t.Error("n=0 should give no problems")
	}
}

func TestArithSplitsNeverOverlap(t *testing.T) {
	// Exhaustively for levels 1 and 2: the sampler covers exactly the train
	// prompts, held-out sets with a large n cover exactly the val/test
	// prompts, and the three are disjoint and cover everything.
	for _, level := range []int{1, 2} {
		a := newArith(t, map[string]any{
			"levels": []any{level},
			"eval_n": 100000,
			"eval_sets": []any{
				map[string]any{"name": "v", "level": level},
			},
		})
		all := map[string]Split{}
		lo, hi := operandRange(level)
		for _, op := range []byte("+-") {
			for x := lo; x <= hi; x++ {
				for y := lo; y <= hi; y++ {
					all[ArithProblem(level, x, op, y).Prompt] = SplitOf(ArithProblem(level, x, op, y).Prompt)
				}
			}
		}
		wantN := map[Split]int{}
		for _, s := range all {
			wantN[s]++
		}
		if wantN[SplitTrain] == 0 || wantN[SplitVal] == 0 || wantN[SplitTest] == 0 {
			t.Fatalf("level %d: empty split: %v", level, wantN)
		}
		check := func(what string, ps []core.Problem, split Split, exhaustive bool) {
			got := map[string]bool{}
			for _, p := range ps {
				if s, ok := all[p.Prompt]; !ok || s != split {
					t.Fatalf("level %d %s: %q is in split %v, want %v", level, what, p.Prompt, s, split)
				}
				got[p.Prompt] = true
			}
			if exhaustive && len(got) != wantN[split] {
				t.Errorf("level %d %s: covers %d distinct prompts, want all %d", level, what, len(got), wantN[split])
			}
		}
		samples := 30 * len(all)
		check("train", a.SampleTrain(rand.New(rand.NewPCG(3, uint64(level))), samples), SplitTrain, true)
		val := a.EvalSets()[0].Problems
		if len(val) != len(uniquePrompts(val)) {
			t.Errorf("level %d: val set has duplicates", level)
		}
		check("val", val, SplitVal, true)
		check("test", a.TestSet(level, 100000), SplitTest, true)
	}

	// Sampled, for every level with the default config's eval sets.
	a := newArith(t, map[string]any{"levels": []any{1, 2, 3, 4, 5, 6}})
	train := uniquePrompts(a.SampleTrain(rand.New(rand.NewPCG(11, 12)), 20000))
	held := map[string]string{}
	for _, e := range a.EvalSets() {
		for _, p := range e.Problems {
			held[p.Prompt] = e.Name
		}
	}
	for level := MinArithLevel; level <= MaxArithLevel; level++ {
		for _, p := range a.TestSet(level, 500) {
			if name, ok := held[p.Prompt]; ok {
				t.Fatalf("test prompt %q also in eval set %s", p.Prompt, name)
			}
			held[p.Prompt] = "test"
		}
	}
	for p := range train {
		if name, ok := held[p]; ok {
			t.Fatalf("train prompt %q also in %s", p, name)
		}
	}
}

func uniquePrompts(ps []core.Problem) map[string]bool {
	m := map[string]bool{}
	for _, p := range ps {
		m[p.Prompt] = true
	}
	return m
}

func TestArithEvalSets(t *testing.T) {
	a := newArith(t, nil)
	b := newArith(t, map[string]any{"levels": []any{2, 3}}) // training config does not matter
	if !reflect.DeepEqual(a.EvalSets(), b.EvalSets()) {
		t.Error("eval sets differ between two builds")
	}
	var names []string
	for _, e := range a.EvalSets() {
		names = append(names, e.Name)
		if len(uniquePrompts(e.Problems)) != len(e.Problems) {
			t.Errorf("%s: duplicate problems", e.Name)
		}
	}
	if got := strings.Join(names, ","); got != "l1,l2" {
		t.Errorf("default eval sets %s, want l1,l2", got)
	}
	sizes := []int{len(a.EvalSets()[0].Problems), len(a.EvalSets()[1].Problems)}
	if sizes[0] < 1 || sizes[0] > 128 || sizes[1] != 128 {
		t.Errorf("sizes %v, want l1 in 1..128 (all level-1 val), 128", sizes)
	}
	for i, level := range []int{1, 2} {
		for _, p := range a.EvalSets()[i].Problems {
			if p.Level != level || SplitOf(p.Prompt) != SplitVal {
				t.Fatalf("%s: %+v not a level-%d val problem", names[i], p, level)
			}
		}
	}
	// A val and a test set of the same level are disjoint; eval_n applies.
	c := newArith(t, map[string]any{"eval_n": 50, "eval_sets": []any{
		map[string]any{"name": "v3", "level": 3, "split": "val"},
		map[string]any{"name": "t3", "level": 3, "split": "test"},
	}})
	v, te := c.EvalSets()[0].Problems, c.EvalSets()[1].Problems
	if len(v) != 50 || len(te) != 50 {
		t.Fatalf("sizes %d, %d; want 50, 50", len(v), len(te))
	}
	vp := uniquePrompts(v)
	for _, p := range te {
		if vp[p.Prompt] || SplitOf(p.Prompt) != SplitTest {
			t.Fatalf("test problem %q overlaps val or is not test", p.Prompt)
		}
	}
	if !reflect.DeepEqual(te, c.TestSet(3, 50)) {
		t.Error("TestSet(3, 50) differs from the configured test eval set")
	}
	if c.TestSet(0, 5) != nil || c.TestSet(7, 5) != nil || c.TestSet(1, 0) != nil {
		t.Error("TestSet with a bad level or n should be nil")
	}
}

func TestArithConfigErrors(t *testing.T) {
	cases := []struct {
		name string
		m    map[string]any
		want string // substring of the error
	}{
		{"unknown key", map[string]any{"levls": []any{1}}, "task.levls: unknown key"},
		{"level too high", map[string]any{"levels": []any{1, 7}}, "task.levels: level 7 out of range"},
		{"level zero", map[string]any{"levels": []any{0}}, "task.levels: level 0 out of range"},
		{"levels empty", map[string]any{"levels": []any{}}, "task.levels: must list"},
		{"levels not ints", map[string]any{"levels": []any{"a"}}, "task.levels: item 0: want an integer"},
		{"levels fraction", map[string]any{"levels": []any{1.5}}, "task.levels: item 0: want an integer"},
		{"bad op", map[string]any{"ops": "+*"}, `task.ops: unknown operator '*'`},
		{"empty ops", map[string]any{"ops": ""}, "task.ops: must name"},
		{"duplicate op", map[string]any{"ops": "++"}, "task.ops: operator '+' listed twice"},
		{"eval_n zero", map[string]any{"eval_n": 0}, "task.eval_n: must be >= 1"},
		{"eval_n string", map[string]any{"eval_n": "x"}, "task.eval_n: want an integer"},
		{"reward type", map[string]any{"correct_reward": "high"}, "task.correct_reward: want a number"},
		{"eval_sets not list", map[string]any{"eval_sets": "l1"}, "task.eval_sets: want a list"},
		{"eval set not map", map[string]any{"eval_sets": []any{1}}, "task.eval_sets: item 0: want a mapping"},
		{"unknown split", map[string]any{"eval_sets": []any{map[string]any{"name": "x", "level": 1, "split": "train"}}}, `task.eval_sets[0].split: unknown value "train"`},
		{"eval level", map[string]any{"eval_sets": []any{map[string]any{"name": "x", "level": 9}}}, "task.eval_sets[0].level: level 9 out of range"},
		{"eval level missing", map[string]any{"eval_sets": []any{map[string]any{"name": "x"}}}, "task.eval_sets[0].level: required"},
		{"eval name missing", map[string]any{"eval_sets": []any{map[string]any{"level": 1}}}, "task.eval_sets[0].name: required"},
		{"eval dup name", map[string]any{"eval_sets": []any{map[string]any{"name": "a", "level": 1}, map[string]any{"name": "a", "level": 2}}}, `task.eval_sets[1].name: duplicate`},
		{"eval unknown key", map[string]any{"eval_sets": []any{map[string]any{"name": "a", "level": 1, "size": 3}}}, "task.eval_sets[0].size: unknown key"},
	}
	for _, c := range cases {
		c.m["name"] = "arith"
		_, err := New(core.NewParams("task", c.m))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to contain %q", c.name, err, c.want)
		}
	}
}

func TestArithCustomRewards(t *testing.T) {
	a := newArith(t, map[string]any{"correct_reward": 1, "incorrect_reward": 0.0})
	p := ArithProblem(1, 2, '+', 2)
	if r, _ := a.Verifier().Verify(p, "Answer: 5"); r != 0 {
		t.Errorf("incorrect reward %v, want 0", r)
	}
}
