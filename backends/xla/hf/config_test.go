package hf

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// qwen3Small has the published Qwen3-0.6B config.json values.
const qwen3Small = `{
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
  "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000,
  "sliding_window": null, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0", "use_cache": true, "use_sliding_window": false, "vocab_size": 151936
}`

// llama32 has the published Llama-3.2-1B config.json values.
const llama32 = `{
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu",
  "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16", "vocab_size": 128256
}`

// qwen25 has the shape of the published Qwen2.5-Math-1.5B config.json.
const qwen25 = `{
  "architectures": ["Qwen2ForCausalLM"], "bos_token_id": 151643, "eos_token_id": 151643,
  "hidden_act": "silu", "hidden_size": 1536, "intermediate_size": 8960,
  "max_position_embeddings": 4096, "max_window_layers": 21, "model_type": "qwen2",
  "num_attention_heads": 12, "num_hidden_layers": 28, "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06, "rope_theta": 10000, "sliding_window": 4096,
  "tie_word_embeddings": true, "use_sliding_window": false, "vocab_size": 151936
}`

func TestParseConfig(t *testing.T) {
	for _, c := range []struct {
		name string
		json string
		want Config
	}{
		{"qwen3-0.6b", qwen3Small, Config{Arch: Qwen3, Vocab: 151936, Hidden: 1024, Intermediate: 3072, Layers: 28, Heads: 16, KVHeads: 8,
			HeadDim: 128, RMSNormEps: 1e-6, RopeTheta: 1e6, MaxPositions: 40960, TieEmbeddings: true, QKNorm: true, BOS: 151643, EOS: []int{151645}}},
		{"llama-3.2-1b", llama32, Config{Arch: Llama, Vocab: 128256, Hidden: 2048, Intermediate: 8192, Layers: 16, Heads: 32, KVHeads: 8,
			HeadDim: 64, RMSNormEps: 1e-5, RopeTheta: 500000, MaxPositions: 131072, TieEmbeddings: true,
			RopeLlama3: &RopeLlama3{Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 8192}, BOS: 128000, EOS: []int{128001}}},
		{"qwen2.5-math-1.5b", qwen25, Config{Arch: Qwen2, Vocab: 151936, Hidden: 1536, Intermediate: 8960, Layers: 28, Heads: 12, KVHeads: 2,
			HeadDim: 128, RMSNormEps: 1e-6, RopeTheta: 10000, MaxPositions: 4096, TieEmbeddings: true, QKVBias: true, BOS: 151643, EOS: []int{151643}}},
		{"mistral, defaults", `{"architectures": ["MistralForCausalLM"], "vocab_size": 32000, "hidden_size": 64, "intermediate_size": 128,
			"num_hidden_layers": 2, "num_attention_heads": 4, "rms_norm_eps": 1e-5, "max_position_embeddings": 512, "sliding_window": null}`,
			Config{Arch: Mistral, Vocab: 32000, Hidden: 64, Intermediate: 128, Layers: 2, Heads: 4, KVHeads: 4, HeadDim: 16,
				RMSNormEps: 1e-5, RopeTheta: 10000, MaxPositions: 512, BOS: -1}},
		{"llama attention_bias", strings.Replace(llama32, `"attention_bias": false`, `"attention_bias": true`, 1),
			Config{Arch: Llama, Vocab: 128256, Hidden: 2048, Intermediate: 8192, Layers: 16, Heads: 32, KVHeads: 8,
				HeadDim: 64, RMSNormEps: 1e-5, RopeTheta: 500000, MaxPositions: 131072, TieEmbeddings: true, QKVBias: true, OBias: true,
				RopeLlama3: &RopeLlama3{Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 8192}, BOS: 128000, EOS: []int{128001}}},
	} {
		got, err := ParseConfig([]byte(c.json))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		want := c.want
		want.ConfigEOS = want.EOS // config.json alone: its eos_token_id
		if !reflect.DeepEqual(*got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, *got, want)
		}
	}
}

