package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTrainWithEachStrategy trains a tiny model with each strategy and
// checks its metrics show it acting every step.
func TestTrainWithEachStrategy(t *testing.T) {
	cases := []struct {
		name, extra string
		metrics     []string // reported every step
		positive    string   // > 0 every step
	}{
		{"ppl", "strategies: [{name: ppl}]\n", []string{"explore/ppl/bonus_mean", "explore/ppl/weight"}, "explore/ppl/bonus_mean"},
		{"multihead", "algorithm: {name: ppo}\nstrategies: [{name: multihead, heads: 4, zeta: 0.5}]\n", []string{"critic/head_std", "explore/multihead/bonus_mean", "critic/vf_loss"}, "critic/head_std"},
		{"simhash", "strategies: [{name: simhash, bits: 8}]\n", []string{"simhash/occupied_cells", "explore/simhash/bonus_mean"}, "simhash/occupied_cells"},
		{"entropy", "strategies: [{name: entropy, coef: 0.01}]\n", []string{"actor/entropy_coef"}, "actor/entropy_coef"},
		{"ppl+multihead", "algorithm: {name: ppo}\nstrategies: [{name: ppl}, {name: multihead}]\n", []string{"explore/ppl/bonus_mean", "critic/head_std"}, "explore/ppl/bonus_mean"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tmp := t.TempDir()
			cfg := filepath.Join(tmp, "cfg.yaml")
			writeFile(t, cfg, tinyBase+"train: {steps: 4, prompts_per_step: 4, checkpoint_every: 2}\n"+c.extra)
			runDir := filepath.Join(tmp, "run")
			run(t, "train", "--config", cfg, "--run-dir", runDir)
			rows := readMetrics(t, filepath.Join(runDir, "metrics.jsonl"))
			if len(rows) != 5 {
				t.Fatalf("%d metric lines, want 5", len(rows))
			}
			for _, row := range rows[:4] {
				for _, m := range c.metrics {
					if _, ok := row[m]; !ok {
						t.Fatalf("step %v: metric %s missing: %v", row["step"], m, row)
					}
				}
				if v, _ := row[c.positive].(float64); v <= 0 {
					t.Fatalf("step %v: %s = %v, want > 0", row["step"], c.positive, row[c.positive])
				}
			}
			if c.name == "simhash" {
				if _, err := os.Stat(filepath.Join(runDir, "simhash_cells.json")); err != nil {
					t.Fatalf("no cell-count histogram: %v", err)
				}
			}
		})
	}
}

// TestDumpRolloutsThenShape records real batches and reshapes one offline.
func TestDumpRolloutsThenShape(t *testing.T) {
	tmp := t.TempDir()
	cfg := filepath.Join(tmp, "cfg.yaml")
	writeFile(t, cfg, tinyBase+"train: {steps: 2, prompts_per_step: 4}\nalgorithm: {name: ppo}\nstrategies: [{name: ppl}, {name: multihead, heads: 2}]\n")
	dump := filepath.Join(tmp, "dump")
	run(t, "train", "--config", cfg, "--run-dir", filepath.Join(tmp, "run"), "--dump-rollouts", dump)
	for _, f := range []string{"rollout-000000.json", "rollout-000001.json"} {
		if _, err := os.Stat(filepath.Join(dump, f)); err != nil {
			t.Fatal(err)
		}
	}
	out := run(t, "shape", "--config", cfg, "--in", filepath.Join(dump, "rollout-000001.json"))
	if len(out) == 0 || out[0] != '{' {
		t.Fatalf("shape printed %q", out)
	}
}

// TestEvalSetsSelects: eval.sets runs only the named sets.
func TestEvalSetsSelects(t *testing.T) {
	tmp := t.TempDir()
	cfg := filepath.Join(tmp, "cfg.yaml")
	base := strings.Replace(tinyBase, "eval: {every: 4, k: 2}", "eval: {every: 2, k: 2, sets: [l2]}", 1)
	writeFile(t, cfg, base+"train: {steps: 2, prompts_per_step: 4}\n")
	runDir := filepath.Join(tmp, "run")
	run(t, "train", "--config", cfg, "--run-dir", runDir)
	rows := readMetrics(t, filepath.Join(runDir, "metrics.jsonl"))
	if _, ok := rows[0]["val/l2/avg@2"]; !ok {
		t.Fatalf("no val/l2/avg@2: %v", rows[0])
	}
	if _, ok := rows[0]["val/l1/avg@2"]; ok {
		t.Fatalf("l1 evaluated although eval.sets is [l2]: %v", rows[0])
	}
}
