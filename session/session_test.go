package session_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/session"
	"github.com/cde-rl/cde/trainer"
)

const tiny = `
seed: 3
task: {name: arith, levels: [1], eval_n: 8}
model: {layers: 1, d_model: 16, heads: 2, max_len: 48, checkpoint: ""}
rollout: {n: 4, max_response_tokens: 12}
train: {steps: 3, prompts_per_step: 4, checkpoint_every: 2}
eval: {every: 0, k: 2}
strategies: [{name: ppl}]
`

// Train from Go: a new run writes its config, one metrics row per step
// plus the final eval, and checkpoints; a resume of the finished run with
// more steps continues from its last checkpoint.
func TestTrainFromGo(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tiny.yaml")
	if err := os.WriteFile(file, []byte(tiny), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := trainer.LoadConfig(trainer.LoadOptions{File: file, Env: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(t.TempDir(), "run")
	o := session.TrainOptions{Config: cfg, RunDir: run, Log: zerolog.Nop()}
	if err := session.Train(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	rows := metricRows(t, run)
	if len(rows) != 4 || rows[0]["explore/ppl/bonus_mean"] == nil || rows[3]["val/mean/avg@2"] == nil {
		t.Fatalf("%d rows: %v", len(rows), rows)
	}
	if dir, err := trainer.LatestCheckpoint(run); err != nil || filepath.Base(dir) != "step-000003" {
		t.Fatalf("latest checkpoint %q (%v)", dir, err)
	}
	// Extend the finished run to 5 steps by editing its config.yaml.
	path := filepath.Join(run, "config.yaml")
	data, _ := os.ReadFile(path)
	edited := strings.Replace(string(data), "steps: 3\n", "steps: 5\n", 1)
	if edited == string(data) {
		t.Fatal("train.steps not found in config.yaml")
	}
	os.WriteFile(path, []byte(edited), 0o644)
	if err := session.Train(context.Background(), session.TrainOptions{Resume: run, Log: zerolog.Nop()}); err != nil {
		t.Fatal(err)
	}
	rows = metricRows(t, run)
	if len(rows) != 6 {
		t.Fatalf("%d rows after extending to 5 steps, want 6", len(rows))
	}
	// Eval of the run takes its config and newest checkpoint, and with the
	// checkpoint's own seeds reproduces the final evaluation it logged.
	res, err := session.Eval(context.Background(), session.EvalOptions{Run: run, SeedStep: -1, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	logged, ok := rows[5]["val/mean/avg@2"].(float64)
	if !ok {
		t.Fatalf("the final row has no val/mean/avg@2: %v", rows[5])
	}
	if filepath.Base(res.Checkpoint) != "step-000005" || res.SeedStep != 5 || res.Metrics["val/mean/avg@2"] != logged {
		t.Errorf("eval: %s seeds of step %d avg@2 %v, want step-000005, 5 and the logged %v", res.Checkpoint, res.SeedStep, res.Metrics["val/mean/avg@2"], logged)
	}
	if _, err := session.Eval(context.Background(), session.EvalOptions{Run: filepath.Join(run, "missing"), Log: zerolog.Nop()}); err == nil {
		t.Error("eval of a directory with no config.yaml: no error")
	}
	// The same directory is not reused for a new run.
	if err := session.Train(context.Background(), o); err == nil || !strings.Contains(err.Error(), "already holds a run") {
		t.Fatalf("new run into a used directory: %v", err)
	}
}

func metricRows(t *testing.T, run string) []map[string]any {
	t.Helper()
	f, err := os.Open(filepath.Join(run, "metrics.jsonl"))
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
			t.Fatal(err)
		}
		rows = append(rows, row)
	}
	return rows
}

// maxrl takes the task's reward levels (here 0 and 2), and a key set
// against them is an error naming it.
func TestMaxRLTakesTaskRewards(t *testing.T) {
	base := strings.Replace(tiny, "task: {name: arith, levels: [1], eval_n: 8}", "task: {name: arith, levels: [1], eval_n: 8, correct_reward: 2, incorrect_reward: 0}", 1)
	load := func(extra string) *trainer.Config {
		cfg, err := trainer.LoadConfig(trainer.LoadOptions{Env: []string{}, Layers: [][]byte{[]byte(base + extra)}})
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	s, err := session.New(load("algorithm: {name: maxrl}\n"), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := &core.Rollout{Seqs: []core.Sequence{{Group: 0, Response: []int32{1}, ShapedReward: 2}, {Group: 0, Response: []int32{1}, ShapedReward: 0}}}
	if err := s.Algo.Advantages(r); err != nil {
		t.Fatal(err)
	}
	// u = 1, 0 with r_inc 0 and r_cor 2: mean 1/2, A = +-0.5/0.500001.
	if a := r.Seqs[0].Advantages[0]; a != 0.5/0.500001 {
		t.Errorf("A = %v, want 0.5/0.500001 (the task's levels)", a)
	}
	if _, err := session.New(load("algorithm: {name: maxrl, incorrect_reward: -1}\n"), zerolog.Nop()); err == nil ||
		!strings.Contains(err.Error(), "algorithm.incorrect_reward = -1, but the task rewards an incorrect answer 0") {
		t.Errorf("a key against the task: %v", err)
	}
}
