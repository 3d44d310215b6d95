package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cde-rl/cde/trainer"
	"github.com/rs/zerolog"
)

// tinySpecYAML is a one-arm, one-seed bench of a tiny model that trains
// steps steps and checkpoints every every.
func tinySpecYAML(steps, every int) string {
	return fmt.Sprintf(`
base:
  seed: 1
  task: {name: arith, levels: [1], eval_n: 4, eval_sets: [{name: l1, level: 1}]}
  model: {layers: 1, d_model: 16, heads: 2, max_len: 48, checkpoint: auto}
  rollout: {n: 4, max_response_tokens: 12}
  train: {steps: %d, prompts_per_step: 2, checkpoint_every: %d}
  eval: {every: 0, k: 2, at_start: false}
  pretrain: {seed: 1, steps: 4, batch_size: 8, eval_every: 4, eval_k: 1, eval_max_problems: 4}
seeds: [1]
arms:
  - {name: grpo, config: {algorithm: {name: grpo}}}
`, steps, every)
}

// tinySpec is tinySpecYAML's bench of two steps that checkpoints at its
// end.
func tinySpec(t *testing.T) *Spec {
	t.Helper()
	spec, err := ParseSpec([]byte(tinySpecYAML(2, 2)), "tiny.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

func runTiny(spec *Spec, dir string) (string, error) {
	var log syncBuffer
	err := Run(context.Background(), spec, Options{Dir: dir, Exe: cdeRun, Output: &log, Log: zerolog.New(&log)})
	return log.String(), err
}

// A second bench on the same --out is refused, naming the holder's pid.
func TestOutLocked(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	held, err := trainer.LockDir(out) // the other bench
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	log, err := runTiny(tinySpec(t), out)
	if !errors.Is(err, trainer.ErrRunDirInUse) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("second bench on one --out: %v, want ErrRunDirInUse naming pid %d\n%s", err, os.Getpid(), log)
	}
	if _, err := os.Stat(filepath.Join(out, "runs")); err == nil {
		t.Error("the refused bench made runs/")
	}
}

// An arm-seed directory another cde-run holds is never removed.
func TestArmSeedInUseKept(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	run := RunDir(out, "grpo", 1)
	held, err := trainer.LockDir(run) // a trainer started by hand in it
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	marker := filepath.Join(run, "metrics.jsonl")
	if err := os.WriteFile(marker, []byte("{\"step\":0}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	log, err := runTiny(tinySpec(t), out)
	if err == nil || !strings.Contains(err.Error(), "1 arm-seed(s) failed") {
		t.Errorf("bench over a held arm-seed: %v, want that arm-seed to fail\n%s", err, log)
	}
	if !strings.Contains(log, "is used by another cde-run") {
		t.Errorf("the log does not say the arm-seed is in use:\n%s", log)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the held arm-seed's files were removed: %v", err)
	}
	// Why it failed is recorded beside it, for cde-run board.
	var rec map[string]string
	data, _ := os.ReadFile(filepath.Join(run, FailedFile))
	if err := json.Unmarshal(data, &rec); err != nil || !strings.Contains(rec["error"], "is used by another cde-run") || rec["failed"] == "" {
		t.Errorf("%s: %s (%v)", FailedFile, data, err)
	}
}

// A half-made arm-seed (checkpoints but no config.yaml or metrics.jsonl,
// what two benches on one --out used to leave) is started again, and a
// rerun that spells --out relatively after an absolute first run finds
// the finished arm-seed unchanged.
func TestRerunRecovers(t *testing.T) {
	parent := t.TempDir()
	out := filepath.Join(parent, "out")
	spec := tinySpec(t)
	if log, err := runTiny(spec, out); err != nil {
		t.Fatalf("first bench: %v\n%s", err, log)
	}
	run := RunDir(out, "grpo", 1)
	if ck, _ := trainer.LatestCheckpoint(run); ck == "" {
		t.Fatal("the first bench left no checkpoint")
	}
	for _, f := range []string{DoneFile, "config.yaml", "metrics.jsonl"} {
		if err := os.Remove(filepath.Join(run, f)); err != nil {
			t.Fatal(err)
		}
	}
	log, err := runTiny(spec, out)
	if err != nil {
		t.Fatalf("rerun over a half-made arm-seed: %v\n%s", err, log)
	}
	if !strings.Contains(log, "has checkpoints but no config.yaml; starting it again") {
		t.Errorf("the rerun does not say it restarted the arm-seed:\n%s", log)
	}
	if n := countLines(t, filepath.Join(run, "metrics.jsonl")); n < 2 {
		t.Errorf("restarted arm-seed: %d metrics rows", n)
	}
	t.Chdir(parent)
	log, err = runTiny(spec, "out")
	if err != nil || !strings.Contains(log, "done, skipping") {
		t.Errorf("rerun with a relative --out: %v\n%s", err, log)
	}
}

// A shipped preset is found by name from any directory; an unknown name
// lists the presets.
func TestLoadPreset(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, name := range []string{"smoke", "smoke.yaml", "bench/smoke.yaml"} {
		spec, err := Load(name)
		if err != nil || spec.Stem != "smoke" || len(spec.Arms) == 0 {
			t.Errorf("Load(%q): %v, %v", name, spec, err)
		}
	}
	if _, err := Load("nope"); err == nil || !strings.Contains(err.Error(), "paper-countdown") {
		t.Errorf("Load(nope): %v, want an error listing the presets", err)
	}
}
