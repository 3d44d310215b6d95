// Package hf reads Hugging Face causal-LM model directories: config.json for
// the Llama, Qwen2, Qwen3 and Mistral architectures, and
// generation_config.json for the EOS ids. It is plain Go; the GoMLX graphs
// that run these models live in package xla.
package hf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Arch is a supported architecture (config.json "architectures"[0]).
type Arch string

// The supported architectures.
const (
	Llama   Arch = "LlamaForCausalLM"
	Qwen2   Arch = "Qwen2ForCausalLM"
	Qwen3   Arch = "Qwen3ForCausalLM"
	Mistral Arch = "MistralForCausalLM"
)

// Archs lists the supported architectures.
var Archs = []Arch{Llama, Qwen2, Qwen3, Mistral}

// Config is what cde reads of config.json: every field that changes the
// model's arithmetic.
type Config struct {
	Arch          Arch
	Vocab         int     // vocab_size (rows of the embedding table)
	Hidden        int     // hidden_size
	Intermediate  int     // intermediate_size (SwiGLU width)
	Layers        int     // num_hidden_layers
	Heads         int     // num_attention_heads
	KVHeads       int     // num_key_value_heads (grouped-query attention)
	HeadDim       int     // head_dim, or hidden_size / num_attention_heads
	RMSNormEps    float64 // rms_norm_eps
	RopeTheta     float64 // rope_theta
	MaxPositions  int     // max_position_embeddings
	TieEmbeddings bool    // tie_word_embeddings: the LM head is the embedding table
	QKVBias       bool    // biases on q, k, v projections (Qwen2; Llama attention_bias)
	OBias         bool    // bias on the output projection (Llama attention_bias)
	QKNorm        bool    // per-head RMSNorm of q and k before RoPE (Qwen3)
	// RopeLlama3 is set for Llama-3.1-style rope_scaling (rope_type llama3).
	RopeLlama3 *RopeLlama3
	// BOS and EOS are config.json's bos_token_id and eos_token_id (-1 or
	// none when absent); generation_config.json may add EOS ids.
	BOS int
	EOS []int
	// ConfigEOS is config.json's eos_token_id alone; GenerationEOS is
	// generation_config.json's (nil when the file or the key is absent or
	// null). StopIDs chooses between them.
	ConfigEOS, GenerationEOS []int
}

// StopIDs are the ids that end a response, by Hugging Face's rule (what
// transformers' generate and vLLM stop at): generation_config.json's
// eos_token_id when it names any, else config.json's, else the
// tokenizer's eos_token (tokenizerEOS; < 0 for none). from says which.
func (c *Config) StopIDs(tokenizerEOS int) (ids []int, from string) {
	switch {
	case len(c.GenerationEOS) > 0:
		return slices.Clone(c.GenerationEOS), "generation_config.json eos_token_id"
	case len(c.ConfigEOS) > 0:
		return slices.Clone(c.ConfigEOS), "config.json eos_token_id"
	case tokenizerEOS >= 0:
		return []int{tokenizerEOS}, "tokenizer_config.json eos_token"
	}
	return nil, "none"
}

// RopeLlama3 is rope_scaling {rope_type: llama3, factor, low_freq_factor,
// high_freq_factor, original_max_position_embeddings}.
type RopeLlama3 struct {
	Factor, LowFreqFactor, HighFreqFactor float64
	OriginalMaxPositions                  int
}

// LoadConfig reads dir/config.json and, when present,
// dir/generation_config.json (its eos_token_id joins EOS).
func LoadConfig(dir string) (*Config, error) {
	path := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := ParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	gpath := filepath.Join(dir, "generation_config.json")
	gb, err := os.ReadFile(gpath)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, err
	}
	var g map[string]json.RawMessage
	if err := json.Unmarshal(gb, &g); err != nil {
		return nil, fmt.Errorf("%s: %v", gpath, err)
	}
	if raw, ok := g["eos_token_id"]; ok {
		ids, err := intOrList(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: eos_token_id: %v", gpath, err)
		}
		for _, id := range ids {
			if id < 0 || id >= c.Vocab {
				return nil, fmt.Errorf("%s: eos_token_id %d outside the vocabulary of %d", gpath, id, c.Vocab)
			}
			if !slices.Contains(c.EOS, id) {
				c.EOS = append(c.EOS, id)
			}
		}
		c.GenerationEOS = ids
	}
	return c, nil
}

