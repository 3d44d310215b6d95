package trainer

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
)

// scriptTask asks the same prompts every step; every answer is "1".
type scriptTask struct{ fakeTask }

func (scriptTask) SampleTrain(rng *rand.Rand, n int) []core.Problem {
	out := make([]core.Problem, n)
	for i := range out {
		out[i] = core.Problem{ID: strconv.Itoa(i), Prompt: "p" + strconv.Itoa(i), Answer: "1"}
	}
	return out
}

// scriptBackend answers its i-th generation call with batches[i mod len].
type scriptBackend struct {
	fakeBackend
	batches    [][]core.Generation
	call       int
	lastUpdate *core.Rollout
}

func (b *scriptBackend) Generate(req core.GenerateRequest) ([]core.Generation, error) {
	out := b.batches[b.call%len(b.batches)]
	b.call++
	return out, nil
}

// scripted is a response: its text's bytes as tokens, then EOS unless
// truncated; every token's log-prob is -nll (perplexity e^nll); one
// entropy per token.
func scripted(text string, nll float64, truncated bool, ents ...float64) core.Generation {
	toks := fakeTok{}.Encode(text)
	if !truncated {
		toks = append(toks, fakeTok{}.EOS())
	}
	if len(ents) != len(toks) {
		panic("one entropy per token")
	}
	lps := make([]float64, len(toks))
	for i := range lps {
		lps[i] = -nll
	}
	return core.Generation{Tokens: toks, Truncated: truncated, LogProbs: lps, Entropies: ents}
}

// independentMetrics computes the generation metrics of responses to
// prompts whose answer is "1" straight from the generations, without
// GenerationMetrics: the check the worked numbers are checked against.
func independentMetrics(gens []core.Generation) map[string]float64 {
	var acc, length, trunc, ent, entN, ppl float64
	var pc, pi []float64
	for _, g := range gens {
		correct := fakeTok{}.Decode(g.Tokens) == "1"
		nll := 0.0
		for _, lp := range g.LogProbs {
			nll -= lp
		}
		p := math.Exp(nll / float64(len(g.LogProbs)))
		ppl += p
		if correct {
			acc++
			pc = append(pc, p)
		} else {
			pi = append(pi, p)
		}
		length += float64(len(g.Tokens))
		if g.Truncated {
			trunc++
		}
		for _, e := range g.Entropies {
			ent += e
			entN++
		}
	}
	n := float64(len(gens))
	m := map[string]float64{"reward/mean": acc / n, "reward/acc": acc / n, "response/length_mean": length / n,
		"response/truncated_frac": trunc / n, "actor/ppl": ppl / n, "rollout/entropy": ent / entN}
	if len(pc) > 0 {
		m["calib/ppl_correct"] = core.Mean(pc)
	}
	if len(pi) > 0 {
		m["calib/ppl_incorrect"] = core.Mean(pi)
	}
	if len(pc) > 0 && len(pi) > 0 {
		wins := 0.0
		for _, c := range pc {
			for _, i := range pi {
				switch {
				case c < i:
					wins++
				case c == i:
					wins += 0.5
				}
			}
		}
		m["calib/auroc"] = wins / float64(len(pc)*len(pi))
	}
	return m
}

func closeTo(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }

