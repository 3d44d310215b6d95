package trainer

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

// CDE_SECTION__KEY and CDE_SEED are config overrides; errors name the
// variable; CDE_* variables of tools are not config; a CDE_X__Y with an
// unknown section is an error naming it.
func TestEnvOverrides(t *testing.T) {
	cases := []struct {
		env  []string
		want string // error substring; "" = ok
	}{
		{[]string{"CDE_TRAIN__STEPS=7", "CDE_SEED=9"}, ""},
		{[]string{"CDE_BENCH_ENGINE=go", "CDE_CPU_OPSTATS=1", "CDE_STRATEGY_PLUGIN=x"}, ""},
		{[]string{"CDE_TRAIN__STEPS=abc"}, `train.steps: want an integer, got "abc" (a string) (set by environment variable CDE_TRAIN__STEPS)`},
		{[]string{"CDE_TRAIN__STPES=3"}, "(set by environment variable CDE_TRAIN__STPES)"},
		{[]string{"CDE_TRIAN__STEPS=3"}, "environment variable CDE_TRIAN__STEPS: trian is not a config section"},
	}
	for _, c := range cases {
		cfg, err := LoadConfig(LoadOptions{Env: c.env})
		if c.want == "" {
			if err != nil {
				t.Errorf("%v: %v", c.env, err)
			} else if c.env[0] == "CDE_TRAIN__STEPS=7" && (cfg.Train.Steps != 7 || cfg.Seed != 9) {
				t.Errorf("%v: steps %d seed %d", c.env, cfg.Train.Steps, cfg.Seed)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want %q", c.env, err, c.want)
		}
	}
	if got := ConfigEnvVars([]string{"CDE_BENCH_ENGINE=go", "PATH=/bin", "CDE_TRAIN__STEPS=1", "CDE_SEED=2", "CDE_X__Y=1"}); strings.Join(got, ",") != "CDE_SEED,CDE_TRAIN__STEPS,CDE_X__Y" {
		t.Errorf("ConfigEnvVars = %v", got)
	}
	if _, err := LoadConfig(LoadOptions{Env: []string{}, Sets: []string{"train.clip_low=2"}}); err == nil || !strings.Contains(err.Error(), "(set by --set train.clip_low=2)") {
		t.Errorf("--set error does not name the flag: %v", err)
	}
}

// Values with no sane meaning are refused with their documented bounds.
func TestConfigBounds(t *testing.T) {
	cases := []struct{ set, want string }{
		{"train.clip_high=5", "train.clip_high: must be in (0, 1], got 5"},
		{"train.actor_lr=1e6", "train.actor_lr: must be in (0, 1], got 1e+06"},
		{"train.critic_lr=2", "train.critic_lr: must be in (0, 1]"},
		{"train.entropy_coef=1.5", "train.entropy_coef: must be in [0, 1]"},
		{"train.kl_coef=11", "train.kl_coef: must be in [0, 10]"},
		{"rollout.temperature=50", "rollout.temperature: must be in (0, 10]"},
		{"eval.temperature=0", "eval.temperature: must be in (0, 10]"},
		{"pretrain.lr=3", "pretrain.lr: must be in (0, 1]"},
	}
	for _, c := range cases {
		_, err := LoadConfig(LoadOptions{Env: []string{}, Sets: []string{c.set}})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--set %s: got %v, want %q", c.set, err, c.want)
		}
	}
	for _, ok := range []string{"train.clip_high=1", "train.actor_lr=1", "rollout.temperature=0.01", "train.kl_coef=0"} {
		if _, err := LoadConfig(LoadOptions{Env: []string{}, Sets: []string{ok}}); err != nil {
			t.Errorf("--set %s: %v", ok, err)
		}
	}
}

// Keys with an empty element are refused naming the flag or variable.
func TestEmptyKeyElements(t *testing.T) {
	for _, c := range []struct {
		o    LoadOptions
		want string
	}{
		{LoadOptions{Env: []string{}, Sets: []string{"train..steps=5"}}, `--set "train..steps=5"`},
		{LoadOptions{Env: []string{}, Sets: []string{".=0"}}, `--set ".=0"`},
		{LoadOptions{Env: []string{"CDE_TRAIN____STEPS=5"}}, "environment variable CDE_TRAIN____STEPS"},
		{LoadOptions{Env: []string{"CDE_SEED__=5"}}, "environment variable CDE_SEED__"},
	} {
		if _, err := LoadConfig(c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", c.o, err, c.want)
		}
	}
}

