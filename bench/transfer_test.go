package bench

import (
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"go.yaml.in/yaml/v3"
)

// TestTransferSmoke runs bench/transfer.yaml at smoke size, from the
// repository's root as the preset says: its base config (wordprob on the
// shipped Qwen3 model with the reduced tokenizer, RL from the shipped
// base), its base row, two of its arms (grpo and the staircase PPL bonus,
// which here also evaluates at its start), one seed, two steps of 2
// prompts x 2 responses, evaluations of k = 2 on 4 problems a set, and one
// claim on pass@1. The base row evaluates the model's own weights: it
// equals the PPL arm's step-0 evaluation. TestPresetsValidate checks every
// arm of the full preset.
func TestTransferSmoke(t *testing.T) {
	t.Chdir("..")
	spec, err := Load("bench/transfer.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var base map[string]any
	if err := yaml.Unmarshal(spec.Base, &base); err != nil {
		t.Fatal(err)
	}
	base["rollout"] = map[string]any{"n": 2, "temperature": 1.0, "max_response_tokens": 40}
	base["train"] = map[string]any{"steps": 2, "prompts_per_step": 2, "checkpoint_every": 1}
	base["eval"] = map[string]any{"every": 0, "k": 2, "final_k": 0, "max_problems": 4, "at_start": false}
	if spec.Base, err = yaml.Marshal(base); err != nil {
		t.Fatal(err)
	}
	var arms []Arm
	for _, a := range spec.Arms {
		if a.Name == "grpo_ppl" {
			a.Overlay = append(a.Overlay, []byte("\neval: {at_start: true}\n")...)
		}
		if a.Name == "grpo" || a.Name == "grpo_ppl" {
			arms = append(arms, a)
		}
	}
	if len(arms) != 2 {
		t.Fatalf("transfer.yaml has no grpo or grpo_ppl arm: %v", spec.Arms)
	}
	spec.Arms, spec.Seeds = arms, []uint64{1}
	spec.Claims = []Claim{{Name: "grpo_ppl beats grpo on pass@1", Better: "grpo_ppl", Than: "grpo", Metric: "val/mean/pass@1"}}
	out := filepath.Join(t.TempDir(), "transfer")
	var log syncBuffer
	if err := Run(context.Background(), spec, Options{Dir: out, Exe: cdeRun, Output: &log, Log: zerolog.New(&log), Jobs: 1, Command: "transfer (smoke)"}); err != nil {
		t.Fatalf("bench: %v\n%s", err, log.String())
	}
	f, err := os.Open(filepath.Join(out, "results.csv"))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil || len(recs) != 4 || recs[1][0] != "base" || recs[2][0] != "grpo" || recs[3][0] != "grpo_ppl" {
		t.Fatalf("results.csv: %v (%v)", recs, err)
	}
	baseRows, err := readMetricRows(filepath.Join(RunDir(out, BaseArm, 1), "metrics.jsonl"))
	if err != nil || len(baseRows) != 1 {
		t.Fatalf("base rows %v: %v", baseRows, err)
	}
	start, err := readMetricRows(filepath.Join(RunDir(out, "grpo_ppl", 1), "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for k, v := range baseRows[0] {
		if strings.HasPrefix(k, "val/") {
			n++
			if start[0][k] != v {
				t.Errorf("%s: base row %v, grpo_ppl at step 0 %v", k, v, start[0][k])
			}
		}
	}
	if n == 0 || baseRows[0]["val/eval/avg@2"] == 0.0 && baseRows[0]["val/eval_hard/avg@2"] == 0.0 {
		t.Errorf("base row %v: no val/ metrics, or nothing solved (a weak comparison)", baseRows[0])
	}
	md, _ := os.ReadFile(filepath.Join(out, "results.md"))
	if !strings.Contains(string(md), "grpo_ppl beats grpo on pass@1") {
		t.Errorf("results.md has no claim verdict:\n%s", md)
	}
}