// A dynamic-sampling step of 2 prompts x 2 responses with no extra batch
// allowed. Group 0 answers "1" (right) and "7"; group 1 answers "555"
// (truncated) and "9", both wrong, so it is dropped and the step trains on
// group 0 alone. Worked by hand:
//
//	                         kept (group 0)       every response generated
//	reward/acc, reward/mean  1/2                  1/4
//	response/length_mean     (2+2)/2 = 2          (2+2+3+2)/4 = 2.25
//	response/truncated_frac  0                    1/4
//	rollout/entropy          (.2+.4+.6+.8)/4=.5   (2 + 1+1.2+1.4 + 1.6+1.8)/9 = 1
//	calib/ppl_correct        e^.1                 e^.1
//	calib/ppl_incorrect      e^.5                 (e^.5 + e + e^.05)/3
//	calib/auroc              1                    2/3 (e^.1 < e^.5, e; > e^.05)
//	actor/ppl                (e^.1 + e^.5)/2      (e^.1 + e^.5 + e + e^.05)/4
//
// The plain names carry the right column, kept/<name> the left; the
// batch's own metrics (reward/shaped_mean) keep their names. Every step
// generated 4 responses, so the totals are 4, then 8.
func TestStepRolloutMetricsOverGenerated(t *testing.T) {
	batch := []core.Generation{
		scripted("1", 0.1, false, 0.2, 0.4),
		scripted("7", 0.5, false, 0.6, 0.8),
		scripted("555", 1.0, true, 1.0, 1.2, 1.4),
		scripted("9", 0.05, false, 1.6, 1.8),
	}
	cfg, err := LoadConfig(LoadOptions{Env: []string{}, Sets: []string{"train.steps=2", "train.prompts_per_step=2", "rollout.n=2",
		"eval.every=0", "train.dynamic_sampling.enabled=true", "train.dynamic_sampling.max_extra_batches=0"}})
	if err != nil {
		t.Fatal(err)
	}
	be := &scriptBackend{batches: [][]core.Generation{batch}}
	tr := &Trainer{Cfg: cfg, Task: scriptTask{}, Backend: be, Algo: meanAlgo{}, RunDir: t.TempDir()}
	m := map[string]float64{}
	if err := tr.Step(0, m); err != nil {
		t.Fatal(err)
	}
	e := math.E
	kept := map[string]float64{"reward/acc": 0.5, "reward/mean": 0.5, "response/length_mean": 2, "response/truncated_frac": 0,
		"rollout/entropy": 0.5, "calib/ppl_correct": math.Exp(0.1), "calib/ppl_incorrect": math.Exp(0.5), "calib/auroc": 1,
		"actor/ppl": (math.Exp(0.1) + math.Exp(0.5)) / 2}
	all := map[string]float64{"reward/acc": 0.25, "reward/mean": 0.25, "response/length_mean": 2.25, "response/truncated_frac": 0.25,
		"rollout/entropy": 1, "calib/ppl_correct": math.Exp(0.1), "calib/ppl_incorrect": (math.Exp(0.5) + e + math.Exp(0.05)) / 3,
		"calib/auroc": 2.0 / 3, "actor/ppl": (math.Exp(0.1) + math.Exp(0.5) + e + math.Exp(0.05)) / 4}
	indKept, indAll := independentMetrics(batch[:2]), independentMetrics(batch)
	for _, k := range GenerationMetricNames {
		if !closeTo(indKept[k], kept[k]) || !closeTo(indAll[k], all[k]) {
			t.Errorf("%s: worked by hand kept %v all %v; the independent loop %v, %v", k, kept[k], all[k], indKept[k], indAll[k])
		}
		if got, ok := m[k]; !ok || !closeTo(got, all[k]) {
			t.Errorf("%s = %v (logged %v), want %v over every response generated", k, got, ok, all[k])
		}
		if got, ok := m[KeptPrefix+k]; !ok || !closeTo(got, kept[k]) {
			t.Errorf("%s%s = %v (logged %v), want %v over the kept group", KeptPrefix, k, got, ok, kept[k])
		}
	}
	// The batch trained on: group 0 alone; rewards 1, 0 unshaped.
	if len(be.r().Seqs) != 2 || m["reward/shaped_mean"] != 0.5 {
		t.Errorf("trained on %d responses, reward/shaped_mean %v: want group 0's 2, 0.5", len(be.r().Seqs), m["reward/shaped_mean"])
	}
	if _, ok := m[KeptPrefix+"reward/shaped_mean"]; ok {
		t.Errorf("kept/reward/shaped_mean logged: reward/shaped_mean is the batch's already")
	}
	for k, want := range map[string]float64{"train/generated_responses": 4, "train/generated_responses_total": 4,
		"train/kept_groups": 1, "train/dropped_groups": 1, "train/extra_batches": 0} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v", k, m[k], want)
		}
	}
	m = map[string]float64{}
	if err := tr.Step(1, m); err != nil {
		t.Fatal(err)
	}
	if m["train/generated_responses"] != 4 || m["train/generated_responses_total"] != 8 {
		t.Errorf("step 1: generated %v, total %v; want 4, 8", m["train/generated_responses"], m["train/generated_responses_total"])
	}

	// Without dynamic sampling the batch is everything generated: the
	// plain names are over all four responses, and nothing is kept/.
	cfg.Train.DynamicSampling.Enabled = false
	tr = &Trainer{Cfg: cfg, Task: scriptTask{}, Backend: &scriptBackend{batches: [][]core.Generation{batch}}, Algo: meanAlgo{}, RunDir: t.TempDir()}
	m = map[string]float64{}
	if err := tr.Step(0, m); err != nil {
		t.Fatal(err)
	}
	for _, k := range GenerationMetricNames {
		if !closeTo(m[k], all[k]) {
			t.Errorf("without dynamic sampling: %s = %v, want %v", k, m[k], all[k])
		}
	}
	for k := range m {
		if strings.HasPrefix(k, KeptPrefix) {
			t.Errorf("without dynamic sampling: %s logged", k)
		}
	}
	if m["train/generated_responses"] != 4 || m["train/generated_responses_total"] != 4 {
		t.Errorf("without dynamic sampling: generated %v, total %v; want 4, 4", m["train/generated_responses"], m["train/generated_responses_total"])
	}
}

