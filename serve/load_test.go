package serve

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cde-rl/cde/backends/xla/hftest"
	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/session"
	"github.com/cde-rl/cde/tasks"
	"github.com/cde-rl/cde/trainer"
)

// sameWeights fails unless got scores a fixed sequence as want does.
func sameWeights(t *testing.T, what string, got, want *Model) {
	t.Helper()
	if !scoresEqual(t, got, want) {
		t.Fatalf("%s: the served model scores a fixed sequence differently from the expected weights", what)
	}
}

// scoresEqual reports whether a and b give a fixed sequence the same
// log-probs (to 1e-6).
func scoresEqual(t *testing.T, got, want *Model) bool {
	t.Helper()
	seq := []*core.Sequence{{Prompt: []int32{1, 20, 11, 21, 3}, Response: []int32{22, 30, 2}}}
	a, _, err := backendOf(got).ScoreLogProbs(seq, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := backendOf(want).ScoreLogProbs(seq, 1)
	if err != nil {
		t.Fatal(err)
	}
	for j := range a[0] {
		if math.Abs(a[0][j]-b[0][j]) > 1e-6 {
			return false
		}
	}
	return true
}

// --checkpoint takes a run directory (newest complete checkpoint, or
// --step), one of its checkpoint directories, or a bare directory holding
// a policy.gob; anything else is an error naming what is wrong.
func TestLoadCheckpointLayouts(t *testing.T) {
	m1, m2 := charModel(t, 11), charModel(t, 12)
	cfg, err := trainer.LoadConfig(trainer.LoadOptions{Env: []string{}, Sets: []string{`model.checkpoint=""`}})
	if err != nil {
		t.Fatal(err)
	}
	run := t.TempDir()
	if err := session.WriteResolvedConfig(run, cfg); err != nil {
		t.Fatal(err)
	}
	for step, m := range map[int]*Model{1: m1, 2: m2} {
		dir := filepath.Join(run, "checkpoints", fmt.Sprintf("step-%06d", step))
		if err := backendOf(m).Save(dir); err != nil {
			t.Fatal(err)
		}
		if err := trainer.WriteManifest(dir, step); err != nil {
			t.Fatal(err)
		}
	}
	bare := t.TempDir()
	if err := backendOf(m1).Save(bare); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		o    LoadOptions
		want *Model
	}{
		{"run, newest", LoadOptions{Checkpoint: run, Step: -1}, m2},
		{"run, --step 1", LoadOptions{Checkpoint: run, Step: 1}, m1},
		{"checkpoint dir", LoadOptions{Checkpoint: filepath.Join(run, "checkpoints", "step-000001"), Step: -1}, m1},
		{"bare policy.gob", LoadOptions{Checkpoint: bare, Step: -1}, m1},
	} {
		c.o.Engine = "cpu"
		m, err := Load(c.o)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		sameWeights(t, c.name, m, c.want)
		if m.MaxLen != 64 || m.Vocab != 101 || m.EOS != 2 {
			t.Fatalf("%s: max len %d, vocab %d, EOS %d", c.name, m.MaxLen, m.Vocab, m.EOS)
		}
		m.Close()
	}
	for _, c := range []struct {
		name string
		o    LoadOptions
		want string
	}{
		{"neither", LoadOptions{Step: -1}, "exactly one"},
		{"both", LoadOptions{Model: bare, Checkpoint: bare, Step: -1}, "exactly one"},
		{"empty dir", LoadOptions{Checkpoint: t.TempDir(), Step: -1}, "neither a run directory (config.yaml) nor a checkpoint (policy.gob)"},
		{"--step on a checkpoint", LoadOptions{Checkpoint: bare, Step: 3}, "--step applies to a run directory"},
		{"missing step", LoadOptions{Checkpoint: run, Step: 7}, "step-000007"},
	} {
		c.o.Engine = "cpu"
		if _, err := Load(c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: err = %v, want one containing %q", c.name, err, c.want)
		}
	}
}

