package xla

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cde-rl/cde/backends/xla/safetensors"
	"github.com/cde-rl/cde/core"
)

// scoreOne is the backend's log-probs of response after prompt at T = 1.
func scoreOne(t *testing.T, b *Backend, prompt, response []int32) []float64 {
	t.Helper()
	lps, _, err := b.ScoreLogProbs([]*core.Sequence{{Prompt: prompt, Response: response}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	return lps[0]
}

func maxAbsDiff(a, b []float64) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(a[i]-b[i]))
	}
	return d
}

// A reload of cde's own transformer takes another backend's policy.gob: the
// served log-probs become that backend's own, and sampling under a seed
// gives its tokens. A policy.gob of other sizes, a missing file and a
// non-finite weight are refused, and the old weights keep serving.
func TestLoadPolicyWeightsGob(t *testing.T) {
	served := tinyBackend(t, 0)
	other, err := New(Options{Engine: "cpu", Policy: ModelConfig{Vocab: 12, Layers: 2, DModel: 16, Heads: 2, MaxLen: 32},
		Seed: 99, ActorLR: 1e-2, PAD: 0, EOS: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	dir := t.TempDir()
	if err := other.Save(dir); err != nil {
		t.Fatal(err)
	}
	prompt, resp := []int32{1, 5, 6}, []int32{7, 8, 3, 2}
	before, want := scoreOne(t, served, prompt, resp), scoreOne(t, other, prompt, resp)
	if maxAbsDiff(before, want) < 1e-3 {
		t.Fatalf("the two random policies agree (%v, %v): the test cannot tell a reload", before, want)
	}

	wrong, err := New(Options{Engine: "cpu", Policy: ModelConfig{Vocab: 12, Layers: 2, DModel: 24, Heads: 2, MaxLen: 32},
		Seed: 5, ActorLR: 1e-2, PAD: 0, EOS: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer wrong.Close()
	wrongDir := t.TempDir()
	if err := wrong.Save(wrongDir); err != nil {
		t.Fatal(err)
	}
	nanDir := t.TempDir()
	ck, err := other.policy.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// One weight of the model (not of its Adam state, which a reload
	// does not read).
	st, ok := ck.Vars["/layer1/wq"]
	if !ok {
		t.Fatalf("no variable /layer1/wq among the policy's")
	}
	st.Data[len(st.Data)-1] = float32(math.NaN())
	if err := writeGob(filepath.Join(nanDir, "policy.gob"), ck); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, dir, want string }{
		{"other sizes", wrongDir, "model sizes"},
		{"no file", t.TempDir(), "no policy.gob"},
		{"NaN weight", nanDir, "NaN"},
	} {
		err := served.LoadPolicyWeights(c.dir)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: err = %v, want one containing %q", c.name, err, c.want)
		}
		if d := maxAbsDiff(scoreOne(t, served, prompt, resp), before); d != 0 {
			t.Fatalf("%s: a refused reload changed the served log-probs by %v", c.name, d)
		}
	}

	if err := served.LoadPolicyWeights(dir); err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff(scoreOne(t, served, prompt, resp), want); d > 1e-6 {
		t.Fatalf("after reload the log-probs differ from the saved policy's by %v", d)
	}
	req := core.GenerateRequest{Prompts: [][]int32{prompt, {1, 4}}, Temperature: 0.9, MaxTokens: 8, Seed: 11}
	g1, err := served.Generate(req)
	if err != nil {
		t.Fatal(err)
	}
	g2, err := other.Generate(req)
	if err != nil {
		t.Fatal(err)
	}
	for i := range g1 {
		if !slices.Equal(g1[i].Tokens, g2[i].Tokens) {
			t.Fatalf("row %d: reloaded backend sampled %v, the saved one %v", i, g1[i].Tokens, g2[i].Tokens)
		}
	}
}

// A Hugging Face policy reloads from model.safetensors: the served
// log-probs become the new checkpoint's full forward (hfLogProbs, built
// from the file without the backend). A tensor of the wrong shape, an
// extra tensor and a missing one are refused by name, and the old weights
// keep serving.
func TestLoadPolicyWeightsSafetensors(t *testing.T) {
	dirA, c := writeTinyHF(t, "qwen3", safetensors.F32, 17)
	dirB, _ := writeTinyHF(t, "qwen3", safetensors.F32, 18)
	set, err := safetensors.OpenDir(dirA)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Options{Engine: "cpu", Policy: HFModelConfig(c, 32), Seed: 1, PAD: 0, EOS: 2, HFWeights: set})
	set.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	prompt, resp := []int32{5, 6, 7}, []int32{9, 3, 4, 2}
	full := append(append([]int32{}, prompt...), resp...)
	targets := append(append([]int32{}, full[1:]...), 0)
	forward := func(dir string) []float64 {
		ref := hfLogProbs(t, dir, c, [][]int32{full}, [][]int32{targets})[0]
		out := make([]float64, len(resp))
		for j := range resp {
			out[j] = float64(ref[len(prompt)-1+j])
		}
		return out
	}
	before, want := scoreOne(t, b, prompt, resp), forward(dirB)
	if maxAbsDiff(before, forward(dirA)) > 1e-5 || maxAbsDiff(before, want) < 1e-3 {
		t.Fatalf("served %v, checkpoint A %v, checkpoint B %v: the setup is wrong", before, forward(dirA), want)
	}

	// Broken copies of checkpoint B: one tensor's shape, an extra tensor,
	// a missing tensor.
	src, err := safetensors.OpenDir(dirB)
	if err != nil {
		t.Fatal(err)
	}
	var all []safetensors.Tensor
	for _, name := range src.Names() {
		v, info, err := src.Float32(name)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, safetensors.F32Tensor(name, info.Shape, v))
	}
	src.Close()
	broken := func(edit func([]safetensors.Tensor) []safetensors.Tensor) string {
		dir := t.TempDir()
		ts := edit(append([]safetensors.Tensor{}, all...))
		if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), ts, nil); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	norm := "model.norm.weight"
	for _, cs := range []struct {
		name, dir, want string
	}{
		{"wrong shape", broken(func(ts []safetensors.Tensor) []safetensors.Tensor {
			for i := range ts {
				if ts[i].Name == norm {
					ts[i] = safetensors.F32Tensor(norm, []int{c.Hidden + 1}, make([]float32, c.Hidden+1))
				}
			}
			return ts
		}), `"model.norm.weight" has shape`},
		{"extra tensor", broken(func(ts []safetensors.Tensor) []safetensors.Tensor {
			return append(ts, safetensors.F32Tensor("model.extra.weight", []int{2}, []float32{1, 2}))
		}), `"model.extra.weight" is not a weight`},
		{"missing tensor", broken(func(ts []safetensors.Tensor) []safetensors.Tensor {
			out := ts[:0]
			for _, x := range ts {
				if x.Name != norm {
					out = append(out, x)
				}
			}
			return out
		}), `"model.norm.weight" missing`},
		{"no file", t.TempDir(), "no model.safetensors"},
	} {
		err := b.LoadPolicyWeights(cs.dir)
		if err == nil || !strings.Contains(err.Error(), cs.want) {
			t.Fatalf("%s: err = %v, want one containing %q", cs.name, err, cs.want)
		}
		if d := maxAbsDiff(scoreOne(t, b, prompt, resp), before); d != 0 {
			t.Fatalf("%s: a refused reload changed the served log-probs by %v", cs.name, d)
		}
	}

	if err := b.LoadPolicyWeights(dirB); err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff(scoreOne(t, b, prompt, resp), want); d > 1e-5 {
		t.Fatalf("after reload the served log-probs differ from checkpoint B's forward by %v", d)
	}
	if _, err := os.Stat(filepath.Join(dirB, "model.safetensors")); err != nil {
		t.Fatal(err)
	}
}