// model.lora and model.adapter: off by default; set, they are read with
// their defaults; what is not implemented or cannot apply is refused
// naming the key.
func TestLoRAConfig(t *testing.T) {
	c, err := LoadConfig(LoadOptions{Env: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Model.LoRA != nil || c.Model.Adapter != "" {
		t.Fatalf("defaults: lora %+v adapter %q, want off", c.Model.LoRA, c.Model.Adapter)
	}
	c, err = LoadConfig(LoadOptions{Env: []string{}, Sets: []string{"model.hf=m", "model.lora.rank=8", "model.adapter=a"}})
	if err != nil {
		t.Fatal(err)
	}
	if l := c.Model.LoRA; l == nil || l.Rank != 8 || l.Alpha != 16 || l.Dropout != 0 || len(l.TargetModules) != 7 || c.Model.Adapter != "a" {
		t.Fatalf("lora %+v adapter %q", c.Model.LoRA, c.Model.Adapter)
	}
	c, err = LoadConfig(LoadOptions{Env: []string{}, Sets: []string{"model.hf=m", "model.lora={rank: 4, alpha: 8, target_modules: [q_proj, v_proj]}"}})
	if err != nil {
		t.Fatal(err)
	}
	if l := c.Model.LoRA; l.Rank != 4 || l.Alpha != 8 || strings.Join(l.TargetModules, ",") != "q_proj,v_proj" || l.BaseDType != "" {
		t.Fatalf("lora %+v", l)
	}
	c, err = LoadConfig(LoadOptions{Env: []string{}, Sets: []string{"model.hf=m", "model.lora.rank=8", "model.lora.base_dtype=bfloat16"}})
	if err != nil {
		t.Fatal(err)
	}
	if l := c.Model.LoRA; l.BaseDType != "bfloat16" {
		t.Fatalf("lora %+v, want base_dtype bfloat16", l)
	}
	for _, tc := range []struct {
		sets []string
		want string
	}{
		{[]string{"model.lora.rank=8"}, "model.lora.rank: adapters need a Hugging Face model (model.hf)"},
		{[]string{"model.hf=m", "model.lora.rank=8", "model.checkpoint=runs/x"}, "model.lora.rank: adapters train on model.hf's own weights"},
		{[]string{"model.hf=m", "model.lora.rank=8", "model.lora.dropout=0.05"}, "model.lora.dropout: only 0 is implemented"},
		{[]string{"model.hf=m", "model.lora.rank=8", "model.lora.alpha=0"}, "model.lora.alpha: must be > 0"},
		{[]string{"model.hf=m", "model.lora.rank=-1"}, "model.lora.rank: must be in [0, 4096]"},
		{[]string{"model.hf=m", "model.lora.rank=8", "model.lora.target_modules=[lm_head]"}, `model.lora.target_modules: "lm_head" is not a projection`},
		{[]string{"model.hf=m", "model.lora.rank=8", "model.lora.target_modules=[]"}, "model.lora.target_modules: empty"},
		{[]string{"model.hf=m", "model.lora.rank=8", "model.lora.target_modules=q_proj"}, "model.lora.target_modules: want a list of strings"},
		{[]string{"model.hf=m", "model.lora.rank=8", "model.lora.use_rslora=true"}, "model.lora.use_rslora: rsLoRA (scale alpha / sqrt(r)) is not implemented"},
		{[]string{"model.hf=m", "model.lora.rank=8", "model.lora.use_dora=true"}, "model.lora.use_dora: DoRA (weight-decomposed LoRA) is not implemented"},
		{[]string{"model.adapter=a"}, "model.adapter: a PEFT adapter needs the Hugging Face model it adapts (model.hf)"},
		{[]string{"model.lora.ranks=8"}, "model.lora.ranks: unknown key"},
		{[]string{"model.hf=m", "model.lora.rank=8", "model.lora.base_dtype=float16"}, `model.lora.base_dtype: "float16": want float32 or bfloat16`},
		{[]string{"model.hf=m", "model.lora.base_dtype=bfloat16"}, "model.lora.base_dtype: bfloat16 stores a LoRA run's frozen base weights"},
	} {
		_, err := LoadConfig(LoadOptions{Env: []string{}, Sets: tc.sets})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want %q", tc.sets, err, tc.want)
		}
	}
}