// --model serves a Hugging Face model directory (a tiny random Qwen3 with
// the real tokenizer): a completion's log-probs are the backend's scoring,
// and the text is the tokenizer's decoding.
func TestLoadHFModel(t *testing.T) {
	dir := t.TempDir()
	if err := hftest.WriteTinyQwen3(dir, filepath.Join("..", "tokenizer", "testdata", "qwen3"), 1, 3); err != nil {
		t.Fatal(err)
	}
	m, err := Load(LoadOptions{Model: dir, Engine: "cpu", Step: -1, MaxLen: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Vocab != hftest.Qwen3Vocab || m.EOS != 151645 || m.MaxLen != 64 {
		t.Fatalf("vocab %d, EOS %d, max len %d", m.Vocab, m.EOS, m.MaxLen)
	}
	ts := newTestServer(t, m, Options{Name: filepath.Base(dir)})
	prompt := m.Tokenizer.Encode("Hello, world")
	body := fmt.Sprintf(`{"prompt": [%s], "max_tokens": 5, "temperature": 0.7, "logprobs": 1, "return_tokens_as_token_ids": true, "seed": 1}`,
		strings.Join(strings.Fields(fmt.Sprint(prompt)), ","))
	r := complete(t, ts.URL, body)
	toks := ids(t, r.Choices[0])
	lps, _, err := backendOf(m).ScoreLogProbs([]*core.Sequence{{Prompt: prompt, Response: toks}}, 0.7)
	if err != nil {
		t.Fatal(err)
	}
	for j, lp := range r.Choices[0].Logprobs.TokenLogprobs {
		if math.Abs(lp-lps[0][j]) > 1e-4 {
			t.Fatalf("token %d: served %v, scorer %v", j, lp, lps[0][j])
		}
	}
	text := toks
	if r.Choices[0].FinishReason == "stop" {
		text = toks[:len(toks)-1]
	}
	if r.Choices[0].Text != m.Tokenizer.Decode(text) || r.Model != filepath.Base(dir) {
		t.Fatalf("text %q, want %q; model %q", r.Choices[0].Text, m.Tokenizer.Decode(text), r.Model)
	}
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err != nil {
		t.Fatal(err)
	}
}

// --checkpoint RUN_DIR of a run that trained a Hugging Face model: the
// architecture comes from model.hf, the tokenizer from the task, the
// weights from the checkpoint's policy.gob; a reload from safetensors then
// replaces them.
func TestLoadHFRun(t *testing.T) {
	model := t.TempDir()
	if err := hftest.WriteTinyQwen3(model, filepath.Join("..", "tokenizer", "testdata", "qwen3"), 1, 3); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	for f, q := range map[string]string{"train.jsonl": "2+2", "test.jsonl": "3+3"} {
		if err := os.WriteFile(filepath.Join(data, f), []byte(`{"question": "What is `+q+`?", "answer": "#### 4"}`+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	yaml := `seed: 4
task: {name: math, train: ` + filepath.Join(data, "train.jsonl") + `, eval: [{name: t, path: ` + filepath.Join(data, "test.jsonl") + `}], tokenizer: ` + model + `}
model: {hf: ` + model + `, max_len: 64, checkpoint: ""}
`
	file := filepath.Join(t.TempDir(), "hf.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := trainer.LoadConfig(trainer.LoadOptions{File: file, Env: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	// The "trained" weights: random ones from seed 5, neither the model
	// directory's nor those the run's config (seed 4) draws before loading.
	seed5 := *cfg
	seed5.Seed = 5
	trained, err := FromConfig(&seed5, "cpu", "")
	if err != nil {
		t.Fatal(err)
	}
	defer trained.Close()
	run := t.TempDir()
	if err := session.WriteResolvedConfig(run, cfg); err != nil {
		t.Fatal(err)
	}
	ckpt := filepath.Join(run, "checkpoints", "step-000003")
	if err := backendOf(trained).Save(ckpt); err != nil {
		t.Fatal(err)
	}
	if err := trainer.WriteManifest(ckpt, 3); err != nil {
		t.Fatal(err)
	}
	m, err := Load(LoadOptions{Checkpoint: run, Step: -1, Engine: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Vocab != hftest.Qwen3Vocab || m.EOS != 151645 || m.MaxLen != 64 {
		t.Fatalf("vocab %d, EOS %d, max len %d", m.Vocab, m.EOS, m.MaxLen)
	}
	sameWeights(t, "HF run checkpoint", m, trained)
	hfDir, err := Load(LoadOptions{Model: model, Engine: "cpu", Step: -1, MaxLen: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer hfDir.Close()
	if scoresEqual(t, m, hfDir) {
		t.Fatal("the checkpoint and the model directory hold the same weights: the reload check proves nothing")
	}
	if err := m.Engine.LoadPolicyWeights(model); err != nil {
		t.Fatal(err)
	}
	sameWeights(t, "reloaded from model.safetensors", m, hfDir)
}

// serve stops where training and HF do: generation_config.json's eos ids
// replace config.json's (they are not merged).
func TestLoadHFStopIDs(t *testing.T) {
	dir := t.TempDir()
	if err := hftest.WriteTinyQwen3(dir, filepath.Join("..", "tokenizer", "testdata", "qwen3"), 1, 3); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "config.json")
	b, _ := os.ReadFile(cfgPath)
	os.WriteFile(cfgPath, []byte(strings.Replace(string(b), `"eos_token_id": 151645`, `"eos_token_id": 151643`, 1)), 0o644)
	for _, tc := range []struct {
		generation string
		extra      []int32
	}{
		{``, []int32{151643}}, // config.json's id beside the tokenizer's eos_token
		{`{"eos_token_id": [151645]}`, nil},
		{`{"eos_token_id": [151645, 151644]}`, []int32{151644}},
	} {
		os.Remove(filepath.Join(dir, "generation_config.json"))
		if tc.generation != "" {
			os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(tc.generation), 0o644)
		}
		m, err := Load(LoadOptions{Model: dir, Engine: "cpu", Step: -1, MaxLen: 64})
		if err != nil {
			t.Fatal(err)
		}
		m.Close()
		if m.EOS != 151645 || !slices.Equal(m.ExtraEOS, tc.extra) {
			t.Errorf("generation_config %q: EOS %d, extra %v; want 151645 and %v", tc.generation, m.EOS, m.ExtraEOS, tc.extra)
		}
	}
}

// serve --checkpoint RUN works from any working directory: a run made
// with relative paths (task.tokenizer, model.hf) finds them from the
// directory above the run it was started in, and reads no training file
// (here deleted) to get its tokenizer.
func TestLoadRunFromAnyDirectory(t *testing.T) {
	root := t.TempDir()
	model := filepath.Join(root, "models", "tiny")
	if err := os.MkdirAll(model, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := hftest.WriteTinyQwen3(model, filepath.Join("..", "tokenizer", "testdata", "qwen3"), 1, 3); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "data", "train.jsonl"), []byte(`{"question": "What is 2+2?", "answer": "#### 4"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(root)
	cfg, err := trainer.LoadConfig(trainer.LoadOptions{Env: []string{}, Layers: [][]byte{[]byte(`seed: 4
task: {name: math, train: data/train.jsonl, tokenizer: models/tiny}
model: {hf: models/tiny, max_len: 64, checkpoint: ""}
`)}})
	if err != nil {
		t.Fatal(err)
	}
	trained, err := FromConfig(cfg, "cpu", "")
	if err != nil {
		t.Fatal(err)
	}
	defer trained.Close()
	run := filepath.Join(root, "runs", "r1")
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := session.WriteResolvedConfig(run, cfg); err != nil {
		t.Fatal(err)
	}
	ckpt := filepath.Join(run, "checkpoints", "step-000001")
	if err := backendOf(trained).Save(ckpt); err != nil {
		t.Fatal(err)
	}
	if err := trainer.WriteManifest(ckpt, 1); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(root, "data", "train.jsonl")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	for _, dir := range []string{run, ckpt} {
		m, err := Load(LoadOptions{Checkpoint: dir, Step: -1, Engine: "cpu"})
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		// The run's task decides the template: Qwen3's, detected, with the
		// task's enable_thinking (default false), as the run trained.
		if m.Vocab != hftest.Qwen3Vocab || m.EOS != 151645 || m.Template != (tasks.ChatTemplate{Name: tasks.ChatQwen3}) {
			t.Fatalf("%s: vocab %d, EOS %d, template %+v", dir, m.Vocab, m.EOS, m.Template)
		}
		sameWeights(t, dir, m, trained)
		m.Close()
	}
	// Moved away, the model directory is an error naming the key.
	if err := os.Rename(filepath.Join(root, "models"), filepath.Join(root, "elsewhere")); err != nil {
		t.Fatal(err)
	}
	_, err = Load(LoadOptions{Checkpoint: run, Step: -1, Engine: "cpu"})
	if err == nil || !strings.Contains(err.Error(), "model.hf: models/tiny is relative to the directory the run was started from") {
		t.Fatalf("err = %v", err)
	}
}
