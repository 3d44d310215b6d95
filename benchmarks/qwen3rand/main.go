// Command qwen3rand writes a random Qwen3ForCausalLM model directory
// (config.json, model.safetensors, generation_config.json and the tokenizer
// files of a tokenizer directory) of any size, for timing and as the
// architecture of a model.hf run whose base comes from `cde-run pretrain`
// (docs/results/transfer/TESTBED.md). Weights are drawn as Hugging Face
// initialises Qwen3: normal with standard deviation 0.02 (initializer_range),
// norms at 1.
//
//	go run ./benchmarks/qwen3rand --tokenizer tokenizer/testdata/qwen3 --out scratch/q3full --vocab 151936
//	go run ./benchmarks/qwen3rand --tokenizer assets/wordprob-qwen3 --out scratch/q3small
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/cde-rl/cde/backends/xla/safetensors"
	"github.com/cde-rl/cde/tokenizer"
)

func main() {
	tokDir := flag.String("tokenizer", "tokenizer/testdata/qwen3", "directory with tokenizer.json (or tokenizer.json.gz) and tokenizer_config.json")
	out := flag.String("out", "", "model directory to write (created)")
	vocab := flag.Int("vocab", 0, "embedding rows (0: the tokenizer's vocabulary, every id a token)")
	hidden := flag.Int("hidden", 128, "hidden_size")
	layers := flag.Int("layers", 4, "num_hidden_layers")
	heads := flag.Int("heads", 4, "num_attention_heads")
	kvHeads := flag.Int("kv-heads", 2, "num_key_value_heads")
	headDim := flag.Int("head-dim", 32, "head_dim")
	ff := flag.Int("ff", 384, "intermediate_size")
	maxPos := flag.Int("max-pos", 2048, "max_position_embeddings")
	tied := flag.Bool("tied", true, "tie_word_embeddings")
	bf16 := flag.Bool("bf16", false, "store BF16 instead of F32")
	seed := flag.Uint64("seed", 1, "seed of the random weights")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "qwen3rand: --out is required")
		os.Exit(2)
	}
	if err := write(*tokDir, *out, *vocab, *hidden, *layers, *heads, *kvHeads, *headDim, *ff, *maxPos, *tied, *bf16, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "qwen3rand:", err)
		os.Exit(1)
	}
}

func write(tokDir, out string, vocab, hidden, layers, heads, kvHeads, headDim, ff, maxPos int, tied, bf16 bool, seed uint64) error {
	tok, err := tokenizer.Load(tokDir)
	if err != nil {
		return err
	}
	if vocab == 0 {
		vocab = tok.VocabSize()
	}
	if vocab < tok.VocabSize() {
		return fmt.Errorf("--vocab %d is below the tokenizer's %d tokens", vocab, tok.VocabSize())
	}
	eos, ok := tok.TokenToID("<|im_end|>")
	if !ok {
		return fmt.Errorf("%s has no <|im_end|>", tokDir)
	}
	bos, _ := tok.TokenToID("<|endoftext|>")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	// The tokenizer files, tokenizer.json uncompressed as model directories hold it.
	if err := tokenizer.CopyFiles(out, tokDir); err != nil {
		return err
	}
	cfg := map[string]any{
		"architectures": []string{"Qwen3ForCausalLM"}, "model_type": "qwen3",
		"vocab_size": vocab, "hidden_size": hidden, "intermediate_size": ff, "head_dim": headDim,
		"num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": kvHeads,
		"hidden_act": "silu", "rms_norm_eps": 1e-6, "max_position_embeddings": maxPos, "rope_theta": 1000000.0,
		"rope_scaling": nil, "attention_bias": false, "attention_dropout": 0.0, "use_sliding_window": false,
		"sliding_window": nil, "max_window_layers": layers, "initializer_range": 0.02,
		"tie_word_embeddings": tied, "bos_token_id": bos, "eos_token_id": eos, "torch_dtype": "float32",
		"use_cache": true,
	}
	if err := writeJSON(filepath.Join(out, "config.json"), cfg); err != nil {
		return err
	}
	gen := map[string]any{"bos_token_id": bos, "eos_token_id": []int32{eos, bos}, "pad_token_id": bos}
	if err := writeJSON(filepath.Join(out, "generation_config.json"), gen); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(seed, 0x7177656e33))
	var ts []safetensors.Tensor
	params := 0
	add := func(name string, norm bool, shape ...int) {
		n := 1
		for _, d := range shape {
			n *= d
		}
		params += n
		v := make([]float32, n)
		for i := range v {
			if norm {
				v[i] = 1
			} else {
				v[i] = float32(rng.NormFloat64() * 0.02)
			}
		}
		if bf16 {
			ts = append(ts, safetensors.BF16Tensor(name, shape, v))
		} else {
			ts = append(ts, safetensors.F32Tensor(name, shape, v))
		}
	}
	add("model.embed_tokens.weight", false, vocab, hidden)
	add("model.norm.weight", true, hidden)
	if !tied {
		add("lm_head.weight", false, vocab, hidden)
	}
	for l := range layers {
		p := fmt.Sprintf("model.layers.%d.", l)
		add(p+"input_layernorm.weight", true, hidden)
		add(p+"post_attention_layernorm.weight", true, hidden)
		add(p+"self_attn.q_proj.weight", false, heads*headDim, hidden)
		add(p+"self_attn.k_proj.weight", false, kvHeads*headDim, hidden)
		add(p+"self_attn.v_proj.weight", false, kvHeads*headDim, hidden)
		add(p+"self_attn.o_proj.weight", false, hidden, heads*headDim)
		add(p+"self_attn.q_norm.weight", true, headDim)
		add(p+"self_attn.k_norm.weight", true, headDim)
		add(p+"mlp.gate_proj.weight", false, ff, hidden)
		add(p+"mlp.up_proj.weight", false, ff, hidden)
		add(p+"mlp.down_proj.weight", false, hidden, ff)
	}
	if err := safetensors.WriteFile(filepath.Join(out, "model.safetensors"), ts, map[string]string{"format": "pt"}); err != nil {
		return err
	}
	emb := vocab * hidden
	fmt.Printf("%s: %d parameters (%d embedding, %d other), vocabulary %d (tokenizer %d), eos %d\n",
		out, params, emb, params-emb, vocab, tok.VocabSize(), eos)
	return nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
