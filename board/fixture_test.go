package board

import (
	"bufio"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/bench"
	"github.com/cde-rl/cde/trainer"
)

// testSpecYAML is the bench file of the synthetic benches the tests make:
// real arm configs (the report validates them), runs written by the test.
const testSpecYAML = `description: a synthetic bench of cde-run board's tests
base:
  seed: 1
  task: {name: arith, levels: [1, 2], eval_n: 8, eval_sets: [{name: l1, level: 1}, {name: l2, level: 2}]}
  model: {layers: 1, d_model: 16, heads: 2, max_len: 48, checkpoint: ""}
  backend: {engine: go}
  rollout: {n: 4, temperature: 1.0, max_response_tokens: 12}
  train: {steps: 40, prompts_per_step: 4}
  eval: {every: 20, k: 4}
seeds: [1, 2, 3]
arms:
  - {name: grpo, config: {algorithm: {name: grpo}}}
  - {name: grpo_ppl, config: {algorithm: {name: grpo}, strategies: [{name: ppl}]}}
  - {name: ppo, config: {algorithm: {name: ppo}}}
claims:
  - {name: "PPL bonus helps GRPO", better: grpo_ppl, than: grpo, metric: val/mean/avg@4}
  - {name: "PPO beats GRPO on train accuracy", better: ppo, than: grpo, metric: reward/acc, window: 5}
  - {name: "PPL bonus keeps entropy up", better: grpo_ppl, than: grpo, metric: rollout/entropy}
`

const (
	testSteps = 40
	testEvery = 20
)

