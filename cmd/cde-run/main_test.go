package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cdeRun is the cde-run binary built once for the tests.
var cdeRun string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cde-run-test")
	if err != nil {
		panic(err)
	}
	cdeRun = filepath.Join(dir, "cde-run")
	if out, err := exec.Command("go", "build", "-o", cdeRun, ".").CombinedOutput(); err != nil {
		panic("building cde-run: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// tinyConfig is a run small enough for tests: random initial weights (no
// pretraining), a one-layer model, few steps, small evals.
const tinyConfig = tinyBase + "train: {steps: 12, prompts_per_step: 4, actor_lr: 1.0e-3, checkpoint_every: 3}\n"

const tinyBase = `
seed: 3
task: {name: arith, levels: [1], eval_n: 8}
model: {layers: 1, d_model: 16, heads: 2, max_len: 48, checkpoint: ""}
backend: {engine: go}
rollout: {n: 4, temperature: 1.0, max_response_tokens: 12}
eval: {every: 4, k: 2}
`

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readMetrics(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var row map[string]any
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("%s: bad line %q: %v", path, sc.Text(), err)
		}
		for k := range row {
			if strings.HasPrefix(k, "perf/") {
				delete(row, k) // timings differ run to run
			}
		}
		rows = append(rows, row)
	}
	return rows
}