func intOrList(raw json.RawMessage) ([]int, error) {
	if string(raw) == "null" {
		return nil, nil
	}
	var one int
	if json.Unmarshal(raw, &one) == nil {
		return []int{one}, nil
	}
	var many []int
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, fmt.Errorf("want an integer or a list of integers, got %s", raw)
	}
	return many, nil
}

// ParseConfig reads a config.json. A field that changes the model's
// arithmetic in a way cde does not implement (a sliding window, another
// rope_scaling type, an activation other than SiLU, ...) is an error naming
// it, never ignored.
func ParseConfig(b []byte) (*Config, error) {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	r := reader{m: m}
	c := &Config{BOS: -1}
	var archs []string
	r.get("architectures", &archs, true)
	if r.err != nil {
		return nil, r.err
	}
	if len(archs) != 1 || !slices.Contains(Archs, Arch(archs[0])) {
		names := make([]string, len(Archs))
		for i, a := range Archs {
			names[i] = string(a)
		}
		return nil, fmt.Errorf("architectures %q: want one of %s", archs, strings.Join(names, ", "))
	}
	c.Arch = Arch(archs[0])
	if err := readSizes(&r, c); err != nil {
		return nil, err
	}
	if err := readArchFields(&r, c); err != nil {
		return nil, err
	}
	if err := readPositions(&r, c); err != nil {
		return nil, err
	}
	if err := readSpecialTokens(&r, c); err != nil {
		return nil, err
	}
	return c, nil
}

// readSizes reads the sizes every architecture has, with their bounds, and
// the activation (SwiGLU only).
func readSizes(r *reader, c *Config) error {
	r.get("vocab_size", &c.Vocab, true)
	r.get("hidden_size", &c.Hidden, true)
	r.get("intermediate_size", &c.Intermediate, true)
	r.get("num_hidden_layers", &c.Layers, true)
	r.get("num_attention_heads", &c.Heads, true)
	c.KVHeads = -1
	r.get("num_key_value_heads", &c.KVHeads, false)
	c.HeadDim = -1
	r.get("head_dim", &c.HeadDim, false)
	r.get("rms_norm_eps", &c.RMSNormEps, true)
	c.RopeTheta = 10000
	r.get("rope_theta", &c.RopeTheta, false)
	r.get("max_position_embeddings", &c.MaxPositions, true)
	r.get("tie_word_embeddings", &c.TieEmbeddings, false) // false by default in all four config classes
	act := "silu"
	r.get("hidden_act", &act, false)
	if r.err != nil {
		return r.err
	}
	if act != "silu" {
		return fmt.Errorf("hidden_act %q: only silu (SwiGLU) is implemented", act)
	}
	if c.KVHeads == -1 {
		c.KVHeads = c.Heads
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"vocab_size", c.Vocab}, {"hidden_size", c.Hidden}, {"intermediate_size", c.Intermediate},
		{"num_hidden_layers", c.Layers}, {"num_attention_heads", c.Heads}, {"num_key_value_heads", c.KVHeads},
		{"max_position_embeddings", c.MaxPositions}} {
		if f.v < 1 || f.v > 1<<24 {
			return fmt.Errorf("%s = %d: must be in [1, 2^24]", f.name, f.v)
		}
	}
	if c.Heads%c.KVHeads != 0 {
		return fmt.Errorf("num_attention_heads = %d is not a multiple of num_key_value_heads = %d", c.Heads, c.KVHeads)
	}
	if c.HeadDim == -1 {
		if c.Hidden%c.Heads != 0 {
			return fmt.Errorf("hidden_size = %d is not a multiple of num_attention_heads = %d (and no head_dim)", c.Hidden, c.Heads)
		}
		c.HeadDim = c.Hidden / c.Heads
	}
	if c.HeadDim < 2 || c.HeadDim%2 != 0 || c.HeadDim > 1<<14 {
		return fmt.Errorf("head_dim = %d: must be even and in [2, 16384]", c.HeadDim)
	}
	if !(c.RMSNormEps > 0 && c.RMSNormEps < 1) {
		return fmt.Errorf("rms_norm_eps = %v: must be in (0, 1)", c.RMSNormEps)
	}
	if !(c.RopeTheta > 1) || math.IsInf(c.RopeTheta, 0) {
		return fmt.Errorf("rope_theta = %v: must be > 1 and finite", c.RopeTheta)
	}
	return nil
}

