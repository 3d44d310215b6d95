package session_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/backends/xla"
	"github.com/cde-rl/cde/backends/xla/hftest"
	"github.com/cde-rl/cde/backends/xla/safetensors"
	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/session"
	"github.com/cde-rl/cde/tokenizer"
	"github.com/cde-rl/cde/trainer"
)

// tinyQwen3 writes a random two-layer Qwen3-architecture checkpoint with
// the real Qwen3 tokenizer and chat template files.
func tinyQwen3(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := hftest.WriteTinyQwen3(dir, filepath.Join("..", "tokenizer", "testdata", "qwen3"), 2, 5); err != nil {
		t.Fatal(err)
	}
	return dir
}

// GRPO, and PPO with the multi-head critic, each run a few steps on GSM8K
// prompts rendered with Qwen3's chat template, on a random Qwen3-architecture
// checkpoint: a pipeline proof (no accuracy claim).
func TestHFEndToEnd(t *testing.T) {
	model := tinyQwen3(t)
	data := t.TempDir()
	// Four short GSM8K training questions with their final answers (MIT
	// licence: tasks/testdata/gsm8k/train_head200.jsonl, LICENSE beside it)
	// and two test questions written for this test.
	train := `{"question": "Joy can read 8 pages of a book in 20 minutes. How many hours will it take her to read 120 pages?", "answer": "#### 5"}
{"question": "John writes 20 pages a day.  How long will it take him to write 3 books that are 400 pages each?", "answer": "#### 60"}
{"question": "Herbert is 10 years younger than Kris. If Kris is 24 years old now, how old will Herbert be next year?", "answer": "#### 15"}
{"question": "James writes a 3-page letter to 2 different friends twice a week.  How many pages does he write a year?", "answer": "#### 624"}
`
	test := `{"question": "Janet buys 3 pounds of apples at $2 a pound. How much does she pay?", "answer": "#### 6"}
{"question": "A box holds 12 eggs. How many eggs are in 4 boxes?", "answer": "#### 48"}
`
	os.WriteFile(filepath.Join(data, "train.jsonl"), []byte(train), 0o644)
	os.WriteFile(filepath.Join(data, "test.jsonl"), []byte(test), 0o644)
	// PPO's updates go through in micro-batches of one response (four
	// parts per update, actor and critic).
	// grpo-bf16 samples in bfloat16 (rollout.dtype) and corrects the
	// sampler's mismatch with tis_cap: the trainer rescores in float32.
	for _, c := range []struct {
		name, algo, rollout string
		micro               int
	}{
		{"grpo", "algorithm: {name: grpo}\nstrategies: [{name: ppl}]", "", 0},
		{"ppo-multihead", "algorithm: {name: ppo}\nstrategies: [{name: multihead, heads: 4, zeta: 0.5}]", "", 1},
		{"grpo-bf16", "algorithm: {name: grpo}", ", dtype: bfloat16, tis_cap: 2", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			yaml := `seed: 2
task: {name: math, train: ` + filepath.Join(data, "train.jsonl") + `, eval: [{name: t, path: ` + filepath.Join(data, "test.jsonl") + `}],
       tokenizer: ` + model + `, system_prompt: "Please reason step by step, and put your final answer within \\boxed{}."}
model: {hf: ` + model + `, max_len: 128}
rollout: {n: 2, max_response_tokens: 8` + c.rollout + `}
train: {steps: 2, prompts_per_step: 2, checkpoint_every: 1, value_heads: 4, micro_batch_size: ` + fmt.Sprint(c.micro) + `}
eval: {every: 0, k: 1}
` + c.algo + "\n"
			file := filepath.Join(t.TempDir(), "hf.yaml")
			os.WriteFile(file, []byte(yaml), 0o644)
			cfg, err := trainer.LoadConfig(trainer.LoadOptions{File: file, Env: []string{}})
			if err != nil {
				t.Fatal(err)
			}
			run := filepath.Join(t.TempDir(), "run")
			if err := session.Train(context.Background(), session.TrainOptions{Config: cfg, RunDir: run, Log: zerolog.Nop()}); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(filepath.Join(run, "metrics.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var rows []map[string]any
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				var m map[string]any
				json.Unmarshal(sc.Bytes(), &m)
				rows = append(rows, m)
			}
			if len(rows) != 3 || rows[0]["actor/grad_norm"] == nil || rows[2]["val/t/avg@1"] == nil {
				t.Fatalf("%d metric rows: %v", len(rows), rows)
			}
			if strings.Contains(c.algo, "name: ppo") && (rows[0]["critic/head_std"] == nil || rows[0]["critic/vf_loss"] == nil) {
				t.Fatalf("no critic metrics: %v", rows[0])
			}
			if c.rollout != "" {
				// The float32 rescoring differs from the bfloat16 sampler,
				// and every token carries a TIS weight.
				d, _ := rows[0]["rollout/logprob_abs_diff"].(float64)
				if d <= 0 || d > 0.1 || rows[0]["rollout/tis_weight_mean"] == nil {
					t.Fatalf("bfloat16 sampling: rollout/logprob_abs_diff %v (want in (0, 0.1]), tis_weight_mean %v", rows[0]["rollout/logprob_abs_diff"], rows[0]["rollout/tis_weight_mean"])
				}
			}
			if c.name != "grpo" {
				return
			}
			// Export the newest checkpoint, load it as a HF model and score:
			// the same log-probs as the run's backend on that checkpoint.
			out := filepath.Join(t.TempDir(), "export")
			if err := session.ExportHF(run, -1, out, safetensors.F32, zerolog.Nop()); err != nil {
				t.Fatal(err)
			}
			if err := session.ExportHF(run, -1, out, safetensors.F32, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "exists") {
				t.Fatalf("export over an existing directory: %v", err)
			}
			m, err := xla.LoadHF(out, "cpu", "")
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			rc, err := session.ResumeConfig(run, nil)
			if err != nil {
				t.Fatal(err)
			}
			rc.Model.Checkpoint = ""
			s, err := session.New(rc, zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ck, _ := trainer.LatestCheckpoint(run)
			if err := s.LoadPolicy(ck); err != nil {
				t.Fatal(err)
			}
			prompt := []int32{151644, 872, 198, 3838, 374, 220, 17, 10, 17, 30}
			resp := []int32{151645, 198, 151644, 77091, 198, 17}
			want, _, err := s.Backend.ScoreLogProbs([]*core.Sequence{{Prompt: prompt, Response: resp}}, 1)
			if err != nil {
				t.Fatal(err)
			}
			got, err := m.LogProbs(append(append([]int32{}, prompt...), resp...), len(prompt))
			if err != nil {
				t.Fatal(err)
			}
			worst := 0.0
			for j := range resp {
				worst = max(worst, math.Abs(float64(got[j])-want[0][j]))
			}
			t.Logf("exported model vs the run's checkpoint: max |d log p| = %.3g", worst)
			if worst > 1e-5 {
				t.Fatalf("exported %v, run %v", got, want[0])
			}
			for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} {
				if _, err := os.Stat(filepath.Join(out, f)); err != nil {
					t.Fatal(err)
				}
			}
			// --run of score and generate: ModelDir exports the newest
			// checkpoint to a temporary directory; generate --logprobs on it
			// returns the sampler's (KV-cache) log-probs, which at
			// temperature 1 equal the full forward's of the export.
			md, done, err := session.ModelDir("", run, -1, zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			tok, err := tokenizer.Load(md)
			if err != nil {
				t.Fatal(err)
			}
			gens, err := session.GenerateHF(session.GenerateOptions{Model: md, Engine: "cpu", N: 2, Temperature: 1, MaxTokens: 6, Seed: 3, LogProbs: true}, []string{"What is 2+2?"})
			if err != nil {
				t.Fatal(err)
			}
			ids := tok.Encode("What is 2+2?")
			for i, c := range gens[0] {
				if len(c.TokenIDs) != c.Tokens || len(c.LogProbs) != c.Tokens || c.Tokens == 0 {
					t.Fatalf("completion %d: %d tokens, ids %v, log-probs %v", i, c.Tokens, c.TokenIDs, c.LogProbs)
				}
				full, err := m.LogProbs(append(append([]int32{}, ids...), c.TokenIDs...), len(ids))
				if err != nil {
					t.Fatal(err)
				}
				for j := range full {
					if math.Abs(float64(full[j])-c.LogProbs[j]) > 1e-4 {
						t.Fatalf("completion %d token %d: sampler log-prob %v, forward %v", i, j, c.LogProbs[j], full[j])
					}
				}
			}
			done()
			if _, err := os.Stat(md); !os.IsNotExist(err) {
				t.Errorf("the temporary export %s is still there (%v)", md, err)
			}
			for _, bad := range []struct {
				model, run string
				step       int
				want       string
			}{{"", "", -1, "exactly one"}, {model, run, -1, "exactly one"}, {model, "", 3, "--step applies to --run"}} {
				if _, _, err := session.ModelDir(bad.model, bad.run, bad.step, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), bad.want) {
					t.Errorf("ModelDir(%q, %q, %d): %v", bad.model, bad.run, bad.step, err)
				}
			}
			// A reader that is not cde's: the independent PyTorch forward
			// (backends/xla/testdata/hf_ref.py) finds the exported tensors
			// by their Hugging Face names and the sizes in config.json.
			seq := append(append([]int32{}, prompt...), resp...)
			ref := torchRef(t, out, seq[:len(seq)-1], seq[1:])
			if ref == nil {
				return
			}
			worst = 0
			for j := range resp {
				worst = max(worst, math.Abs(ref[len(prompt)-1+j]-want[0][j]))
			}
			t.Logf("exported model read by hf_ref.py vs the run's checkpoint: max |d log p| = %.3g", worst)
			if worst > 1e-4 {
				t.Fatalf("hf_ref.py on the export: %v, run %v", ref[len(prompt)-1:], want[0])
			}
		})
	}
	// Sizes come from config.json: setting one with model.hf is an error.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("task: {name: arith}\nmodel: {hf: "+model+", layers: 3}\n"), 0o644)
	if _, err := trainer.LoadConfig(trainer.LoadOptions{File: bad, Env: []string{}}); err == nil || !strings.Contains(err.Error(), "model.layers: not with model.hf") {
		t.Fatalf("err = %v", err)
	}
}