func run(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(cdeRun, args...)
	cmd.Env = append(os.Environ(), "GOMLX_NO_AUTO_INSTALL=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cde-run %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestKillAndResumeReproduces kills a run with SIGKILL after a checkpoint,
// resumes it, and checks the metrics equal an uninterrupted run's, step for
// step and bit for bit (every draw is seeded by (seed, step); weights and
// Adam state are restored exactly; the pure-Go engine is deterministic).
func TestKillAndResumeReproduces(t *testing.T) {
	if testing.Short() {
		t.Skip("trains twice")
	}
	tmp := t.TempDir()
	cfg := filepath.Join(tmp, "tiny.yaml")
	writeFile(t, cfg, tinyConfig)

	full := filepath.Join(tmp, "full")
	run(t, "train", "--config", cfg, "--run-dir", full)
	want := readMetrics(t, filepath.Join(full, "metrics.jsonl"))
	if len(want) != 13 { // steps 0..11 and the final eval at 12
		t.Fatalf("uninterrupted run wrote %d metric lines, want 13", len(want))
	}

	killed := filepath.Join(tmp, "killed")
	cmd := exec.Command(cdeRun, "train", "--config", cfg, "--run-dir", killed)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill once a checkpoint after step 3 exists (and before the end).
	killAtCheckpoint(t, cmd, killed, "a checkpoint after step 3", func(latest string) bool {
		return latest != "" && latest != "step-000003"
	})
	partial := readMetrics(t, filepath.Join(killed, "metrics.jsonl"))
	if len(partial) >= 13 {
		t.Fatalf("the run finished before it was killed (%d lines); the test proves nothing", len(partial))
	}

	out := run(t, "train", "--resume", killed)
	if !strings.Contains(out, "resuming") {
		t.Fatalf("resume did not say it resumed:\n%s", out)
	}
	sameMetrics(t, want, readMetrics(t, filepath.Join(killed, "metrics.jsonl")))
}

// TestConfigErrorsNameTheKey runs the CLI on bad configs.
func TestConfigErrorsNameTheKey(t *testing.T) {
	tmp := t.TempDir()
	cases := []struct{ name, yaml, want string }{
		{"unknown top key", "trian: {steps: 3}\n", "trian"},
		{"unknown nested key", "train: {stepz: 3}\n", "train.stepz"},
		{"wrong type", "train: {steps: many}\n", "train.steps"},
		{"out of range", "rollout: {temperature: 0}\n", "rollout.temperature"},
		{"unknown algorithm", "algorithm: {name: a2c}\n", "algorithm.name"},
		{"unknown engine", "backend: {engine: tpu}\n", "backend.engine"},
		{"bad task level", "task: {name: arith, levels: [9]}\n", "task.levels"},
		{"yaml syntax", "train: {steps: 3\n", "bad.yaml"},
		{"unknown eval set", "eval: {sets: [l1, l9]}\n", "eval.sets[1]"},
		{"eval sets not a list", "eval: {sets: l1}\n", "eval.sets"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := filepath.Join(tmp, "bad.yaml")
			writeFile(t, cfg, c.yaml)
			cmd := exec.Command(cdeRun, "train", "--config", cfg, "--run-dir", filepath.Join(tmp, "run"))
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("accepted a bad config:\n%s", out)
			}
			if !strings.Contains(string(out), c.want) {
				t.Fatalf("error does not name %q:\n%s", c.want, out)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	for _, c := range []string{"train", "pretrain", "eval", "shape", "board"} {
		out, err := exec.Command(cdeRun, c, "--help").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "usage: cde-run "+c) {
			t.Fatalf("%s --help: %v\n%s", c, err, out)
		}
	}
}

// TestInterruptCheckpoints sends SIGINT mid-run: the run writes a checkpoint
// of the last completed step, exits with 130, and resumes to the end.
func TestInterruptCheckpoints(t *testing.T) {
	tmp := t.TempDir()
	cfg := filepath.Join(tmp, "tiny.yaml")
	writeFile(t, cfg, tinyBase+"train: {steps: 40, prompts_per_step: 4, checkpoint_every: 100}\n")
	runDir := filepath.Join(tmp, "run")
	cmd := exec.Command(cdeRun, "train", "--config", cfg, "--run-dir", runDir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		rows := 0
		if data, err := os.ReadFile(filepath.Join(runDir, "metrics.jsonl")); err == nil {
			rows = strings.Count(string(data), "\n")
		}
		if rows >= 2 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("no progress within 2 minutes")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Fatalf("interrupted run exited with %v, want status 130", err)
	}
	data, err := os.ReadFile(filepath.Join(runDir, "checkpoints", "LATEST"))
	if err != nil {
		t.Fatalf("no checkpoint after the interrupt: %v", err)
	}
	if strings.TrimSpace(string(data)) == "step-000040" {
		t.Fatal("the run finished before the interrupt; the test proves nothing")
	}
	// It says how to go on.
	if want := "cde-run train --resume " + runDir; !strings.Contains(stderr.String(), want) {
		t.Errorf("the interrupted run does not print %q:\n%s", want, stderr.String())
	}
	run(t, "train", "--resume", runDir)
	if rows := readMetrics(t, filepath.Join(runDir, "metrics.jsonl")); len(rows) != 41 {
		t.Fatalf("%d metric lines after resume, want 41", len(rows))
	}
}

// TestResumeWithKL: the KL reference travels in checkpoints, so a run with
// kl_coef > 0 resumes to the same metrics as an uninterrupted one.
func TestResumeWithKL(t *testing.T) {
	tmp := t.TempDir()
	cfg := filepath.Join(tmp, "kl.yaml")
	writeFile(t, cfg, tinyBase+"train: {steps: 6, prompts_per_step: 4, actor_lr: 1.0e-3, checkpoint_every: 3, kl_coef: 0.1}\n")
	full := filepath.Join(tmp, "full")
	run(t, "train", "--config", cfg, "--run-dir", full)
	want := readMetrics(t, filepath.Join(full, "metrics.jsonl"))
	// Resume the same run from its step-3 checkpoint.
	part := filepath.Join(tmp, "part")
	run(t, "train", "--config", cfg, "--run-dir", part)
	writeFile(t, filepath.Join(part, "checkpoints", "LATEST"), "step-000003\n")
	os.RemoveAll(filepath.Join(part, "checkpoints", "step-000006"))
	run(t, "train", "--resume", part)
	sameMetrics(t, want, readMetrics(t, filepath.Join(part, "metrics.jsonl")))
	if _, ok := want[1]["actor/kl"]; !ok {
		t.Fatalf("actor/kl not reported: %v", want[1])
	}
}

// TestPretrainThenEval makes a (tiny) base with pretrain, trains from it by
// path, and evaluates the run's last checkpoint.
func TestPretrainThenEval(t *testing.T) {
	tmp := t.TempDir()
	cfg := filepath.Join(tmp, "tiny.yaml")
	writeFile(t, cfg, tinyBase+"train: {steps: 2, prompts_per_step: 4}\npretrain: {steps: 5, batch_size: 8, eval_every: 5, eval_k: 1, eval_max_problems: 4}\n")
	base := filepath.Join(tmp, "base")
	run(t, "pretrain", "--config", cfg, "--out", base)
	for _, f := range []string{"policy.gob", "pretrain.json"} {
		if _, err := os.Stat(filepath.Join(base, f)); err != nil {
			t.Fatal(err)
		}
	}
	runDir := filepath.Join(tmp, "run")
	out := run(t, "train", "--config", cfg, "--set", "model.checkpoint="+base, "--run-dir", runDir)
	if !strings.Contains(out, "loaded base policy") {
		t.Fatalf("train did not load the base:\n%s", out)
	}
	// Train ends with a sorted table: the final evaluation (the last row
	// of metrics.jsonl) and the last step's rewards, at a fixed precision
	// aligned on the decimal point.
	rows := readMetrics(t, filepath.Join(runDir, "metrics.jsonl"))
	final, last := rows[len(rows)-1], rows[len(rows)-2]
	table := summaryTable(t, out, "== train finished ==")
	if !strings.Contains(table, "run        "+runDir+"\n") {
		t.Fatalf("train summary does not say where the run is:\n%s", table)
	}
	// The run directory keeps the same table.
	if kept, err := os.ReadFile(filepath.Join(runDir, "summary.txt")); err != nil || !strings.Contains(out, string(kept)) ||
		!strings.Contains(string(kept), "== train finished ==") {
		t.Fatalf("RUN/summary.txt (%v):\n%s", err, kept)
	}
	for _, c := range []struct {
		key string
		row map[string]any
	}{{"val/l1/avg@2", final}, {"val/mean/pass@2", final}, {"reward/acc", last}, {"reward/mean", last}} {
		checkSummaryValue(t, table, c.key, c.row[c.key].(float64))
	}
	var stderr strings.Builder
	cmd := exec.Command(cdeRun, "eval", "--run", runDir)
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("eval: %v", err)
	}
	var res struct {
		Checkpoint string             `json:"checkpoint"`
		Metrics    map[string]float64 `json:"metrics"`
	}
	if err := json.Unmarshal(stdout, &res); err != nil {
		t.Fatalf("eval output is not JSON: %v\n%s", err, stdout)
	}
	if !strings.HasSuffix(res.Checkpoint, "step-000002") {
		t.Fatalf("evaluated %q, want the last checkpoint", res.Checkpoint)
	}
	if _, ok := res.Metrics["val/l1/avg@2"]; !ok {
		t.Fatalf("no val/l1/avg@2 in %v", res.Metrics)
	}
	table = summaryTable(t, stderr.String(), "== eval finished ==")
	if len(summaryLines(table)) != len(res.Metrics) {
		t.Errorf("eval summary has %d metrics, the JSON %d:\n%s", len(summaryLines(table)), len(res.Metrics), table)
	}
	for k, v := range res.Metrics {
		checkSummaryValue(t, table, k, v)
	}
	// A second pretrain into the same directory refuses to overwrite it.
	if out, err := exec.Command(cdeRun, "pretrain", "--config", cfg, "--out", base).CombinedOutput(); err == nil || !strings.Contains(string(out), "already exists") {
		t.Fatalf("pretrain over an existing base: %v\n%s", err, out)
	}
}

// summaryTable is the part of out after title (the summary a command
// ends with).
func summaryTable(t *testing.T, out, title string) string {
	t.Helper()
	_, table, ok := strings.Cut(out, title+"\n")
	if !ok {
		t.Fatalf("no %q in the output:\n%s", title, out)
	}
	return table
}

// summaryLines are the metric lines of a summary table, name to value, in
// order; the names must be sorted.
func summaryLines(table string) map[string]string {
	_, metrics, _ := strings.Cut(table, "\nmetric ")
	out := map[string]string{}
	for _, l := range strings.Split(metrics, "\n")[1:] {
		if f := strings.Fields(l); len(f) == 2 {
			out[f[0]] = f[1]
		}
	}
	return out
}

// checkSummaryValue checks that the table shows key with v to 4
// significant digits, and that its names are sorted.
func checkSummaryValue(t *testing.T, table, key string, v float64) {
	t.Helper()
	// A fixed precision: an integer as is, 4 decimals in [1e-4, 1e6),
	// else 4 significant digits with an exponent.
	want := fmt.Sprintf("%.3e", v)
	switch a := math.Abs(v); {
	case v == math.Trunc(v):
		want = strconv.FormatFloat(v, 'f', -1, 64)
	case a >= 1e-4 && a < 1e6:
		want = fmt.Sprintf("%.4f", v)
	}
	if got := summaryLines(table)[key]; got != want {
		t.Errorf("summary shows %s = %q, want %q:\n%s", key, got, want, table)
	}
	_, metrics, _ := strings.Cut(table, "\nmetric ")
	var names []string
	for _, l := range strings.Split(metrics, "\n")[1:] {
		if f := strings.Fields(l); len(f) == 2 {
			names = append(names, f[0])
		}
	}
	if !slices.IsSorted(names) {
		t.Errorf("summary metrics not sorted: %v", names)
	}
}

// killAtCheckpoint SIGKILLs the train started as cmd in run directory run
// once its LATEST checkpoint satisfies ok (what names it in the failure
// after 2 minutes without).
func killAtCheckpoint(t *testing.T, cmd *exec.Cmd, run, what string, ok func(latest string) bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		data, _ := os.ReadFile(filepath.Join(run, "checkpoints", "LATEST"))
		if ok(strings.TrimSpace(string(data))) {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no %s within 2 minutes", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
}
