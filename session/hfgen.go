package session

import (
	"fmt"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/backends/xla"
	"github.com/cde-rl/cde/backends/xla/hf"
	"github.com/cde-rl/cde/backends/xla/peft"
	"github.com/cde-rl/cde/backends/xla/safetensors"
	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/tokenizer"
)

// GenerateOptions samples completions of a Hugging Face model directory
// (`cde-run generate`).
type GenerateOptions struct {
	Model       string  // model directory (config.json, weights, tokenizer.json)
	Adapter     string  // a PEFT LoRA adapter directory merged into Model's weights ("" = none)
	Engine      string  // backend.engine
	PJRTPlugin  string  // backend.pjrt_plugin (xla:* engines)
	N           int     // completions per prompt
	Temperature float64 // sampling temperature, in (0, 10]
	MaxTokens   int     // tokens per completion, at most
	Seed        uint64
	// LogProbs adds each completion's sampled token ids and their
	// log-probs, log softmax(logits / Temperature), to the output.
	LogProbs bool
}

// Completion is one sampled completion.
type Completion struct {
	Text      string `json:"text"`
	Tokens    int    `json:"tokens"`
	Truncated bool   `json:"truncated"`
	// With GenerateOptions.LogProbs: the sampled ids (the stop id
	// included when one ended the completion; Text leaves it out) and
	// their log-probs at the sampling temperature.
	TokenIDs []int32   `json:"token_ids,omitempty"`
	LogProbs []float64 `json:"logprobs,omitempty"`
}

// GenerateHF samples o.N completions of each prompt (raw text, tokenized
// with no special tokens added: write a chat template's markup yourself)
// with the model's KV-cache sampler, stopping at its stop ids by Hugging
// Face's rule (generation_config.json's eos_token_id, else config.json's,
// else tokenizer_config.json's eos_token; StopTokens) and at the
// tokenizer's eos_token.
func GenerateHF(o GenerateOptions, prompts []string) ([][]Completion, error) {
	switch {
	case o.N < 1:
		return nil, fmt.Errorf("generate: n = %d: must be >= 1", o.N)
	case !(o.Temperature > 0 && o.Temperature <= 10):
		return nil, fmt.Errorf("generate: temperature = %v: must be in (0, 10]", o.Temperature)
	case o.MaxTokens < 1:
		return nil, fmt.Errorf("generate: max tokens = %d: must be >= 1", o.MaxTokens)
	}
	tok, err := tokenizer.Load(o.Model)
	if err != nil {
		return nil, err
	}
	if tok.EOS() < 0 {
		return nil, fmt.Errorf("generate: %s names no eos_token in tokenizer_config.json", o.Model)
	}
	hc, err := hf.LoadConfig(o.Model)
	if err != nil {
		return nil, err
	}
	set, err := safetensors.OpenDir(o.Model)
	if err != nil {
		return nil, err
	}
	defer set.Close()
	var ad *peft.Adapter
	if o.Adapter != "" {
		if ad, err = peft.Read(o.Adapter); err != nil {
			return nil, err
		}
	}
	var ids [][]int32
	longest := 0
	for i, p := range prompts {
		e := tok.Encode(p)
		if len(e) == 0 {
			return nil, fmt.Errorf("generate: prompt %d gives no tokens", i+1)
		}
		for range o.N {
			ids = append(ids, e)
		}
		longest = max(longest, len(e))
	}
	maxLen := (longest+3)/4*4 + o.MaxTokens
	if maxLen > hc.MaxPositions {
		return nil, fmt.Errorf("generate: %d prompt tokens + %d new ones exceed max_position_embeddings = %d", longest, o.MaxTokens, hc.MaxPositions)
	}
	pad := tok.PAD()
	if pad < 0 {
		pad = tok.EOS()
	}
	b, err := xla.New(xla.Options{Engine: o.Engine, PJRTPlugin: o.PJRTPlugin, Policy: xla.HFModelConfig(hc, maxLen), Seed: o.Seed, ActorLR: 1e-4,
		PAD: pad, EOS: tok.EOS(), HFWeights: set, Adapter: ad})
	if err != nil {
		return nil, err
	}
	defer b.Close()
	stops := StopTokens(hc, int(tok.EOS()), zerolog.Nop())
	gens, err := b.Generate(core.GenerateRequest{Prompts: ids, Temperature: o.Temperature, MaxTokens: o.MaxTokens, Seed: o.Seed, StopTokens: stops})
	if err != nil {
		return nil, err
	}
	out := make([][]Completion, len(prompts))
	for i, g := range gens {
		toks := g.Tokens
		if !g.Truncated {
			toks = toks[:len(toks)-1] // the EOS
		}
		c := Completion{Text: tok.Decode(toks), Tokens: len(g.Tokens), Truncated: g.Truncated}
		if o.LogProbs {
			c.TokenIDs, c.LogProbs = g.Tokens, g.LogProbs
		}
		out[i/o.N] = append(out[i/o.N], c)
	}
	return out, nil
}
