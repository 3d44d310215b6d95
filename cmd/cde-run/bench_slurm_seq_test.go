package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// slurmSeqBench is bench/sequential_test.go's tiny sequential bench on
// Slurm, with a third arm: both claims are on a metric no run logs, so
// they stay inconclusive after look 1 and stage 2 runs; b is in no claim.
const slurmSeqBench = `
base_eval: true
executor: {name: slurm, parallel: 2, poll: 200ms, retries: 2}
base:
  seed: 1
  task: {name: arith, levels: [1], eval_n: 4, eval_sets: [{name: l1, level: 1}]}
  model: {layers: 1, d_model: 16, heads: 2, max_len: 48, checkpoint: auto}
  backend: {engine: go}
  rollout: {n: 4, max_response_tokens: 12}
  train: {steps: 1, prompts_per_step: 2, checkpoint_every: 1}
  eval: {every: 0, k: 2, at_start: false}
  pretrain: {seed: 1, steps: 2, batch_size: 8, eval_every: 2, eval_k: 1, eval_max_problems: 4}
seeds: [1, 2, 3]
arms:
  - {name: a, config: {algorithm: {name: grpo}}}
  - {name: b, config: {algorithm: {name: grpo}}}
  - {name: c, config: {algorithm: {name: rloo}}}
claims:
  - {name: "a beats c", better: a, than: c, metric: no/such/metric}
  - {name: "a beats the base", better: a, than: base, metric: no/such/metric}
`

