package peft

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cde-rl/cde/backends/xla/safetensors"
)

// MergeInto against a product worked by hand: A = [[1, 2, 0], [0, 1, -1]]
// (r 2, in 3), B = [[1, 0], [2, 1]] (out 2), so B A = [[1, 2, 0], [2, 5, -1]];
// with scale 0.5 added to W = [[1, 1, 1], [0, 0, 0]]:
// [[1.5, 2, 1], [1, 2.5, -0.5]].
func TestMergeIntoByHand(t *testing.T) {
	w := []float32{1, 1, 1, 0, 0, 0}
	MergeInto(w, []float32{1, 2, 0, 0, 1, -1}, []float32{1, 0, 2, 1}, 2, 3, 2, 0.5)
	if want := []float32{1.5, 2, 1, 1, 2.5, -0.5}; !slices.Equal(w, want) {
		t.Fatalf("got %v, want %v", w, want)
	}
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ConfigFile), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestReadConfig(t *testing.T) {
	ok := `{"peft_type": "LORA", "r": 8, "lora_alpha": 16, "lora_dropout": 0.05, "bias": "none", "target_modules": ["v_proj", "q_proj"]}`
	c, err := ReadConfig(writeConfig(t, ok))
	if err != nil {
		t.Fatal(err)
	}
	if c.Rank != 8 || c.Alpha != 16 || c.Scale() != 2 || c.Dropout != 0.05 || !slices.Equal(c.Targets, []string{"q_proj", "v_proj"}) {
		t.Fatalf("%+v", c)
	}
	all, err := ReadConfig(writeConfig(t, `{"peft_type": "LORA", "r": 4, "lora_alpha": 4, "target_modules": "all-linear"}`))
	if err != nil || !slices.Equal(all.Targets, Modules) {
		t.Fatalf("all-linear: %v %v", all.Targets, err)
	}
	dotted, err := ReadConfig(writeConfig(t, `{"peft_type": "LORA", "r": 4, "lora_alpha": 4, "target_modules": ["model.layers.0.mlp.down_proj", "down_proj"]}`))
	if err != nil || !slices.Equal(dotted.Targets, []string{"down_proj"}) {
		t.Fatalf("dotted names: %v %v", dotted.Targets, err)
	}
	for _, tc := range []struct{ body, want string }{
		{`{"peft_type": "LORA", "r": 8, "lora_alpha": 16, "target_modules": ["q_proj"], "use_rslora": true}`, "use_rslora is true: rsLoRA"},
		{`{"peft_type": "LORA", "r": 8, "lora_alpha": 16, "target_modules": ["q_proj"], "use_dora": true}`, "use_dora is true: DoRA"},
		{`{"peft_type": "IA3", "target_modules": ["q_proj"]}`, `peft_type "IA3"`},
		{`{"peft_type": "LORA", "r": 8, "lora_alpha": 16, "target_modules": ["q_proj"], "bias": "all"}`, `bias "all"`},
		{`{"peft_type": "LORA", "r": 8, "lora_alpha": 16, "target_modules": ["q_proj"], "modules_to_save": ["lm_head"]}`, "modules_to_save"},
		{`{"peft_type": "LORA", "r": 8, "lora_alpha": 16, "target_modules": ["q_proj"], "rank_pattern": {"q_proj": 4}}`, "rank_pattern"},
		{`{"peft_type": "LORA", "r": 8, "lora_alpha": 16, "target_modules": ["q_proj"], "layers_to_transform": [0]}`, "layers_to_transform"},
		{`{"peft_type": "LORA", "r": 8, "lora_alpha": 16, "target_modules": ".*proj"}`, "regular expression"},
		{`{"peft_type": "LORA", "r": 8, "lora_alpha": 16, "target_modules": ["lm_head"]}`, `"lm_head" is not a projection`},
		{`{"peft_type": "LORA", "r": 0, "lora_alpha": 16, "target_modules": ["q_proj"]}`, "r = 0"},
		{`{"peft_type": "LORA", "r": 8, "target_modules": ["q_proj"]}`, "lora_alpha = 0"},
		{`{"peft_type": "LORA", "r": 8, "lora_alpha": 16}`, "target_modules: missing"},
		{`{"peft_type": "LORA", "r": 8,`, "unexpected end"},
	} {
		if _, err := ReadConfig(writeConfig(t, tc.body)); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), ConfigFile) {
			t.Errorf("%s: got %v, want an error naming the file and %q", tc.body, err, tc.want)
		}
	}
}

// Write then Read gives back the tensors under PEFT's key names, and
// Read refuses tensors that are not a targeted module's A or B.
func TestWriteRead(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ad")
	c := Config{Rank: 2, Alpha: 4, Targets: []string{"q_proj"}}
	m := "model.layers.0.self_attn.q_proj"
	a := map[string][]float32{m: {1, 2, 3, 4, 5, 6}}
	b := map[string][]float32{m: {7, 8, 9, 10}}
	if err := Write(dir, c, a, b, map[string]int{m: 3}, map[string]int{m: 2}); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Open(filepath.Join(dir, WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	if names := f.Names(); !slices.Equal(names, []string{"base_model.model." + m + ".lora_A.weight", "base_model.model." + m + ".lora_B.weight"}) {
		t.Fatalf("keys %v", names)
	}
	if _, info, _ := f.Float32(Key(m, "A")); !slices.Equal(info.Shape, []int{2, 3}) {
		t.Fatalf("lora_A shape %v, want [r, in] = [2, 3]", info.Shape)
	}
	f.Close()
	ad, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ad.A[m], a[m]) || !slices.Equal(ad.B[m], b[m]) || ad.In[m] != 3 || ad.Out[m] != 2 || !slices.Equal(ad.Modules(), []string{m}) {
		t.Fatalf("read back %+v", ad)
	}
	// A tensor of a module outside target_modules.
	bad := filepath.Join(t.TempDir(), "bad")
	c2 := Config{Rank: 2, Alpha: 4, Targets: []string{"q_proj", "v_proj"}}
	v := "model.layers.0.self_attn.v_proj"
	if err := Write(bad, c2, map[string][]float32{v: a[m]}, map[string][]float32{v: b[m]}, map[string]int{v: 3}, map[string]int{v: 2}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, ConfigFile), []byte(`{"peft_type": "LORA", "r": 2, "lora_alpha": 4, "target_modules": ["q_proj"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(bad); err == nil || !strings.Contains(err.Error(), "outside target_modules") {
		t.Fatalf("untargeted module: %v", err)
	}
}
