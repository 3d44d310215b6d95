package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// eval --run scores the newest checkpoint with the seeds of its own step,
// so it reproduces the figure the run logged at that step (it used to
// draw step 0's samples: 0.5433 where the run had logged 0.5526).
func TestEvalReproducesRun(t *testing.T) {
	tmp := t.TempDir()
	// The default task and its shipped base policy, so accuracies are far
	// from 0 and other samples give other figures.
	runDir := filepath.Join(tmp, "run")
	run(t, "train", "--run-dir", runDir, "--set", "train.steps=3", "--set", "train.checkpoint_every=3", "--set", "eval.max_problems=48", "--set", "pretrain.dir="+filepath.Join(tmp, "base"))
	rows := readMetrics(t, filepath.Join(runDir, "metrics.jsonl"))
	var logged map[string]any
	for _, r := range rows {
		if r["step"] == float64(3) {
			if _, ok := r["val/mean/avg@4"]; ok {
				logged = r
			}
		}
	}
	if logged == nil {
		t.Fatalf("the run logged no evaluation at step 3: %v", rows[len(rows)-1])
	}
	res := evalAgainstLogged(t, logged, 3, "eval", "--run", runDir)
	if res.SeedStep != 3 {
		t.Errorf("seed_step %d, want 3 (the checkpoint's)", res.SeedStep)
	}
}

// eval with model.hf and no checkpoint scores the model's own weights, as
// a run from it starts: the same figures as that run's step-0 evaluation.
func TestEvalHFOwnWeights(t *testing.T) {
	tmp := t.TempDir()
	model, err := filepath.Abs(filepath.Join("..", "..", "assets", "wordprob-qwen3"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(tmp, "wp.yaml")
	writeFile(t, cfg, "task: {name: wordprob, tokenizer: "+model+"}\n"+
		"model: {hf: "+model+", max_len: 320, checkpoint: auto}\n"+
		"rollout: {n: 2, max_response_tokens: 48}\n"+
		"train: {steps: 1, prompts_per_step: 2}\n"+
		"eval: {at_start: true, every: 1000, k: 2, max_problems: 3}\n")
	runDir := filepath.Join(tmp, "run")
	run(t, "train", "--config", cfg, "--run-dir", runDir, "--summary", "none")
	var logged map[string]any
	for _, r := range readMetrics(t, filepath.Join(runDir, "metrics.jsonl")) {
		if _, ok := r["val/mean/avg@2"]; ok && r["step"] == float64(0) {
			logged = r
		}
	}
	if logged == nil {
		t.Fatal("the run logged no step-0 evaluation")
	}
	res := evalAgainstLogged(t, logged, 0, "eval", "--config", cfg)
	if !strings.Contains(res.Checkpoint, "its own weights") {
		t.Errorf("checkpoint %q, want the model's own weights named", res.Checkpoint)
	}
}

type evalOutput struct {
	Checkpoint string             `json:"checkpoint"`
	SeedStep   int                `json:"seed_step"`
	Metrics    map[string]float64 `json:"metrics"`
}

// evalAgainstLogged runs cde-run with args (an eval) and checks that every
// val/ metric it prints equals the one a run logged at step.
func evalAgainstLogged(t *testing.T, logged map[string]any, step int, args ...string) evalOutput {
	t.Helper()
	out, err := exec.Command(cdeRun, args...).Output()
	if err != nil {
		t.Fatal(err)
	}
	var res evalOutput
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	n := 0
	for k, v := range res.Metrics {
		if strings.HasPrefix(k, "val/") {
			n++
			if lv, ok := logged[k].(float64); !ok || lv != v {
				t.Errorf("%s: eval %v, the run logged %v at step %d", k, v, logged[k], step)
			}
		}
	}
	if n == 0 {
		t.Fatalf("no val/ metrics in %s", out)
	}
	return res
}