// A row stops at a requested stop id as at EOS: the id is its last token,
// and it is not truncated. With every token id but EOS a stop id, every
// row stops after its first token.
func TestGenerateStopTokens(t *testing.T) {
	b := tinyBackend(t, 0)
	prompts := [][]int32{{1, 5, 6}, {1, 7}, {1, 4}}
	stops := []int32{0, 1, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	gens, err := b.Generate(core.GenerateRequest{Prompts: prompts, Temperature: 1, MaxTokens: 8, Seed: 2, StopTokens: stops})
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range gens {
		if len(g.Tokens) != 1 || g.Truncated {
			t.Fatalf("row %d: tokens %v, truncated %v: want one token, not truncated", i, g.Tokens, g.Truncated)
		}
	}
	// Without stop ids the same seed runs past the first token somewhere
	// (else the check above proves nothing).
	free, err := b.Generate(core.GenerateRequest{Prompts: prompts, Temperature: 1, MaxTokens: 8, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	longer := false
	for i, g := range free {
		if g.Tokens[0] != gens[i].Tokens[0] {
			t.Fatalf("row %d: first token %d with stop ids, %d without: stop ids changed sampling", i, gens[i].Tokens[0], g.Tokens[0])
		}
		longer = longer || len(g.Tokens) > 1
	}
	if !longer {
		t.Fatal("without stop ids every row also stopped at once: pick another seed")
	}
}
