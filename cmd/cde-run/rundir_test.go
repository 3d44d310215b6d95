package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cdeRunEnv runs cde-run with extra environment variables and returns its
// combined output and error.
func cdeRunEnv(env []string, args ...string) (string, error) {
	cmd := exec.Command(cdeRun, args...)
	cmd.Env = append(append(os.Environ(), "GOMLX_NO_AUTO_INSTALL=1"), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func sameMetrics(t *testing.T, want, got []map[string]any) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d metric lines, want %d", len(got), len(want))
	}
	for i := range want {
		a, _ := json.Marshal(want[i])
		b, _ := json.Marshal(got[i])
		if string(a) != string(b) {
			t.Fatalf("line %d differs:\nuninterrupted %s\nresumed       %s", i, a, b)
		}
	}
}

// TestKillDuringCheckpoint kills the run with SIGKILL at chosen instants of
// writing the step-6 checkpoint (files written; manifest written; moved into
// place; LATEST updated). Each time the resume continues from the newest
// complete checkpoint and ends with the uninterrupted run's metrics, bit
// for bit.
func TestKillDuringCheckpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("trains several times")
	}
	tmp := t.TempDir()
	cfg := filepath.Join(tmp, "tiny.yaml")
	writeFile(t, cfg, tinyConfig)
	full := filepath.Join(tmp, "full")
	run(t, "train", "--config", cfg, "--run-dir", full)
	want := readMetrics(t, filepath.Join(full, "metrics.jsonl"))
	for _, c := range []struct{ point, from string }{
		{"checkpoint.files:6", "step-000003"},
		{"checkpoint.manifest:6", "step-000003"},
		{"checkpoint.installed:6", "step-000006"},
		{"checkpoint.latest:6", "step-000006"},
	} {
		t.Run(c.point, func(t *testing.T) {
			dir := filepath.Join(tmp, strings.ReplaceAll(c.point, ":", "-"))
			out, err := cdeRunEnv([]string{"CDE_TEST_KILL_AT=" + c.point}, "train", "--config", cfg, "--run-dir", dir)
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("the run was not killed at %s: %v\n%s", c.point, err, out)
			}
			out = run(t, "train", "--resume", dir)
			if !strings.Contains(out, c.from) {
				t.Fatalf("resume did not continue from %s:\n%s", c.from, out)
			}
			sameMetrics(t, want, readMetrics(t, filepath.Join(dir, "metrics.jsonl")))
		})
	}
}