// Every config under examples/ loads (keys and values checked).
func TestExamplesLoad(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "examples", "*.yaml"))
	if len(files) == 0 {
		t.Fatal("no examples")
	}
	for _, f := range files {
		if _, err := trainer.LoadConfig(trainer.LoadOptions{File: f, Env: []string{}}); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// torchRef scores one sequence of the model in dir with the independent
// PyTorch reference: log p(targets[t] | tokens[:t+1]); nil without
// PyTorch (it is optional, as in backends/xla).
func torchRef(t *testing.T, dir string, tokens, targets []int32) []float64 {
	t.Helper()
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import torch").Run(); err != nil {
		t.Log("PyTorch is not installed (apt-get install python3-torch): the export is not read by the independent reference")
		return nil
	}
	b, _ := json.Marshal(map[string]any{"tokens": [][]int32{tokens}, "targets": [][]int32{targets}})
	batch := filepath.Join(t.TempDir(), "batch.json")
	if err := os.WriteFile(batch, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, filepath.Join("..", "backends", "xla", "testdata", "hf_ref.py"), dir, batch)
	cmd.Env = append(os.Environ(), "OMP_NUM_THREADS=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hf_ref.py: %v\n%s", err, out)
	}
	var r struct{ Logprobs [][]float64 }
	if err := json.Unmarshal(out, &r); err != nil || len(r.Logprobs) != 1 || len(r.Logprobs[0]) != len(targets) {
		t.Fatalf("hf_ref.py output %s: %v", out, err)
	}
	return r.Logprobs[0]
}