// readArchFields reads the fields of c.Arch, refusing by name what the graph
// does not implement (sliding windows, non-full attention layers, MLP
// biases).
func readArchFields(r *reader, c *Config) error {
	switch c.Arch {
	case Qwen2:
		// Qwen2 configs carry sliding_window, which only use_sliding_window
		// (default false) turns on.
		c.QKVBias = true
		if err := r.mustBeFalse("use_sliding_window"); err != nil {
			return err
		}
	case Qwen3:
		c.QKNorm = true
		if err := r.mustBeFalse("attention_bias"); err != nil {
			return err
		}
		if err := r.mustBeFalse("use_sliding_window"); err != nil {
			return err
		}
		var layerTypes []string
		r.get("layer_types", &layerTypes, false)
		if r.err != nil {
			return r.err
		}
		for i, lt := range layerTypes {
			if lt != "full_attention" {
				return fmt.Errorf("layer_types[%d] = %q: only full_attention is implemented", i, lt)
			}
		}
	case Llama, Mistral:
		bias := false
		r.get("attention_bias", &bias, false)
		c.QKVBias, c.OBias = bias, bias
		if err := r.mustBeFalse("mlp_bias"); err != nil {
			return err
		}
		if c.Arch == Mistral {
			if raw, ok := r.m["sliding_window"]; ok && string(raw) != "null" {
				return fmt.Errorf("sliding_window = %s: sliding-window attention is not implemented (null is)", raw)
			}
		}
	}
	return nil
}

// readPositions reads the Llama-3 rope scaling and refuses the other
// position and logit variants (partial rotary, soft-capping).
func readPositions(r *reader, c *Config) error {
	if raw, ok := r.m["rope_scaling"]; ok && string(raw) != "null" {
		rs, err := parseRopeScaling(raw)
		if err != nil {
			return fmt.Errorf("rope_scaling: %w", err)
		}
		c.RopeLlama3 = rs
	}
	for _, name := range []string{"partial_rotary_factor"} {
		if raw, ok := r.m[name]; ok && string(raw) != "1" && string(raw) != "1.0" && string(raw) != "null" {
			return fmt.Errorf("%s = %s: only 1 is implemented", name, raw)
		}
	}
	for _, name := range []string{"final_logit_softcapping", "attn_logit_softcapping", "logits_soft_cap"} {
		if raw, ok := r.m[name]; ok && string(raw) != "null" {
			return fmt.Errorf("%s = %s: logit soft-capping is not implemented", name, raw)
		}
	}
	return nil
}

// readSpecialTokens reads bos_token_id and eos_token_id, which must lie in
// the vocabulary.
func readSpecialTokens(r *reader, c *Config) error {
	if raw, ok := r.m["bos_token_id"]; ok && string(raw) != "null" {
		ids, err := intOrList(raw)
		if err != nil || len(ids) != 1 {
			return fmt.Errorf("bos_token_id: want one integer, got %s", raw)
		}
		c.BOS = ids[0]
	}
	if raw, ok := r.m["eos_token_id"]; ok {
		ids, err := intOrList(raw)
		if err != nil {
			return fmt.Errorf("eos_token_id: %v", err)
		}
		c.EOS = ids
		c.ConfigEOS = slices.Clone(ids)
	}
	for _, id := range append([]int{c.BOS}, c.EOS...) {
		if id < -1 || id >= c.Vocab {
			return fmt.Errorf("token id %d (bos_token_id / eos_token_id) outside the vocabulary of %d", id, c.Vocab)
		}
	}
	return nil
}