// Two trainings cannot share a run directory: the second is refused at
// once naming the first's pid, and the first finishes with every row.
func TestRunDirectoryIsLocked(t *testing.T) {
	tmp := t.TempDir()
	cfg := filepath.Join(tmp, "tiny.yaml")
	writeFile(t, cfg, tinyBase+"train: {steps: 30, prompts_per_step: 4, checkpoint_every: 5}\n")
	dir := filepath.Join(tmp, "run")
	first := exec.Command(cdeRun, "train", "--config", cfg, "--run-dir", dir)
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer first.Process.Kill()
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(filepath.Join(dir, "config.yaml")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first run did not start within a minute")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, args := range [][]string{
		{"train", "--config", cfg, "--run-dir", dir},
		{"train", "--config", cfg, "--run-dir", dir, "--overwrite"},
		{"train", "--resume", dir},
	} {
		out, err := cdeRunEnv(nil, args...)
		if err == nil || !strings.Contains(out, "used by another cde-run (pid ") {
			t.Fatalf("cde-run %s while another run holds the directory: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if err := first.Wait(); err != nil {
		t.Fatalf("the first run failed: %v", err)
	}
	if rows := readMetrics(t, filepath.Join(dir, "metrics.jsonl")); len(rows) != 31 {
		t.Fatalf("the first run has %d metric rows, want 31", len(rows))
	}
}

// A directory that holds a run is refused without --resume or --overwrite
// and keeps its data; --overwrite starts afresh.
func TestRunDirectoryReuse(t *testing.T) {
	tmp := t.TempDir()
	cfg := filepath.Join(tmp, "tiny.yaml")
	writeFile(t, cfg, tinyBase+"train: {steps: 4, prompts_per_step: 4, checkpoint_every: 2}\n")
	dir := filepath.Join(tmp, "run")
	run(t, "train", "--config", cfg, "--run-dir", dir)
	before, _ := os.ReadFile(filepath.Join(dir, "metrics.jsonl"))
	out, err := cdeRunEnv(nil, "train", "--config", cfg, "--set", "algorithm.name=ppo", "--run-dir", dir)
	if err == nil || !strings.Contains(out, "already holds a run") {
		t.Fatalf("reusing a run directory: %v\n%s", err, out)
	}
	after, _ := os.ReadFile(filepath.Join(dir, "metrics.jsonl"))
	if string(before) != string(after) {
		t.Fatal("the refused run changed metrics.jsonl")
	}
	run(t, "train", "--config", cfg, "--set", "algorithm.name=ppo", "--set", "train.steps=2", "--run-dir", dir, "--overwrite")
	rows := readMetrics(t, filepath.Join(dir, "metrics.jsonl"))
	if len(rows) != 3 || rows[0]["critic/vf_loss"] == nil {
		t.Fatalf("--overwrite: %d rows, first %v; want 3 fresh PPO rows", len(rows), rows[0])
	}
}

// Failed starts (a bad plugin path, a sha256 mismatch, a bad key) leave no
// run directory behind, named or default.
func TestFailedStartLeavesNothing(t *testing.T) {
	tmp := t.TempDir()
	cfg := filepath.Join(tmp, "tiny.yaml")
	writeFile(t, cfg, tinyBase+"train: {steps: 2, prompts_per_step: 4}\n")
	self, _ := os.Executable()
	for _, set := range []string{
		"strategies=[{plugin: " + filepath.Join(tmp, "missing") + "}]",
		"strategies=[{plugin: " + self + ", sha256: " + strings.Repeat("0", 64) + "}]",
		"strategies=[{name: ppl, bogus: 1}]",
	} {
		dir := filepath.Join(tmp, "run")
		out, err := cdeRunEnv(nil, "train", "--config", cfg, "--set", set, "--run-dir", dir)
		if err == nil {
			t.Fatalf("--set %s: started:\n%s", set, out)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("--set %s: a failed start left %s", set, dir)
		}
	}
	// The default name under runs/ (relative to the working directory).
	cmd := exec.Command(cdeRun, "train", "--config", cfg, "--set", "strategies=[{plugin: /nonexistent}]")
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("started:\n%s", out)
	}
	entries, _ := os.ReadDir(filepath.Join(tmp, "runs"))
	if len(entries) > 0 {
		t.Fatalf("a failed start left runs/%s", entries[0].Name())
	}
}

// --resume refuses CDE_* overrides and a config.yaml edited to change a
// fixed key, naming them; an edit of train.steps extends the run. A tool's
// CDE_* variable (CDE_BENCH_ENGINE) does not disturb training.
func TestResumeConfigChanges(t *testing.T) {
	tmp := t.TempDir()
	cfg := filepath.Join(tmp, "tiny.yaml")
	writeFile(t, cfg, tinyBase+"train: {steps: 2, prompts_per_step: 4}\n")
	dir := filepath.Join(tmp, "run")
	if out, err := cdeRunEnv([]string{"CDE_BENCH_ENGINE=go"}, "train", "--config", cfg, "--run-dir", dir); err != nil {
		t.Fatalf("CDE_BENCH_ENGINE broke training: %v\n%s", err, out)
	}
	if out, err := cdeRunEnv([]string{"CDE_TRAIN__STEPS=4"}, "train", "--resume", dir); err == nil || !strings.Contains(out, "CDE_TRAIN__STEPS cannot change a run being resumed") {
		t.Fatalf("resume with CDE_TRAIN__STEPS: %v\n%s", err, out)
	}
	path := filepath.Join(dir, "config.yaml")
	orig, _ := os.ReadFile(path)
	writeFile(t, path, strings.Replace(string(orig), "name: grpo", "name: ppo", 1))
	if out, err := cdeRunEnv(nil, "train", "--resume", dir); err == nil || !strings.Contains(out, `changes algorithm.name from \"grpo\" to \"ppo\"`) {
		t.Fatalf("resume with another algorithm: %v\n%s", err, out)
	}
	writeFile(t, path, strings.Replace(string(orig), "steps: 2\n", "steps: 4\n", 1))
	run(t, "train", "--resume", dir)
	if rows := readMetrics(t, filepath.Join(dir, "metrics.jsonl")); len(rows) != 5 {
		t.Fatalf("%d rows after extending to 4 steps, want 5", len(rows))
	}
}

// The shipped base policy is found wherever cde-run runs (it is embedded
// in the binary): a default-config run from an empty directory uses it and
// does not start a warm start.
func TestShippedBaseFromAnyDirectory(t *testing.T) {
	tmp := t.TempDir()
	cmd := exec.Command(cdeRun, "train", "--set", "train.steps=1", "--set", "train.prompts_per_step=2",
		"--set", "rollout.n=2", "--set", "eval.max_problems=2", "--run-dir", "run")
	cmd.Dir = tmp
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "using the shipped base policy") || strings.Contains(string(out), "warm start") {
		t.Fatalf("did not use the shipped base:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(tmp, "runs", "base", "da4cd3abefb8", "policy.gob")); err != nil {
		t.Fatal(err)
	}
}

// A base policy made by pretrain carries a manifest: a flipped byte in it
// is an error naming the file, for train (model.checkpoint) and eval alike.
func TestCorruptBaseIsRefused(t *testing.T) {
	tmp := t.TempDir()
	cfg := filepath.Join(tmp, "tiny.yaml")
	writeFile(t, cfg, tinyBase+"train: {steps: 1, prompts_per_step: 4}\npretrain: {steps: 2, batch_size: 4, eval_every: 2, eval_k: 1, eval_max_problems: 2}\n")
	base := filepath.Join(tmp, "base")
	run(t, "pretrain", "--config", cfg, "--out", base)
	path := filepath.Join(base, "policy.gob")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x10
	writeFile(t, path, string(data))
	for _, args := range [][]string{
		{"train", "--config", cfg, "--set", "model.checkpoint=" + base, "--run-dir", filepath.Join(tmp, "run")},
		{"eval", "--config", cfg, "--checkpoint", base},
	} {
		out, err := cdeRunEnv(nil, args...)
		if err == nil || !strings.Contains(out, "policy.gob is corrupt") {
			t.Fatalf("cde-run %s with a corrupt base: %v\n%s", args[0], err, out)
		}
	}
}

// A second SIGTERM ends a run at once, even one stuck inside a step (here
// a plugin hook that hangs, with a 10-minute call_timeout): the first asks
// for a checkpoint after the step, the second is not caught.
func TestSecondSignalQuits(t *testing.T) {
	_, testPlugin := buildPlugins(t)
	tmp := t.TempDir()
	cfg := filepath.Join(tmp, "tiny.yaml")
	writeFile(t, cfg, tinyBase+"train: {steps: 50, prompts_per_step: 4}\nstrategies:\n  - {plugin: "+testPlugin+
		", call_timeout: 10m, params: {mode: hang, at_step: 1}}\n")
	cmd := exec.Command(cdeRun, "train", "--config", cfg, "--run-dir", filepath.Join(tmp, "run"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	deadline := time.Now().Add(time.Minute)
	for {
		if data, _ := os.ReadFile(filepath.Join(tmp, "run", "metrics.jsonl")); len(data) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no progress within a minute")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(time.Second) // step 1 is now stuck in the plugin
	cmd.Process.Signal(syscall.SIGTERM)
	time.Sleep(300 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
			t.Fatalf("exit: %v, want death by the second SIGTERM", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("two SIGTERMs did not end a stuck run within 30 s")
	}
}

// A training prompt too long for the model fails the run at start, naming
// the file and line (it used to fail at whichever step first sampled it).
func TestLongPromptFailsAtStart(t *testing.T) {
	tmp := t.TempDir()
	data := filepath.Join(tmp, "train.jsonl")
	writeFile(t, data, `{"prompt": "1+1=", "answer": "2"}`+"\n"+`{"prompt": "2+2=", "answer": "4"}`+"\n"+
		`{"prompt": "`+strings.Repeat("9+", 30)+`1=", "answer": "271"}`+"\n")
	eval := filepath.Join(tmp, "val.jsonl")
	writeFile(t, eval, `{"prompt": "3+3=", "answer": "6"}`+"\n")
	cfg := filepath.Join(tmp, "tiny.yaml")
	writeFile(t, cfg, strings.Replace(tinyBase, "task: {name: arith, levels: [1], eval_n: 8}",
		"task: {name: jsonl, path: "+data+", eval: [{name: v, path: "+eval+"}]}", 1)+"train: {steps: 100, prompts_per_step: 2}\n")
	dir := filepath.Join(tmp, "run")
	out, err := cdeRunEnv(nil, "train", "--config", cfg, "--run-dir", dir)
	if err == nil || !strings.Contains(out, data+":3: the prompt is 63 tokens") {
		t.Fatalf("a long prompt on line 3: %v\n%s", err, out)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatal("the failed start left its run directory")
	}
}