// testSpec parses testSpecYAML under the name file (its stem names the
// bench).
func testSpec(t testing.TB, file string) *bench.Spec {
	t.Helper()
	spec, err := bench.ParseSpec([]byte(testSpecYAML), file)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// noise is a deterministic value in [-1, 1) from its arguments.
func noise(args ...any) float64 {
	h := fnv.New64a()
	fmt.Fprint(h, args...)
	return float64(h.Sum64()%20000)/10000 - 1
}

var armLift = map[string]float64{"grpo": 0, "grpo_ppl": 0.04, "ppo": 0.02, "base": -0.05}

// testRow is arm-seed's metrics row at step (eval rows at multiples of
// testEvery and at testSteps, the final one alone).
func testRow(arm string, seed uint64, step int) map[string]any {
	row := map[string]any{"step": step}
	lift := armLift[arm]
	if step < testSteps {
		acc := 0.2 + 0.008*float64(step) + lift + 0.05*noise(arm, seed, step, "acc")
		row["reward/acc"] = math.Round(acc*64) / 64
		row["rollout/entropy"] = 0.9 - 0.01*float64(step) + lift + 0.03*noise(arm, seed, step, "ent")
		row["actor/loss"] = 0.1 * noise(arm, seed, step, "loss")
		row["perf/step_s"] = 0.25 + 0.01*noise(arm, seed, step, "perf")
		row["calib/ppl_correct"] = nil // a null, as the trainer writes when a batch has none
	}
	if step%testEvery == 0 || step == testSteps {
		var mean [4]float64
		for _, set := range []string{"l1", "l2"} {
			base := 0.3 + 0.006*float64(step) + lift + 0.03*noise(arm, seed, step, set)
			if set == "l2" {
				base -= 0.15
			}
			for i, k := range []int{1, 2, 4} {
				p := 1 - math.Pow(1-base, float64(k))
				row[fmt.Sprintf("val/%s/pass@%d", set, k)] = p
				mean[i] += p / 2
			}
			row[fmt.Sprintf("val/%s/avg@4", set)] = base
			mean[3] += base / 2
		}
		for i, k := range []int{1, 2, 4} {
			row[fmt.Sprintf("val/mean/pass@%d", k)] = mean[i]
		}
		row["val/mean/avg@4"] = mean[3]
	}
	return row
}

// armSeed is one synthetic arm-seed's run directory, written step by step.
type armSeed struct {
	dir  string
	arm  string
	seed uint64
	next int // the next step to write
	lock *trainer.RunDir
}

func newArmSeed(t testing.TB, benchDir, arm string, seed uint64) *armSeed {
	t.Helper()
	return newRun(t, bench.RunDir(benchDir, arm, seed), arm, seed)
}

// newRun makes a run directory with a config.yaml of testSteps steps; its
// rows are arm-seed's.
func newRun(t testing.TB, dir, arm string, seed uint64) *armSeed {
	t.Helper()
	a := &armSeed{dir: dir, arm: arm, seed: seed}
	if err := os.MkdirAll(a.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("train:\n    steps: %d\nalgorithm:\n    name: %s\n", testSteps, arm)
	if err := os.WriteFile(filepath.Join(a.dir, "config.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return a
}

// writeTo appends the rows up to step (inclusive; testSteps writes the
// final evaluation too).
func (a *armSeed) writeTo(t testing.TB, step int) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(a.dir, "metrics.jsonl"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for ; a.next <= step; a.next++ {
		line, _ := json.Marshal(testRow(a.arm, a.seed, a.next))
		w.Write(append(line, '\n'))
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// finish writes every row and DONE, and lets the lock go.
func (a *armSeed) finish(t testing.TB) {
	t.Helper()
	a.writeTo(t, testSteps)
	data, _ := json.Marshal(map[string]any{"finished": time.Now().UTC().Format(time.RFC3339), "seconds": 10 + 2*noise(a.arm, a.seed)})
	if err := os.WriteFile(filepath.Join(a.dir, bench.DoneFile), append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	a.unlock()
}

// hold takes the run directory's lock, as a training cde-run does.
func (a *armSeed) hold(t testing.TB) {
	t.Helper()
	d, err := trainer.LockDir(a.dir)
	if err != nil {
		t.Fatal(err)
	}
	a.lock = d
	t.Cleanup(a.unlock)
}

func (a *armSeed) unlock() {
	if a.lock != nil {
		a.lock.Close()
		a.lock = nil
	}
}

// age sets the run's files' times d in the past (a run that stopped).
func (a *armSeed) age(t testing.TB, d time.Duration) {
	t.Helper()
	old := time.Now().Add(-d)
	for _, f := range []string{"metrics.jsonl", "config.yaml"} {
		if err := os.Chtimes(filepath.Join(a.dir, f), old, old); err != nil {
			t.Fatal(err)
		}
	}
}

// finishedBench makes a bench in dir whose every arm-seed is done, and
// writes its report (results.csv, verdicts.json) with package bench.
func finishedBench(t testing.TB, dir string) *bench.Spec {
	t.Helper()
	spec := testSpec(t, "done.yaml")
	for _, seed := range spec.Seeds {
		for _, arm := range spec.Arms {
			newArmSeed(t, dir, arm.Name, seed).finish(t)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "commands.txt"), []byte("cde-run bench -c done.yaml --out done\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := bench.Report(spec, bench.Options{Dir: dir, Command: "cde-run bench -c done.yaml --out done", Log: zerolog.Nop()}); err != nil {
		t.Fatal(err)
	}
	return spec
}

// liveBench makes a bench in dir as one is while it trains: seed 1 and
// ppo seed 2 done, grpo seed 2 running (its lock held, at step 15),
// grpo_ppl seed 2 failed an hour ago (its reason recorded), seed 3 not started; the bench's own
// lock held. It returns the running arm-seed.
func liveBench(t testing.TB, dir string) (*bench.Spec, *armSeed) {
	t.Helper()
	spec := testSpec(t, "live.yaml")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := trainer.LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close() })
	if err := os.WriteFile(filepath.Join(dir, "commands.txt"), []byte("cde-run bench -c live.yaml --out live --jobs 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, arm := range spec.Arms {
		newArmSeed(t, dir, arm.Name, 1).finish(t)
	}
	newArmSeed(t, dir, "ppo", 2).finish(t)
	run := newArmSeed(t, dir, "grpo", 2)
	run.hold(t)
	run.writeTo(t, 15)
	failed := newArmSeed(t, dir, "grpo_ppl", 2)
	failed.writeTo(t, 7)
	if err := os.WriteFile(filepath.Join(failed.dir, "bench-time.json"), []byte(`{"finished":"","seconds":3}`), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := `{"failed":"2026-11-28T09:12:40Z","error":"cde-run train --resume runs/grpo_ppl/seed-2: exit status 1 (step 7: non-finite loss)","command":"cde-run bench -c live.yaml --out live --jobs 2"}`
	if err := os.WriteFile(filepath.Join(failed.dir, bench.FailedFile), []byte(rec+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	failed.age(t, time.Hour)
	return spec, run
}

// lastValues is the last value of every metric in a metrics.jsonl, the
// step it was logged at, and the last row's step.
func lastValues(t testing.TB, path string) (map[string]float64, map[string]float64, float64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	last, at := map[string]float64{}, map[string]float64{}
	var step float64
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var row map[string]*float64
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatal(err)
		}
		step = *row["step"]
		for k, v := range row {
			if v != nil {
				last[k], at[k] = *v, step
			}
		}
	}
	return last, at, step
}
