package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Sizes that used to end in "fatal error: runtime: out of memory" (or
// grow for minutes) are refused before anything is allocated: past a
// key's upper bound by name, within the bounds by the memory estimate;
// no run directory is left. A run that fits logs its estimate.
func TestOversizeRunsRefused(t *testing.T) {
	tmp := t.TempDir()
	cfg := filepath.Join(tmp, "tiny.yaml")
	writeFile(t, cfg, tinyConfig)
	for _, c := range []struct {
		set, env, want string
	}{
		{"train.prompts_per_step=1000000000", "", "train.prompts_per_step: must be in [1, 1048576]"},
		{"model.d_model=1000000000", "", "model.d_model: must be in [1, 65536]"},
		{"model.max_len=2147483648", "", "model.max_len: must be in [8, 1048576]"},
		{"rollout.n=1000000000", "", "rollout.n: must be in [1, 65536]"},
		{"train.prompts_per_step=1000000", "", "a micro-batch of 4000000 rows: train.prompts_per_step x rollout.n = 4000000"},
		{"model.d_model=65536", "", "model state"},
		{"train.steps=12", "CDE_MEMORY_LIMIT_GB=0.05", "is more than 50 MB (CDE_MEMORY_LIMIT_GB)"},
	} {
		run := filepath.Join(tmp, "run")
		cmd := exec.Command(cdeRun, "train", "--config", cfg, "--set", c.set, "--run-dir", run)
		cmd.Env = append(os.Environ(), c.env)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("--set %s %s: %v, want an error containing %q:\n%s", c.set, c.env, err, c.want, out)
		}
		if _, err := os.Stat(run); err == nil {
			t.Errorf("--set %s: the refused run left %s", c.set, run)
		}
	}
	out := run(t, "train", "--config", cfg, "--set", "train.steps=1", "--run-dir", filepath.Join(tmp, "ok"))
	if !strings.Contains(out, "memory estimate: ") || !strings.Contains(out, "the largest pass") {
		t.Fatalf("no memory estimate logged:\n%s", out)
	}
	help, _ := exec.Command(cdeRun, "train", "--help").CombinedOutput()
	if !strings.Contains(string(help), "For the embedded defaults:\n") || !strings.Contains(string(help), "MB in all") {
		t.Fatalf("train --help gives no estimate:\n%s", help)
	}
}
