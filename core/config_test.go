package core

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadConfigLayers checks the order defaults < file < layers < env <
// sets, that maps merge key by key and lists replace, and that a bad key in
// a layer is an error naming it.
func TestLoadConfigLayers(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(file, []byte("seed: 5\ntrain: {steps: 7, prompts_per_step: 3}\nstrategies: [{name: entropy}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(LoadOptions{
		File: file,
		Layers: [][]byte{
			[]byte("train: {steps: 9}\nstrategies: [{name: ppl}, {name: simhash}]\n"),
			[]byte("seed: 6\n"),
		},
		Env:  []string{"CDE_SEED=8"},
		Sets: nil,
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Train.Steps != 9 || cfg.Train.PromptsPerStep != 3 {
		t.Errorf("train = %+v, want steps 9 from the layer and prompts_per_step 3 from the file", cfg.Train)
	}
	if len(cfg.Strategies) != 2 || cfg.Strategies[0]["name"] != "ppl" {
		t.Errorf("strategies = %v, want the layer's list to replace the file's", cfg.Strategies)
	}
	if cfg.Seed != 8 {
		t.Errorf("seed = %d, want 8 (env over layers)", cfg.Seed)
	}
	cfg, err = LoadConfig(LoadOptions{Layers: [][]byte{[]byte("seed: 6\n")}, Env: []string{}, Sets: []string{"seed=2"}})
	if err != nil || cfg.Seed != 2 {
		t.Errorf("seed = %v (%v), want 2 (sets over layers)", cfg, err)
	}
	for _, c := range []struct{ layer, want string }{
		{"trian: {steps: 3}\n", "trian"},
		{"train: {stepz: 3}\n", "train.stepz"},
		{"train: {steps: 3\n", "layer 0"},
	} {
		_, err := LoadConfig(LoadOptions{Layers: [][]byte{[]byte(c.layer)}, Env: []string{}})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("layer %q: error %v, want one naming %q", c.layer, err, c.want)
		}
	}
}
