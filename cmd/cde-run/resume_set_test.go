package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func trainSteps(t *testing.T, yamlText string) int {
	t.Helper()
	var c struct {
		Train struct{ Steps int } `yaml:"train"`
	}
	if err := yaml.Unmarshal([]byte(yamlText), &c); err != nil {
		t.Fatalf("%v\n%s", err, yamlText)
	}
	return c.Train.Steps
}

// train --print-config prints the resolved config (what RUN/config.yaml
// would hold) and trains nothing; with --resume, the run's config with
// its --set.
func TestPrintConfig(t *testing.T) {
	tmp := t.TempDir()
	cfg := filepath.Join(tmp, "tiny.yaml")
	writeFile(t, cfg, tinyBase+"train: {steps: 2, prompts_per_step: 4}\n")
	cmd := exec.Command(cdeRun, "train", "--config", cfg, "--set", "train.steps=7", "--print-config")
	cmd.Dir = tmp
	out, err := cmd.Output()
	if err != nil || trainSteps(t, string(out)) != 7 || !strings.Contains(string(out), "d_model: 16") {
		t.Fatalf("--print-config: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(tmp, "runs")); !os.IsNotExist(err) {
		t.Fatal("--print-config made a run directory")
	}
	if out, err := cdeRunEnv(nil, "train", "--print-config", "--set", "train.stepz=1"); err == nil || !strings.Contains(out, "train.stepz") {
		t.Fatalf("--print-config with a bad key: %v\n%s", err, out)
	}
	dir := filepath.Join(tmp, "run")
	run(t, "train", "--config", cfg, "--run-dir", dir)
	out, err = exec.Command(cdeRun, "train", "--resume", dir, "--set", "train.steps=9", "--print-config").Output()
	if err != nil || trainSteps(t, string(out)) != 9 {
		t.Fatalf("--resume --print-config: %v\n%s", err, out)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "config.yaml")); trainSteps(t, string(data)) != 2 {
		t.Fatal("--print-config changed the run's config.yaml")
	}
}

// train --resume DIR --set takes the keys a resume may change and
// refuses any other, and --config and --engine, by name; train.steps
// extends the run and is saved in its config.yaml.
func TestResumeSet(t *testing.T) {
	tmp := t.TempDir()
	cfg := filepath.Join(tmp, "tiny.yaml")
	writeFile(t, cfg, tinyBase+"train: {steps: 2, prompts_per_step: 4}\n")
	dir := filepath.Join(tmp, "run")
	run(t, "train", "--config", cfg, "--run-dir", dir)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--set", "train.actor_lr=0.5"}, "--set train.actor_lr=0.5: train.actor_lr is not a key a resume may change (those are train.steps, "},
		{[]string{"--set", "seed=2"}, "seed is not a key a resume may change"},
		{[]string{"--set", "train={steps: 4}"}, "train is not a key a resume may change"},
		{[]string{"--config", cfg}, "--config cannot change a run being resumed"},
		{[]string{"--engine", "cpu"}, "--engine cannot change a run being resumed"},
		{[]string{"--set", "train.steps=2"}, "--set train.steps=2: the run is at step 2 already"},
	} {
		out, err := cdeRunEnv(nil, append([]string{"train", "--resume", dir}, c.args...)...)
		if err == nil || !strings.Contains(out, c.want) {
			t.Fatalf("--resume %s: %v\n%s\nwant %q", strings.Join(c.args, " "), err, out, c.want)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "config.yaml")); trainSteps(t, string(data)) != 2 {
		t.Fatal("a refused resume changed config.yaml")
	}
	run(t, "train", "--resume", dir, "--set", "train.steps=4", "--set", "train.checkpoint_every=1", "--set", "eval.every=1")
	if rows := readMetrics(t, filepath.Join(dir, "metrics.jsonl")); len(rows) != 5 {
		t.Fatalf("%d rows after --set train.steps=4, want 5", len(rows))
	}
	data, _ := os.ReadFile(filepath.Join(dir, "config.yaml"))
	if trainSteps(t, string(data)) != 4 || !strings.Contains(string(data), "checkpoint_every: 1") {
		t.Fatalf("config.yaml after the resume:\n%s", data)
	}
}

// A run killed (SIGKILL) while it makes its base policy
// (model.checkpoint: auto) resumes with train --resume: its config.yaml is
// written before the base, and the resume makes the base and trains.
func TestResumeAfterKillDuringBase(t *testing.T) {
	tmp := t.TempDir()
	cfg := filepath.Join(tmp, "tiny.yaml")
	writeFile(t, cfg, strings.Replace(tinyBase, `checkpoint: ""`, "checkpoint: auto", 1)+
		"train: {steps: 2, prompts_per_step: 4}\npretrain: {steps: 4, batch_size: 4, eval_every: 4, eval_k: 1, eval_max_problems: 2, dir: "+filepath.Join(tmp, "base")+"}\n")
	dir := filepath.Join(tmp, "run")
	out, err := cdeRunEnv([]string{"CDE_TEST_KILL_AT=pretrain.step:1"}, "train", "--config", cfg, "--run-dir", dir)
	if err == nil || !strings.Contains(out, "warm start") {
		t.Fatalf("the run was not killed in its warm start: %v\n%s", err, out)
	}
	out, err = cdeRunEnv(nil, "train", "--resume", dir)
	if err != nil {
		t.Fatalf("train --resume after a kill during the base: %v\n%s", err, out)
	}
	if rows := readMetrics(t, filepath.Join(dir, "metrics.jsonl")); len(rows) != 3 {
		t.Fatalf("%d rows after the resume, want 3", len(rows))
	}
	if !strings.Contains(out, "warm start") {
		t.Fatalf("the resume did not make the base:\n%s", out)
	}
}

// A directory holding only a lock (a run killed before it wrote its
// config, by a cde-run that wrote it after the base) is no run to
// resume; the error says the command that starts it again.
func TestResumeLockOnly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	os.Mkdir(dir, 0o755)
	writeFile(t, filepath.Join(dir, ".lock"), "12345\n")
	out, err := cdeRunEnv(nil, "train", "--resume", dir)
	if err == nil || !strings.Contains(out, "start it again with: cde-run train --run-dir "+dir) {
		t.Fatalf("--resume of a lock-only directory: %v\n%s", err, out)
	}
}
