// Command memest prints cde's memory estimate (session.EstimateMemory, the
// one every run logs and checks before it starts) for a Hugging Face
// architecture given by its config.json alone, so the estimate of a model
// too large to download here can be read: weights, adapters, optimiser
// state, the largest generation and training passes.
//
//	go run ./benchmarks/memest --shape qwen3-4b --set rollout.n=8 ... [--lora-rank 32]
//
// --shape names a built-in config.json (qwen3-0.6b, qwen3-4b: the published
// sizes) or --config-json gives a file; every --set is a config key as
// cde-run train takes it.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/cde-rl/cde/backends/xla"
	"github.com/cde-rl/cde/backends/xla/hf"
	"github.com/cde-rl/cde/internal/cli"
	"github.com/cde-rl/cde/session"
	"github.com/cde-rl/cde/trainer"
)

// shapes are config.json files of published checkpoints (their sizes).
var shapes = map[string]string{
	"qwen3-0.6b": `{"architectures": ["Qwen3ForCausalLM"], "vocab_size": 151936, "hidden_size": 1024, "intermediate_size": 3072,
		"head_dim": 128, "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8, "rms_norm_eps": 1e-6,
		"max_position_embeddings": 40960, "rope_theta": 1000000.0, "tie_word_embeddings": true}`,
	"qwen3-4b": `{"architectures": ["Qwen3ForCausalLM"], "vocab_size": 151936, "hidden_size": 2560, "intermediate_size": 9728,
		"head_dim": 128, "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-6,
		"max_position_embeddings": 40960, "rope_theta": 1000000.0, "tie_word_embeddings": true}`,
}

func main() {
	shape := flag.String("shape", "qwen3-0.6b", "a built-in config.json: qwen3-0.6b or qwen3-4b")
	file := flag.String("config-json", "", "a Hugging Face config.json (instead of --shape)")
	critic := flag.Int("value-heads", 0, "critic value heads (0: no critic)")
	var sets cli.StringList
	flag.Var(&sets, "set", "a config key=value, as cde-run train --set (repeatable)")
	flag.Parse()
	raw, ok := shapes[*shape]
	if *file != "" {
		b, err := os.ReadFile(*file)
		if err != nil {
			fail(err)
		}
		raw, ok = string(b), true
	}
	if !ok {
		fail(fmt.Errorf("--shape %q: known: qwen3-0.6b, qwen3-4b", *shape))
	}
	hc, err := hf.ParseConfig([]byte(raw))
	if err != nil {
		fail(err)
	}
	// model.hf must name a directory for the config to load; the estimate
	// reads only the sizes above.
	cfg, err := trainer.LoadConfig(trainer.LoadOptions{Env: []string{}, Sets: append([]string{"model.hf=unused"}, sets...)})
	if err != nil {
		fail(err)
	}
	p := session.WithModelOptions(cfg, xla.HFModelConfig(hc, cfg.Model.MaxLen))
	e := session.EstimateMemory(cfg, p, *critic, 0)
	fmt.Printf("%s: %.0f parameters, %.0f adapter parameters; settings: %s\n", *shape, session.ParamCount(p), session.LoRAParamCount(p), strings.Join(sets, " "))
	for _, part := range append(append([]session.MemoryPart{}, e.Fixed...), e.Passes...) {
		fmt.Printf("  %-32s %9.2f GB  (%s)\n", part.Name, part.Bytes/1e9, part.Keys)
	}
	fmt.Printf("  %-32s %9.2f GB  (fixed + the largest pass, %s)\n", "total", e.Total()/1e9, e.Largest().Name)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "memest:", err)
	os.Exit(1)
}