// r is the batch of the last actor update.
func (b *scriptBackend) r() *core.Rollout { return b.lastUpdate }

func (b *scriptBackend) UpdateActor(r *core.Rollout, u core.ActorUpdate) (map[string]float64, error) {
	b.lastUpdate = r
	return b.fakeBackend.UpdateActor(r, u)
}

// Two batches drawn (one extra allowed): batch 0 as in
// TestStepRolloutMetricsOverGenerated (group 0 kept, group 1 dropped), batch
// 1 with both groups varied, of which the first is kept (2 prompts per
// step) and the second goes unused. All 8 responses count as generated and
// in the plain metrics; the kept ones are batch 0's group 0 and batch 1's
// group 0.
func TestStepGeneratedOverExtraBatches(t *testing.T) {
	b0 := []core.Generation{
		scripted("1", 0.1, false, 0.2, 0.4),
		scripted("7", 0.5, false, 0.6, 0.8),
		scripted("555", 1.0, true, 1.0, 1.2, 1.4),
		scripted("9", 0.05, false, 1.6, 1.8),
	}
	b1 := []core.Generation{
		scripted("1", 0.3, false, 0.1, 0.1),
		scripted("22", 0.7, false, 0.3, 0.5, 0.7),
		scripted("3", 0.2, false, 2, 2),
		scripted("1", 0.4, false, 0.9, 0.3),
	}
	cfg, err := LoadConfig(LoadOptions{Env: []string{}, Sets: []string{"train.steps=1", "train.prompts_per_step=2", "rollout.n=2",
		"eval.every=0", "train.dynamic_sampling.enabled=true", "train.dynamic_sampling.max_extra_batches=1"}})
	if err != nil {
		t.Fatal(err)
	}
	be := &scriptBackend{batches: [][]core.Generation{b0, b1}}
	tr := &Trainer{Cfg: cfg, Task: scriptTask{}, Backend: be, Algo: meanAlgo{}, RunDir: t.TempDir()}
	m := map[string]float64{}
	if err := tr.Step(0, m); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]float64{"train/generated_responses": 8, "train/generated_responses_total": 8,
		"train/kept_groups": 2, "train/dropped_groups": 1, "train/extra_batches": 1} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v", k, m[k], want)
		}
	}
	all := independentMetrics(append(append([]core.Generation{}, b0...), b1...))
	kept := independentMetrics([]core.Generation{b0[0], b0[1], b1[0], b1[1]})
	// By hand: entropy (9 + 0.2 + 1.5 + 4 + 1.2)/18 over all 18 tokens,
	// (2 + 0.2 + 1.5)/9 over the kept 9.
	if !closeTo(all["rollout/entropy"], 15.9/18) || !closeTo(kept["rollout/entropy"], 3.7/9) {
		t.Fatalf("independent entropies %v, %v", all["rollout/entropy"], kept["rollout/entropy"])
	}
	for _, k := range GenerationMetricNames {
		if !closeTo(m[k], all[k]) || !closeTo(m[KeptPrefix+k], kept[k]) {
			t.Errorf("%s: %v all, %v kept; want %v, %v", k, m[k], m[KeptPrefix+k], all[k], kept[k])
		}
	}
}

