package main

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cde-rl/cde/backends/xla"
	"github.com/cde-rl/cde/backends/xla/peft"
	"github.com/cde-rl/cde/backends/xla/safetensors"
)

// writeAdapter writes a random PEFT adapter on the q_proj and down_proj
// of every layer of the checkpoint in dir.
func writeAdapter(t *testing.T, dir string) string {
	t.Helper()
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	c := peft.Config{Rank: 2, Alpha: 4, Targets: []string{"q_proj", "down_proj"}}
	a, b, in, out := map[string][]float32{}, map[string][]float32{}, map[string]int{}, map[string]int{}
	for _, name := range set.Names() {
		m, ok := strings.CutSuffix(name, ".weight")
		if !ok || !c.Targeted(m) {
			continue
		}
		info, _ := set.Info(name)
		out[m], in[m] = info.Shape[0], info.Shape[1]
		a[m], b[m] = make([]float32, c.Rank*in[m]), make([]float32, out[m]*c.Rank)
		for i := range a[m] {
			a[m][i] = float32(rng.NormFloat64() * 0.3)
		}
		for i := range b[m] {
			b[m][i] = float32(rng.NormFloat64() * 0.3)
		}
	}
	ad := filepath.Join(t.TempDir(), "adapter")
	if err := peft.Write(ad, c, a, b, in, out); err != nil {
		t.Fatal(err)
	}
	return ad
}

// score --adapter gives the log-probs of the base with the adapter merged
// (xla.LoadHFAdapter), which differ from the base's; an adapter using
// DoRA is refused by name; --adapter needs --model.
func TestScoreAdapter(t *testing.T) {
	dir := tinyQwen3Dir(t)
	ad := writeAdapter(t, dir)
	in := `{"prompt": "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n", "response": "It is \\boxed{4}.<|im_end|>"}` + "\n"
	score := func(adapter string) xla.HFScore {
		t.Helper()
		var out bytes.Buffer
		if err := runScore(dir, adapter, "cpu", "", strings.NewReader(in), &out); err != nil {
			t.Fatal(err)
		}
		var r xla.HFScore
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	with, without := score(ad), score("")
	m, err := xla.LoadHFAdapter(dir, ad, "cpu", "")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	want, err := m.LogProbs(append(append([]int32{}, with.PromptIDs...), with.ResponseIDs...), len(with.PromptIDs))
	if err != nil {
		t.Fatal(err)
	}
	same := true
	for j := range want {
		if want[j] != with.LogProbs[j] {
			t.Fatalf("token %d: score --adapter %v, merged model %v", j, with.LogProbs[j], want[j])
		}
		same = same && with.LogProbs[j] == without.LogProbs[j]
	}
	if same {
		t.Fatal("the adapter does not change the scores")
	}
	cfgPath := filepath.Join(ad, peft.ConfigFile)
	raw, _ := os.ReadFile(cfgPath)
	os.WriteFile(cfgPath, bytes.Replace(raw, []byte(`"use_dora": false`), []byte(`"use_dora": true`), 1), 0o644)
	if err := runScore(dir, ad, "cpu", "", strings.NewReader(in), &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "use_dora is true: DoRA") {
		t.Fatalf("a DoRA adapter: %v", err)
	}
	if code := cmdScore([]string{"--run", dir, "--adapter", ad}); code != 2 {
		t.Fatalf("--adapter with --run: exit %d, want 2", code)
	}
}