func TestParseConfigErrors(t *testing.T) {
	set := func(base, old, new string) string {
		if !strings.Contains(base, old) {
			panic(old)
		}
		return strings.Replace(base, old, new, 1)
	}
	for _, c := range []struct {
		name, json, want string
	}{
		{"architecture", set(qwen3Small, `"Qwen3ForCausalLM"`, `"GemmaForCausalLM"`), `architectures ["GemmaForCausalLM"]: want one of LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, MistralForCausalLM`},
		{"missing hidden", set(qwen3Small, `"hidden_size": 1024,`, ``), "hidden_size: missing"},
		{"gelu", set(qwen3Small, `"hidden_act": "silu"`, `"hidden_act": "gelu"`), `hidden_act "gelu": only silu`},
		{"gqa", set(qwen3Small, `"num_key_value_heads": 8`, `"num_key_value_heads": 5`), "not a multiple of num_key_value_heads = 5"},
		{"odd head_dim", set(qwen3Small, `"head_dim": 128`, `"head_dim": 127`), "head_dim = 127: must be even"},
		{"eps", set(qwen3Small, `"rms_norm_eps": 1e-06`, `"rms_norm_eps": 0`), "rms_norm_eps = 0"},
		{"qwen3 sliding", set(qwen3Small, `"use_sliding_window": false`, `"use_sliding_window": true`), "use_sliding_window = true: not implemented"},
		{"qwen3 layer types", set(qwen3Small, `"use_cache": true`, `"layer_types": ["full_attention", "sliding_attention"]`), `layer_types[1] = "sliding_attention"`},
		{"qwen3 bias", set(qwen3Small, `"attention_bias": false`, `"attention_bias": true`), "attention_bias = true: not implemented"},
		{"qwen2 sliding", set(qwen25, `"use_sliding_window": false`, `"use_sliding_window": true`), "use_sliding_window = true"},
		{"mistral window", `{"architectures": ["MistralForCausalLM"], "vocab_size": 32, "hidden_size": 8, "intermediate_size": 8, "num_hidden_layers": 1,
			"num_attention_heads": 2, "rms_norm_eps": 1e-5, "max_position_embeddings": 8, "sliding_window": 4096}`, "sliding_window = 4096: sliding-window attention is not implemented"},
		{"llama mlp bias", set(llama32, `"mlp_bias": false`, `"mlp_bias": true`), "mlp_bias = true"},
		{"rope yarn", set(llama32, `"rope_type": "llama3"`, `"rope_type": "yarn"`), `rope_scaling: rope_type "yarn": only llama3`},
		{"rope linear old key", set(llama32, `"rope_type": "llama3"`, `"type": "linear"`), `rope_type "linear"`},
		{"rope llama3 fields", set(llama32, `"low_freq_factor": 1.0,`, ``), "rope_scaling: low_freq_factor: missing"},
		{"partial rotary", set(qwen3Small, `"use_cache": true`, `"partial_rotary_factor": 0.5`), "partial_rotary_factor = 0.5"},
		{"softcap", set(qwen3Small, `"use_cache": true`, `"final_logit_softcapping": 30.0`), "soft-capping"},
		{"eos outside", set(qwen3Small, `"eos_token_id": 151645`, `"eos_token_id": 200000`), "token id 200000"},
		{"wrong type", set(qwen3Small, `"num_hidden_layers": 28`, `"num_hidden_layers": "28"`), `num_hidden_layers: "28": want *int`},
	} {
		_, err := ParseConfig([]byte(c.json))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
}

func TestLoadConfigGeneration(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(qwen3Small), 0o644)
	os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(`{"eos_token_id": [151645, 151643], "bos_token_id": 151643}`), 0o644)
	c, err := LoadConfig(dir)
	if err != nil || !reflect.DeepEqual(c.EOS, []int{151645, 151643}) {
		t.Fatalf("%v %v", c, err)
	}
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{`), 0o644)
	if _, err := LoadConfig(dir); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Fatalf("err = %v", err)
	}
}

// RopeInvFreq: theta^(-2i/d) and Llama-3.1's rescaling in each of its three
// regimes (values worked out with a calculator in the comments).
func TestRopeInvFreq(t *testing.T) {
	c := &Config{HeadDim: 6, RopeTheta: 1e6}
	// 1e6^(-0/6), 1e6^(-2/6), 1e6^(-4/6)
	want := []float64{1, 0.01, 1e-4}
	check := func(got, want []float64) {
		t.Helper()
		for i := range want {
			if math.Abs(got[i]-want[i]) > 1e-12*math.Max(1, want[i]) && math.Abs(got[i]/want[i]-1) > 1e-9 {
				t.Fatalf("inv freq %v, want %v", got, want)
			}
		}
	}
	check(c.RopeInvFreq(), want)
	// Wavelengths 2 pi / f: 6.28, 628.3, 62831.9. With original 8192, low 1,
	// high 4: low wavelength 8192, high 2048: the first two are kept, the
	// third (62831.9 > 8192) is divided by the factor 8.
	c.RopeLlama3 = &RopeLlama3{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 8192}
	check(c.RopeInvFreq(), []float64{1, 0.01, 1.25e-5})
	// With original 100000: low 100000, high 25000, so 62831.9 is in
	// between: smooth = (100000/62831.85 - 1) / 3 = 0.19718314,
	// f = (1 - smooth) * 1e-4 / 8 + smooth * 1e-4 = 2.9753525e-05.
	c.RopeLlama3.OriginalMaxPositions = 100000
	check(c.RopeInvFreq(), []float64{1, 0.01, 2.975352506846951e-05})
}

// StopIDs follows Hugging Face's rule: generation_config.json's
// eos_token_id, else config.json's, else the tokenizer's eos_token.
func TestStopIDs(t *testing.T) {
	base := `{"architectures": ["Qwen3ForCausalLM"], "vocab_size": 200, "hidden_size": 16, "intermediate_size": 32,
		"num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "rms_norm_eps": 1e-6, "max_position_embeddings": 64%s}`
	for _, tc := range []struct {
		name, config, generation string // generation "" = no file
		tokEOS                   int
		want                     []int
		from                     string
	}{
		{"generation_config wins over config.json", `, "eos_token_id": 150`, `{"eos_token_id": [151, 152]}`, 151, []int{151, 152}, "generation_config.json"},
		{"generation_config as one integer", ``, `{"eos_token_id": 152}`, 151, []int{152}, "generation_config.json"},
		{"generation_config null: config.json", `, "eos_token_id": [150, 153]`, `{"eos_token_id": null}`, 151, []int{150, 153}, "config.json"},
		{"generation_config without the key: config.json", `, "eos_token_id": 150`, `{"bos_token_id": 1}`, 151, []int{150}, "config.json"},
		{"neither: the tokenizer's", ``, ``, 151, []int{151}, "tokenizer_config.json"},
		{"nothing at all", ``, ``, -1, nil, "none"},
	} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "config.json"), []byte(fmt.Sprintf(base, tc.config)), 0o644)
		if tc.generation != "" {
			os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(tc.generation), 0o644)
		}
		c, err := LoadConfig(dir)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		ids, from := c.StopIDs(tc.tokEOS)
		if !reflect.DeepEqual(ids, tc.want) || !strings.HasPrefix(from, tc.from) {
			t.Errorf("%s: %v from %q, want %v from %s", tc.name, ids, from, tc.want, tc.from)
		}
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(fmt.Sprintf(base, "")), 0o644)
	os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(`{"eos_token_id": [151, 900]}`), 0o644)
	if _, err := LoadConfig(dir); err == nil || !strings.Contains(err.Error(), "eos_token_id 900 outside the vocabulary of 200") {
		t.Errorf("an out-of-vocabulary generation eos id: %v", err)
	}
}