// train/generated_responses_total survives a resume: a dynamic-sampling
// run's every row has total = the sum of train/generated_responses up to
// it, each (1 + train/extra_batches) x 4; resumed from step 4's checkpoint
// the rows after it are the same, whether the checkpoint recorded the
// total, or predates it (rebuilt from the rows kept), or the rows predate
// train/generated_responses too (rebuilt from train/extra_batches).
func TestGeneratedTotalResume(t *testing.T) {
	cfg, err := LoadConfig(LoadOptions{Env: []string{}, Sets: []string{"train.steps=6", "train.checkpoint_every=2",
		"train.keep_checkpoints=5", "train.prompts_per_step=2", "rollout.n=2", "eval.every=0",
		"train.dynamic_sampling.enabled=true", "train.dynamic_sampling.max_extra_batches=3"}})
	if err != nil {
		t.Fatal(err)
	}
	tr := fakeTrainer(t, cfg, &fakeBackend{})
	if err := tr.Run(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	readRows := func() []map[string]float64 {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(tr.RunDir, "metrics.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		var rows []map[string]float64
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var row map[string]float64
			if err := json.Unmarshal([]byte(line), &row); err != nil {
				t.Fatal(err)
			}
			if _, ok := row["train/generated_responses"]; ok {
				rows = append(rows, row)
			}
		}
		return rows
	}
	rows := readRows()
	if len(rows) != 6 {
		t.Fatalf("%d training rows, want 6", len(rows))
	}
	sum, extra := 0.0, 0.0
	var totals []float64
	for i, row := range rows {
		if row["train/generated_responses"] != (1+row["train/extra_batches"])*4 {
			t.Errorf("step %d: generated %v with %v extra batches", i, row["train/generated_responses"], row["train/extra_batches"])
		}
		sum += row["train/generated_responses"]
		extra += row["train/extra_batches"]
		if row["train/generated_responses_total"] != sum {
			t.Errorf("step %d: total %v, want %v", i, row["train/generated_responses_total"], sum)
		}
		totals = append(totals, sum)
	}
	if extra == 0 {
		t.Fatal("no step drew an extra batch: the totals do not test dynamic sampling")
	}
	dir := filepath.Join(checkpointRoot(tr.RunDir), "step-000004")
	stateOf := func() map[string]any {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(dir, "state.json"))
		if err != nil {
			t.Fatal(err)
		}
		var st map[string]any
		if err := json.Unmarshal(data, &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	if got := stateOf()["generated_responses"]; got != totals[3] {
		t.Fatalf("step-4 checkpoint: generated_responses %v, want %v (the total after step 3)", got, totals[3])
	}
	resume := func(what string) {
		t.Helper()
		tr2 := fakeTrainer(t, cfg, &fakeBackend{})
		tr2.RunDir = tr.RunDir
		start, err := tr2.Restore(dir)
		if err != nil || start != 4 {
			t.Fatalf("%s: restored step %d (%v)", what, start, err)
		}
		if err := tr2.Run(context.Background(), start); err != nil {
			t.Fatal(err)
		}
		got := readRows()
		if len(got) != 6 {
			t.Fatalf("%s: %d training rows after the resume", what, len(got))
		}
		for i := 4; i < 6; i++ {
			if got[i]["train/generated_responses_total"] != totals[i] {
				t.Errorf("%s: step %d: total %v, want %v as before", what, i, got[i]["train/generated_responses_total"], totals[i])
			}
		}
	}
	resume("checkpoint with the total")

	// A checkpoint from before the total: the state without it, the
	// manifest rewritten to match.
	st := stateOf()
	delete(st, "generated_responses")
	data, _ := json.Marshal(st)
	if err := os.WriteFile(filepath.Join(dir, "state.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteManifest(dir, 4); err != nil {
		t.Fatal(err)
	}
	resume("checkpoint without the total")

	// And rows from before train/generated_responses: only
	// train/extra_batches says how many batches a step drew.
	path := filepath.Join(tr.RunDir, "metrics.jsonl")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var row map[string]any
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatal(err)
		}
		delete(row, "train/generated_responses")
		delete(row, "train/generated_responses_total")
		out, _ := json.Marshal(row)
		lines = append(lines, string(out))
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	st = stateOf()
	delete(st, "generated_responses")
	data, _ = json.Marshal(st)
	if err := os.WriteFile(filepath.Join(dir, "state.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteManifest(dir, 4); err != nil {
		t.Fatal(err)
	}
	tr2 := fakeTrainer(t, cfg, &fakeBackend{})
	tr2.RunDir = tr.RunDir
	start, err := tr2.Restore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr2.Run(context.Background(), start); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(path)
	var after []map[string]float64
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var row map[string]float64
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatal(err)
		}
		if _, ok := row["train/extra_batches"]; ok {
			after = append(after, row)
		}
	}
	for i := 4; i < 6; i++ {
		if after[i]["train/generated_responses_total"] != totals[i] {
			t.Errorf("rows without train/generated_responses: step %d: total %v, want %v", i, after[i]["train/generated_responses_total"], totals[i])
		}
	}
}

// Without dynamic sampling every step generates prompts_per_step x n
// responses: totals 4, 8, 12, and an interrupted run's checkpoint records
// what the steps before it generated.
func TestGeneratedTotalPlain(t *testing.T) {
	tr := fakeTrainer(t, fakeConfig(t, 3, 100), &fakeBackend{})
	if err := tr.Run(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(tr.RunDir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var totals []float64
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var row map[string]float64
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatal(err)
		}
		if v, ok := row["train/generated_responses_total"]; ok {
			if row["train/generated_responses"] != 4 {
				t.Errorf("step %v: generated %v, want 4", row["step"], row["train/generated_responses"])
			}
			totals = append(totals, v)
		}
	}
	if len(totals) != 3 || totals[0] != 4 || totals[1] != 8 || totals[2] != 12 {
		t.Errorf("totals %v, want 4 8 12", totals)
	}
	var st CheckpointState
	raw, err := os.ReadFile(filepath.Join(checkpointRoot(tr.RunDir), "step-000003", "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &st); err != nil || st.GeneratedResponses == nil || *st.GeneratedResponses != 12 {
		t.Errorf("step-3 checkpoint: generated_responses %v (%v), want 12", st.GeneratedResponses, err)
	}
}
