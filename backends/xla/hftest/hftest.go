// Package hftest writes tiny random Hugging Face model directories for
// tests: a Qwen3-architecture checkpoint with the real Qwen3 vocabulary
// size, so the real tokenizer files fit it.
package hftest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/cde-rl/cde/backends/xla/safetensors"
	"github.com/cde-rl/cde/tokenizer"
)

// Qwen3Vocab is the embedding rows of Qwen3 checkpoints (the tokenizer's
// 151,669 tokens, padded).
const Qwen3Vocab = 151936

// WriteTinyQwen3 writes into dir a random Qwen3ForCausalLM checkpoint of
// width 16 (2 query heads, 1 KV head of 8, MLP width 32, tied embeddings,
// eos <|im_end|>) with the given layers, in BF16, and copies tokenizer.json
// and tokenizer_config.json from tokenizerDir. Where tokenizerDir has
// tokenizer.json.gz instead (tokenizer/testdata/qwen3 does), dir gets it
// decompressed, a plain tokenizer.json, as Hugging Face model directories
// have it.
func WriteTinyQwen3(dir, tokenizerDir string, layers int, seed uint64) error {
	if err := tokenizer.CopyFiles(dir, tokenizerDir); err != nil {
		return err
	}
	cfg := fmt.Sprintf(`{"architectures": ["Qwen3ForCausalLM"], "vocab_size": %d, "hidden_size": 16, "intermediate_size": 32, "head_dim": 8,
		"num_hidden_layers": %d, "num_attention_heads": 2, "num_key_value_heads": 1, "rms_norm_eps": 1e-6,
		"max_position_embeddings": 512, "rope_theta": 1000000.0, "tie_word_embeddings": true, "eos_token_id": 151645}`, Qwen3Vocab, layers)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o644); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(seed, 6))
	var ts []safetensors.Tensor
	add := func(name string, mean float64, shape ...int) {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(mean + rng.NormFloat64()*0.2)
		}
		ts = append(ts, safetensors.BF16Tensor(name, shape, v))
	}
	add("model.embed_tokens.weight", 0, Qwen3Vocab, 16)
	add("model.norm.weight", 1, 16)
	for l := range layers {
		p := fmt.Sprintf("model.layers.%d.", l)
		add(p+"input_layernorm.weight", 1, 16)
		add(p+"post_attention_layernorm.weight", 1, 16)
		add(p+"self_attn.q_proj.weight", 0, 16, 16)
		add(p+"self_attn.k_proj.weight", 0, 8, 16)
		add(p+"self_attn.v_proj.weight", 0, 8, 16)
		add(p+"self_attn.o_proj.weight", 0, 16, 16)
		add(p+"self_attn.q_norm.weight", 1, 8)
		add(p+"self_attn.k_norm.weight", 1, 8)
		add(p+"mlp.gate_proj.weight", 0, 32, 16)
		add(p+"mlp.up_proj.weight", 0, 32, 16)
		add(p+"mlp.down_proj.weight", 0, 16, 32)
	}
	return safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), ts, nil)
}
