package trainer

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/cde-rl/cde/internal/tensorboard/tbtest"
)

// With train.logger [jsonl, tensorboard] the run directory gets one event
// file holding every metric of metrics.jsonl under the same name and step
// (as float32; null there is a non-finite value here), read back by the
// independent reader; a resumed run drops the later steps from both and
// writes each step once.
func TestTensorBoardLogger(t *testing.T) {
	cfg := fakeConfig(t, 5, 2)
	cfg.Eval.Every = 2
	cfg.Train.Logger = []string{"jsonl", "tensorboard"}
	tr := fakeTrainer(t, cfg, &fakeBackend{})
	if err := tr.Run(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(checkpointRoot(tr.RunDir), "step-000004"))
	os.RemoveAll(filepath.Join(checkpointRoot(tr.RunDir), "step-000005"))
	dir, _, err := ResumeCheckpoint(tr.RunDir)
	if err != nil {
		t.Fatal(err)
	}
	tr2 := fakeTrainer(t, cfg, &fakeBackend{})
	tr2.RunDir = tr.RunDir
	start, err := tr2.Restore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr2.Run(context.Background(), start); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(tr.RunDir, "events.out.tfevents.*"))
	if len(files) != 1 {
		t.Fatalf("event files %v, want one", files)
	}
	recs := tbtest.Read(t, files[0])
	data, err := os.ReadFile(filepath.Join(tr.RunDir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(recs) != 2+len(lines) || recs[0]["file_version"] != "brain.Event:2" {
		t.Fatalf("%d records for %d metrics rows (first %v)", len(recs), len(lines), recs[0])
	}
	// The second record is the run's config, once (the resume kept it):
	// as hparams, the same leaves config.yaml holds, and as text.
	conf, _ := recs[1]["tensors"].(map[string]any)
	hp, _ := conf["_hparams_/session_start_info"].(map[string]any)
	text, _ := conf["config"].(map[string]any)
	if recs[1]["step"] != 0.0 || hp == nil || text == nil {
		t.Fatalf("record 1 is not the config: %v", recs[1])
	}
	params, _ := hp["hparams"].(map[string]any)
	if params["algorithm.name"] != cfg.Raw["algorithm"].(map[string]any)["name"] || params["train.steps"] != float64(cfg.Train.Steps) || params["rollout.n"] != 2.0 {
		t.Errorf("hparams %v", params)
	}
	// The text is config.yaml's (yaml.Marshal of the resolved tree), each
	// line indented four spaces.
	want, _ := yaml.Marshal(cfg.Raw)
	strs, _ := text["strings"].([]any)
	if len(strs) != 1 || strs[0] != "    "+strings.ReplaceAll(strings.TrimRight(string(want), "\n"), "\n", "\n    ") {
		t.Errorf("config text %v", text["strings"])
	}
	recs = append(recs[:1], recs[2:]...)
	checked := 0
	for i, line := range lines {
		var row map[string]any
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatal(err)
		}
		rec := recs[i+1]
		if rec["step"] != row["step"] {
			t.Fatalf("row %d: event step %v, metrics step %v", i, rec["step"], row["step"])
		}
		scalars, _ := rec["scalars"].(map[string]any)
		if len(scalars) != len(row)-1 {
			t.Fatalf("step %v: %d scalars for %d metrics", row["step"], len(scalars), len(row)-1)
		}
		for k, v := range row {
			if k == "step" {
				continue
			}
			got, ok := scalars[k]
			if !ok {
				t.Fatalf("step %v: %s missing from the event file", row["step"], k)
			}
			if v == nil {
				if f := tbtest.Float32(got); !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) {
					t.Fatalf("step %v %s: null in metrics.jsonl, %v in the event file", row["step"], k, got)
				}
			} else if !tbtest.Same(tbtest.Float32(got), float32(v.(float64))) {
				t.Fatalf("step %v %s: metrics.jsonl %v, event file %v", row["step"], k, v, got)
			}
			checked++
		}
	}
	if checked < 50 {
		t.Fatalf("only %d values compared", checked)
	}
}

// An unknown logger is refused, naming the key.
func TestLoggerKey(t *testing.T) {
	_, err := LoadConfig(LoadOptions{Env: []string{}, Sets: []string{"train.logger=[jsonl, wandb]"}})
	if err == nil || !strings.Contains(err.Error(), "train.logger") || !strings.Contains(err.Error(), `"wandb" is not a logger (known: jsonl, tensorboard)`) {
		t.Fatalf("error %v", err)
	}
	cfg, err := LoadConfig(LoadOptions{Env: []string{}})
	if err != nil || len(cfg.Train.Logger) != 1 || cfg.Train.Logger[0] != "jsonl" {
		t.Fatalf("default logger %v (%v)", cfg.Train.Logger, err)
	}
}