// A sequential bench (--until-conclusive --max-seeds 5 --stage-seeds 2,
// seeds [1, 2, 3]) on a real one-node Slurm: stage 1 submits every arm at
// seeds 1-3; both claims stay inconclusive, so stage 2 submits only the
// claims' arms (a, c, and the base evaluations) at seeds 4 and 5, and b
// (in no claim) gets no seed 4 or 5, neither a job nor a run. Every
// arm-seed is submitted once, its array task numbered as over the whole
// plan (the worker trained what was submitted: each has its DONE).
// verdicts.json has the sequential entries of look 2. The same command
// again submits and trains nothing and gives the same verdicts.json.
func TestBenchSlurmSequential(t *testing.T) {
	env := slurmCluster(t)
	work := t.TempDir()
	spec := filepath.Join(work, "seq.yaml")
	writeFile(t, spec, slurmSeqBench)
	out := filepath.Join(work, "out")
	bench := func() string {
		t.Helper()
		cmd := exec.Command(cdeRun, "bench", "-c", spec, "--out", out, "--executor", "slurm",
			"--until-conclusive", "--max-seeds", "5", "--stage-seeds", "2")
		cmd.Env, cmd.Dir = env, work
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("bench: %v\n%s", err, buf.String())
			}
		case <-time.After(5 * time.Minute):
			cmd.Process.Kill()
			<-done
			t.Fatalf("bench did not finish in 5 minutes:\n%s", buf.String())
		}
		return buf.String()
	}

	start := time.Now()
	log1 := bench()
	t.Logf("first run: %s", time.Since(start).Round(time.Millisecond))
	for _, want := range []string{"stage 1 of at most 2: every arm at seeds 1, 2, 3", "stage 2 of at most 2: ",
		"2 of 2 look(s) taken (seeds 3, 5); 0 of 2 claim(s) decided; the last look is taken"} {
		if !strings.Contains(log1, want) {
			t.Errorf("output lacks %q:\n%s", want, log1)
		}
	}
	if i := strings.Index(log1, "stage 2 of at most 2: "); i >= 0 {
		line, _, _ := strings.Cut(log1[i:], "\n")
		if strings.Contains(line, " b,") || strings.Contains(line, ", b ") || !strings.Contains(line, "at seeds 1, 2, 3, 4, 5") {
			t.Errorf("stage 2: %q; want the claims' arms (not b) at seeds 1-5", line)
		}
	}
	if n := strings.Count(log1, "submitted job array"); n != 2 {
		t.Errorf("%d job arrays submitted, want 2 (one per stage):\n%s", n, log1)
	}

	rec := readSlurmRec(t, out)
	// One job per arm-seed the stages trained: a and c at seeds 1-5, b
	// at 1-3 only.
	want := map[string]bool{}
	for _, arm := range []string{"a", "c"} {
		for s := 1; s <= 5; s++ {
			want[arm+"/seed-"+string(rune('0'+s))] = true
		}
	}
	for s := 1; s <= 3; s++ {
		want["b/seed-"+string(rune('0'+s))] = true
	}
	for k := range want {
		task, ok := rec.Tasks[k]
		if !ok {
			t.Errorf("%s: no Slurm job recorded", k)
			continue
		}
		if task.Attempts != 1 {
			t.Errorf("%s: %d submissions, want 1", k, task.Attempts)
		}
	}
	for k := range rec.Tasks {
		if !want[k] {
			t.Errorf("%s: a Slurm job for an arm-seed the plan does not train at its stage", k)
		}
	}
	// Array task numbers count over the whole plan, distinct per arm-seed.
	seen := map[int]string{}
	for k, task := range rec.Tasks {
		if o, dup := seen[task.Index]; dup {
			t.Errorf("array task %d is both %s and %s", task.Index, o, k)
		}
		seen[task.Index] = k
	}
	if rec.Base == nil {
		t.Errorf("no base job recorded")
	} else if rec.Base.Attempts != 1 {
		// Stage 2's base job (evaluations of seeds 4 and 5) is new work,
		// not a retry of stage 1's, which finished: counting it as one
		// would spend the retries of a bench whose base job never failed.
		t.Errorf("base job %s: %d submission(s) counted, want 1 (a new stage's base job has its own retries)", rec.Base.ID, rec.Base.Attempts)
	}
	for _, r := range []struct {
		run  string
		done bool
	}{
		{"a/seed-4", true}, {"a/seed-5", true}, {"c/seed-4", true}, {"c/seed-5", true},
		{"base/seed-4", true}, {"base/seed-5", true}, {"b/seed-3", true}, {"b/seed-4", false}, {"b/seed-5", false},
	} {
		_, err := os.Stat(filepath.Join(out, "runs", r.run, "DONE"))
		if (err == nil) != r.done {
			t.Errorf("%s: DONE %v, want %v", r.run, err == nil, r.done)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "runs", "b", "seed-4")); err == nil {
		t.Errorf("b seed 4 has a run directory though b is in no claim")
	}

	first, err := os.ReadFile(filepath.Join(out, "verdicts.json"))
	if err != nil {
		t.Fatal(err)
	}
	var vs []struct {
		Claim       string   `json:"claim"`
		Seeds       []uint64 `json:"seeds"`
		VerdictHolm string   `json:"verdict_holm"`
		Sequential  *struct {
			Look         int  `json:"look"`
			Decided      bool `json:"decided"`
			SeedsPlanned int  `json:"seeds_planned"`
		} `json:"sequential"`
	}
	if err := json.Unmarshal(first, &vs); err != nil || len(vs) != 2 {
		t.Fatalf("verdicts.json: %v\n%s", err, first)
	}
	for _, v := range vs {
		if sq := v.Sequential; sq == nil || sq.Look != 2 || sq.Decided || sq.SeedsPlanned != 5 || v.VerdictHolm != "inconclusive" {
			t.Errorf("%s: sequential %+v, verdict after Holm %q; want look 2 of 5 seeds, not decided, inconclusive", v.Claim, sq, v.VerdictHolm)
		}
	}

	// The same command again: nothing submitted or trained, same verdicts.
	jobs1, _ := os.ReadFile(filepath.Join(out, "slurm-jobs.json"))
	start = time.Now()
	log2 := bench()
	t.Logf("rerun: %s", time.Since(start).Round(time.Millisecond))
	if strings.Contains(log2, "submitted") || strings.Contains(log2, ": starting") || strings.Contains(log2, "stage 2 of") {
		t.Errorf("the rerun submitted or trained something:\n%s", log2)
	}
	if jobs2, _ := os.ReadFile(filepath.Join(out, "slurm-jobs.json")); !bytes.Equal(jobs1, jobs2) {
		t.Errorf("slurm-jobs.json changed on the rerun:\n%s\n%s", jobs1, jobs2)
	}
	if again, _ := os.ReadFile(filepath.Join(out, "verdicts.json")); !bytes.Equal(again, first) {
		t.Errorf("verdicts.json changed on the rerun:\n%s\n%s", first, again)
	}
}
