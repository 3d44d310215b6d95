package trainer

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
)

func metricRows(t *testing.T, run string) []map[string]float64 {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(run, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]float64
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var row map[string]float64
		if err := json.Unmarshal([]byte(l), &row); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, row)
	}
	return rows
}

// With eval.at_start false the run evaluates at every eval.every step but
// not before its first step.
func TestEvalAtStartOff(t *testing.T) {
	cfg := fakeConfig(t, 4, 2)
	cfg.Eval.Every, cfg.Eval.AtStart = 2, false
	tr := fakeTrainer(t, cfg, &fakeBackend{})
	if err := tr.Run(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	var evalSteps []int
	for _, row := range metricRows(t, tr.RunDir) {
		if _, ok := row["val/v/avg@4"]; ok {
			evalSteps = append(evalSteps, int(row["step"]))
		}
	}
	if len(evalSteps) != 2 || evalSteps[0] != 2 || evalSteps[1] != 4 {
		t.Fatalf("evaluations at steps %v, want [2 4]", evalSteps)
	}
}

func binom(n, k int) float64 {
	if k < 0 || k > n {
		return 0
	}
	r := 1.0
	for i := 1; i <= k; i++ {
		r = r * float64(n-k+i) / float64(i)
	}
	return r
}

// Evaluate reports pass@1, pass@2 and pass@4 of k = 4 samples, equal to
// 1 - C(n-c, j)/C(n, j) from the correct count c it wrote to the details
// file, and the mean over sets.
func TestEvaluateCurveAndDetails(t *testing.T) {
	cfg := fakeConfig(t, 1, 1)
	cfg.Eval.K = 4
	tr := fakeTrainer(t, cfg, &fakeBackend{})
	for seed := range uint64(40) {
		tr.Cfg.Seed = seed
		m := map[string]float64{}
		if err := tr.Evaluate(7, m); err != nil {
			t.Fatal(err)
		}
		d, err := ReadEvalDetail(EvalDetailPath(tr.RunDir, "v", 7))
		if err != nil {
			t.Fatal(err)
		}
		if d.N != 4 || len(d.Correct) != 1 || d.Problems[0] != "a" {
			t.Fatalf("details %+v", d)
		}
		c := d.Correct[0]
		for _, j := range []int{1, 2, 4} {
			want := 1 - binom(4-c, j)/binom(4, j)
			for _, key := range []string{"val/v/pass@" + string(rune('0'+j)), "val/mean/pass@" + string(rune('0'+j))} {
				if got, ok := m[key]; !ok || math.Abs(got-want) > 1e-12 {
					t.Fatalf("seed %d, c = %d: %s = %v (present %v), want %v", seed, c, key, got, ok, want)
				}
			}
		}
		if m["val/v/avg@4"] != float64(c)/4 {
			t.Fatalf("avg@4 %v with c = %d", m["val/v/avg@4"], c)
		}
		if c > 0 && c < 4 {
			return // a case with 0 < c < n was seen: the curve is not trivial
		}
	}
	t.Fatal("no seed gave 0 < c < 4: the test never checked a non-trivial curve")
}

// criticAlgo is meanAlgo with a critic.
type criticAlgo struct{ meanAlgo }

func (criticAlgo) NeedsCritic() bool { return true }

// train.critic_warmup: 2 of 4 steps update only the critic.
func TestCriticWarmup(t *testing.T) {
	cfg := fakeConfig(t, 4, 4)
	cfg.Train.CriticWarmup = 2
	be := &fakeBackend{}
	tr := fakeTrainer(t, cfg, be)
	tr.Algo = criticAlgo{}
	if err := tr.Run(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if be.updates != 2 {
		t.Errorf("%d actor updates, want 2", be.updates)
	}
	critic := 0
	for _, c := range be.calls {
		if c == "critic" {
			critic++
		}
	}
	if critic != 4 {
		t.Errorf("%d critic updates, want 4", critic)
	}
	for _, row := range metricRows(t, tr.RunDir) {
		s := int(row["step"])
		if s >= 4 {
			continue
		}
		if want := map[bool]float64{true: 0, false: 1}[s < 2]; row["actor/updated"] != want {
			t.Errorf("step %d: actor/updated %v, want %v", s, row["actor/updated"], want)
		}
	}
	tr2 := fakeTrainer(t, cfg, &fakeBackend{})
	if err := tr2.Run(context.Background(), 0); err == nil || !strings.Contains(err.Error(), "train.critic_warmup = 2: the run has no critic") {
		t.Errorf("warm-up without a critic: %v", err)
	}
}

// eval.set_k: set "a" at k = 1 and set "b" at eval.k = 4. Each set's keys
// carry its own k, its details file its own n; val/mean/avg@4 is the mean
// of the two sets' avg (a's avg@1 with b's avg@4), val/mean/pass@1 the
// mean over both sets, val/mean/pass@2 and @4 are b's alone (the sets
// evaluated with k >= j). Expected values come from the correct counts in
// the details files, by the formula 1 - C(n-c, j)/C(n, j).
func TestEvaluatePerSetK(t *testing.T) {
	cfg := fakeConfig(t, 1, 1)
	cfg.Eval.K, cfg.Eval.SetK = 4, map[string]int{"a": 1}
	tr := fakeTrainer(t, cfg, &fakeBackend{})
	probs := []core.Problem{{ID: "p", Prompt: "1", Answer: "1"}, {ID: "q", Prompt: "2", Answer: "2"}}
	tr.Task = listTask{evals: []core.EvalSet{{Name: "a", Problems: probs}, {Name: "b", Problems: probs}}}
	m := map[string]float64{}
	if err := tr.Evaluate(3, m); err != nil {
		t.Fatal(err)
	}
	pass := func(set string, j int) float64 {
		d, err := ReadEvalDetail(EvalDetailPath(tr.RunDir, set, 3))
		if err != nil {
			t.Fatal(err)
		}
		if d.N != map[string]int{"a": 1, "b": 4}[set] {
			t.Fatalf("set %s: details n = %d", set, d.N)
		}
		s := 0.0
		for _, c := range d.Correct {
			s += 1 - binom(d.N-c, j)/binom(d.N, j)
		}
		return s / float64(len(d.Correct))
	}
	hat := func(set string, j int) float64 {
		d, _ := ReadEvalDetail(EvalDetailPath(tr.RunDir, set, 3))
		s := 0.0
		for _, c := range d.Correct {
			s += binom(c, j) / binom(d.N, j)
		}
		return s / float64(len(d.Correct))
	}
	want := map[string]float64{
		"val/a/pass^1": hat("a", 1), "val/b/pass^1": hat("b", 1), "val/b/pass^2": hat("b", 2), "val/b/pass^4": hat("b", 4),
		"val/mean/pass^1": (hat("a", 1) + hat("b", 1)) / 2, "val/mean/pass^2": hat("b", 2), "val/mean/pass^4": hat("b", 4),
		"val/a/avg@1": pass("a", 1), "val/a/pass@1": pass("a", 1),
		"val/b/avg@4": pass("b", 1), "val/b/pass@1": pass("b", 1), "val/b/pass@2": pass("b", 2), "val/b/pass@4": pass("b", 4),
		"val/mean/avg@4": (pass("a", 1) + pass("b", 1)) / 2, "val/mean/pass@1": (pass("a", 1) + pass("b", 1)) / 2,
		"val/mean/pass@2": pass("b", 2), "val/mean/pass@4": pass("b", 4),
	}
	for k, v := range want {
		if got, ok := m[k]; !ok || math.Abs(got-v) > 1e-12 {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	if len(m) != len(want) {
		t.Errorf("keys %v, want exactly %v", m, want)
	}
	tr.Cfg.Eval.SetK = map[string]int{"c": 2}
	if err := tr.Evaluate(3, map[string]float64{}); err == nil || !strings.Contains(err.Error(), `eval.set_k.c: unknown eval set "c" (the task has: a, b)`) {
		t.Errorf("an unknown set in eval.set_k: %v", err)
	}
}

// eval.set_k is checked when the config loads.
func TestEvalSetKConfig(t *testing.T) {
	c, err := LoadConfig(LoadOptions{Env: []string{}, Sets: []string{"eval.set_k={math: 1, aime24: 16}"}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Eval.KFor("math") != 1 || c.Eval.KFor("aime24") != 16 || c.Eval.KFor("other") != 4 {
		t.Errorf("set_k %v", c.Eval.SetK)
	}
	for _, bad := range []string{"eval.set_k={math: 0}", "eval.set_k={math: 1.5}", "eval.set_k=[1]", "eval.set_k={math: x}"} {
		if _, err := LoadConfig(LoadOptions{Env: []string{}, Sets: []string{bad}}); err == nil || !strings.Contains(err.Error(), "eval.set_k") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

// keyedVerifier names answers: the response itself.
type keyedVerifier struct{ fakeVerifier }

func (keyedVerifier) AnswerKey(p core.Problem, response string) string { return response }

type keyedTask struct{ listTask }

func (keyedTask) Verifier() core.Verifier { return keyedVerifier{} }

// With a verifier that names answers, Evaluate records every sample's
// answer and correctness, and val/<set>/maj@j is majority voting over the
// first j of them: checked against a vote counted here by a separate loop
// over the recorded samples (a tie to the earlier first appearance).
func TestEvaluateMajAtK(t *testing.T) {
	cfg := fakeConfig(t, 1, 1)
	cfg.Eval.K = 8
	tr := fakeTrainer(t, cfg, &fakeBackend{})
	var probs []core.Problem
	for i := range 6 {
		d := strconv.Itoa(i)
		probs = append(probs, core.Problem{ID: d, Prompt: d, Answer: d})
	}
	tr.Task = keyedTask{listTask{evals: []core.EvalSet{{Name: "v", Problems: probs}}}}
	m := map[string]float64{}
	if err := tr.Evaluate(2, m); err != nil {
		t.Fatal(err)
	}
	d, err := ReadEvalDetail(EvalDetailPath(tr.RunDir, "v", 2))
	if err != nil || len(d.Keys) != 6 || len(d.Answers[0]) != 8 || len(d.Hits[0]) != 8 {
		t.Fatalf("details %+v %v", d, err)
	}
	varied := false
	for _, j := range []int{1, 2, 4, 8} {
		right := 0
		for i := range d.Problems {
			votes := make([]int, len(d.Keys[i]))
			winner := -1
			for s := range j {
				if a := d.Answers[i][s]; a >= 0 {
					votes[a]++
				}
			}
			for a := range votes { // keys are in order of first appearance
				if votes[a] > 0 && (winner < 0 || votes[a] > votes[winner]) {
					winner = a
				}
			}
			if winner >= 0 {
				for s := range j {
					if d.Answers[i][s] == winner {
						if d.Hits[i][s] == '1' {
							right++
						}
						break
					}
				}
			}
			varied = varied || len(d.Keys[i]) > 1
		}
		want := float64(right) / float64(len(d.Problems))
		if got, ok := m["val/v/maj@"+strconv.Itoa(j)]; !ok || math.Abs(got-want) > 1e-15 || m["val/mean/maj@"+strconv.Itoa(j)] != got {
			t.Errorf("maj@%d = %v (present %v), want %v", j, got, ok, want)
		}
	}
	// distinct@8 from the recorded samples: the distinct answers of the
	// correct samples (the keyed verifier tells no solutions apart, so its
	// answers serve).
	total := 0
	for i := range d.Problems {
		seen := map[int]bool{}
		for s, a := range d.Answers[i] {
			if d.Hits[i][s] == '1' && a >= 0 {
				seen[a] = true
			}
		}
		if d.Distinct[i] != len(seen) {
			t.Errorf("problem %d: distinct %d, want %d", i, d.Distinct[i], len(seen))
		}
		total += len(seen)
	}
	if got := m["val/v/distinct@8"]; math.Abs(got-float64(total)/6) > 1e-15 || m["val/mean/distinct@8"] != got {
		t.Errorf("distinct@8 = %v, want %v", got, float64(total)/6)
	}
	if !varied || !strings.Contains(strings.Join(d.Hits, ""), "1") {
		t.Error("every problem's samples gave one answer, or none was right: the vote was never tested")
	}
}

// eval.max_rows: a set of 5 problems x 2 samples with at most 4 rows at
// once goes through in chunks of 2, 2 and 1 problems; every problem is
// evaluated once, in order, and the first chunk draws as the unchunked
// evaluation does (the fake backend answers each prompt in order from the
// seed, so its first two problems' counts must match).
func TestEvalMaxRowsChunks(t *testing.T) {
	var probs []core.Problem
	for i := range 5 {
		d := strconv.Itoa(i)
		probs = append(probs, core.Problem{ID: "q" + d, Prompt: d, Answer: d})
	}
	run := func(maxRows int) EvalDetail {
		cfg := fakeConfig(t, 1, 1)
		cfg.Eval.K, cfg.Eval.MaxRows = 2, maxRows
		tr := fakeTrainer(t, cfg, &fakeBackend{})
		tr.Task = listTask{evals: []core.EvalSet{{Name: "v", Problems: probs}}}
		m := map[string]float64{}
		if err := tr.Evaluate(1, m); err != nil {
			t.Fatal(err)
		}
		d, err := ReadEvalDetail(EvalDetailPath(tr.RunDir, "v", 1))
		if err != nil {
			t.Fatal(err)
		}
		sum := 0
		for _, c := range d.Correct {
			sum += c
		}
		if got := m["val/v/avg@2"]; math.Abs(got-float64(sum)/10) > 1e-15 {
			t.Errorf("max_rows %d: avg@2 %v, details sum %d", maxRows, got, sum)
		}
		return d
	}
	whole, chunked := run(1000), run(4)
	if strings.Join(chunked.Problems, ",") != "q0,q1,q2,q3,q4" || len(chunked.Correct) != 5 {
		t.Fatalf("chunked details %+v", chunked)
	}
	if chunked.Correct[0] != whole.Correct[0] || chunked.Correct[1] != whole.Correct[1] {
		t.Errorf("first chunk %v, unchunked %v", chunked.Correct[:2], whole.Correct[:2])
	}
	if c := (EvalConfig{MaxRows: 16384}); c.EvalChunk(256) != 64 || c.EvalChunk(64) != 256 || c.EvalChunk(1<<20) != 1 {
		t.Errorf("EvalChunk: %d %d %d", c.EvalChunk(256), c.EvalChunk(64), c.EvalChunk(1<<20))
	}
}

// solvedVerifier names answers and solutions: "sol:" + the response.
type solvedVerifier struct{ keyedVerifier }

func (solvedVerifier) SolutionKey(p core.Problem, response string) string { return "sol:" + response }

type solvedTask struct{ listTask }

func (solvedTask) Verifier() core.Verifier { return solvedVerifier{} }

// A training rollout carries each response's answer key and, for a correct
// response only, its solution key (rare_correct clusters by it).
func TestRolloutSolutionKeys(t *testing.T) {
	cfg := fakeConfig(t, 1, 1)
	tr := fakeTrainer(t, cfg, &fakeBackend{})
	var probs []core.Problem
	for i := range 4 {
		d := strconv.Itoa(i)
		probs = append(probs, core.Problem{ID: d, Prompt: d, Answer: d})
	}
	tr.Task = solvedTask{listTask{evals: []core.EvalSet{{Name: "v", Problems: probs}}}}
	r, _, err := tr.rollout(0, probs, 16, 1, 7, core.Needs{}, nil, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	correct := 0
	for i, s := range r.Seqs {
		wantSol := ""
		if s.Correct {
			wantSol = "sol:" + s.Text
			correct++
		}
		if s.AnswerKey != s.Text || s.SolutionKey != wantSol {
			t.Errorf("seq %d (%q, correct %v): answer key %q, solution key %q", i, s.Text, s.Correct, s.AnswerKey, s.SolutionKey)
		}
	}
	if correct == 0 || correct == len(r.Seqs) {
		t.Errorf("%d of %d correct: the batch does not test both kinds", correct, len(r.Seqs))
	}
}
