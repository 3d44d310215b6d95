package xla

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/cde-rl/cde/backends/xla/hf"
	"github.com/cde-rl/cde/backends/xla/hftest"
	"github.com/cde-rl/cde/backends/xla/safetensors"
	"github.com/cde-rl/cde/core"
)

// cde's own model: policy.gob in dir, which a backend with other weights
// loads to sample the same tokens.
func TestWriteServeWeightsOwnModel(t *testing.T) {
	b := tinyBackend(t, 0)
	dir := filepath.Join(t.TempDir(), "reload")
	if err := b.WriteServeWeights(dir, ""); err != nil {
		t.Fatal(err)
	}
	other, err := New(Options{Engine: "cpu", Policy: ModelConfig{Vocab: 12, Layers: 2, DModel: 16, Heads: 2, MaxLen: 32},
		Seed: 99, ActorLR: 1e-2, PAD: 0, EOS: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Load(dir); err != nil {
		t.Fatal(err)
	}
	req := core.GenerateRequest{Prompts: [][]int32{{1, 5, 6}, {1, 7}}, Temperature: 1, MaxTokens: 6, Seed: 4}
	want, _ := b.Generate(req)
	got, err := other.Generate(req)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if !slices.Equal(got[i].Tokens, want[i].Tokens) || !slices.Equal(got[i].LogProbs, want[i].LogProbs) {
			t.Errorf("prompt %d: reloaded policy sampled %v (%v), the original %v (%v)", i, got[i].Tokens, got[i].LogProbs, want[i].Tokens, want[i].LogProbs)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "policy.gob" {
		t.Errorf("dir holds %v, want only policy.gob (no temporary left)", entries)
	}
}

// A Hugging Face policy: model.safetensors in F32 holds exactly the
// checkpoint's weights (BF16 widens exactly) under its names, and
// config.json is the source's with torch_dtype float32.
func TestWriteServeWeightsHF(t *testing.T) {
	src := t.TempDir()
	if err := hftest.WriteTinyQwen3(src, filepath.Join("..", "..", "tokenizer", "testdata", "qwen3"), 1, 3); err != nil {
		t.Fatal(err)
	}
	hc, err := hf.LoadConfig(src)
	if err != nil {
		t.Fatal(err)
	}
	set, err := safetensors.OpenDir(src)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	b, err := New(Options{Engine: "cpu", Policy: HFModelConfig(hc, 64), HFWeights: set, Seed: 1, ActorLR: 1e-3, PAD: 0, EOS: 151645})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	dir := filepath.Join(t.TempDir(), "reload")
	if err := b.WriteServeWeights(dir, src); err != nil {
		t.Fatal(err)
	}
	out, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	names, srcNames := out.Names(), set.Names()
	sort.Strings(names)
	sort.Strings(srcNames)
	if !slices.Equal(names, srcNames) {
		t.Fatalf("tensors %v, the checkpoint has %v", names, srcNames)
	}
	for _, n := range names {
		got, info, err := out.Float32(n)
		if err != nil {
			t.Fatal(err)
		}
		want, winfo, _ := set.Float32(n)
		if info.DType != safetensors.F32 || !slices.Equal(info.Shape, winfo.Shape) || !slices.Equal(got, want) {
			t.Errorf("%s: dtype %s shape %v, values equal %v; want F32, shape %v, the checkpoint's values", n, info.DType, info.Shape, slices.Equal(got, want), winfo.Shape)
		}
	}
	var cfg, srcCfg map[string]any
	data, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(filepath.Join(src, "config.json"))
	json.Unmarshal(data, &srcCfg)
	if cfg["torch_dtype"] != "float32" || cfg["hidden_size"] != srcCfg["hidden_size"] || cfg["vocab_size"] != srcCfg["vocab_size"] {
		t.Errorf("config.json %v: want the source's with torch_dtype float32", cfg)
	}
}