func parseRopeScaling(raw json.RawMessage) (*RopeLlama3, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("want an object, got %s", raw)
	}
	r := reader{m: m}
	typ := ""
	r.get("rope_type", &typ, false)
	if typ == "" {
		r.get("type", &typ, false)
	}
	if r.err != nil {
		return nil, r.err
	}
	switch typ {
	case "default":
		return nil, nil
	case "llama3":
	default:
		return nil, fmt.Errorf("rope_type %q: only llama3 (and default) is implemented", typ)
	}
	rs := &RopeLlama3{}
	r.get("factor", &rs.Factor, true)
	r.get("low_freq_factor", &rs.LowFreqFactor, true)
	r.get("high_freq_factor", &rs.HighFreqFactor, true)
	r.get("original_max_position_embeddings", &rs.OriginalMaxPositions, true)
	if r.err != nil {
		return nil, r.err
	}
	if !(rs.Factor >= 1) || !(rs.LowFreqFactor > 0) || !(rs.HighFreqFactor > rs.LowFreqFactor) || rs.OriginalMaxPositions < 1 {
		return nil, fmt.Errorf("llama3: factor %v, low_freq_factor %v, high_freq_factor %v, original_max_position_embeddings %d: want factor >= 1, 0 < low < high, positions >= 1",
			rs.Factor, rs.LowFreqFactor, rs.HighFreqFactor, rs.OriginalMaxPositions)
	}
	return rs, nil
}

// reader decodes fields of a JSON object, keeping the first error.
type reader struct {
	m   map[string]json.RawMessage
	err error
}

func (r *reader) get(name string, dst any, required bool) {
	if r.err != nil {
		return
	}
	raw, ok := r.m[name]
	if !ok || string(raw) == "null" {
		if required {
			r.err = fmt.Errorf("%s: missing", name)
		}
		return
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		r.err = fmt.Errorf("%s: %s: want %T", name, raw, dst)
	}
}

func (r *reader) mustBeFalse(name string) error {
	raw, ok := r.m[name]
	if !ok || string(raw) == "false" || string(raw) == "null" {
		return nil
	}
	return fmt.Errorf("%s = %s: not implemented (false is)", name, raw)
}

// RopeInvFreq returns the rotary inverse frequencies of the HeadDim/2 pairs:
// theta^(-2i/HeadDim), rescaled per Llama-3.1's rope_scaling when set (the
// published transformers rule: wavelengths above original/low_freq_factor
// divided by factor, below original/high_freq_factor kept, smoothly
// interpolated between).
func (c *Config) RopeInvFreq() []float64 {
	half := c.HeadDim / 2
	out := make([]float64, half)
	for i := range out {
		out[i] = 1 / math.Pow(c.RopeTheta, float64(2*i)/float64(c.HeadDim))
	}
	rs := c.RopeLlama3
	if rs == nil {
		return out
	}
	lowWave := float64(rs.OriginalMaxPositions) / rs.LowFreqFactor
	highWave := float64(rs.OriginalMaxPositions) / rs.HighFreqFactor
	for i, f := range out {
		wave := 2 * math.Pi / f
		switch {
		case wave < highWave:
		case wave > lowWave:
			out[i] = f / rs.Factor
		default:
			smooth := (float64(rs.OriginalMaxPositions)/wave - rs.LowFreqFactor) / (rs.HighFreqFactor - rs.LowFreqFactor)
			out[i] = (1-smooth)*f/rs.Factor + smooth*f
		}
	}
	return out
}
