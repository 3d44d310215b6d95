// Package peft reads and writes LoRA adapters in the layout of Hugging
// Face PEFT: a directory with adapter_config.json and
// adapter_model.safetensors, whose tensors are named
//
//	base_model.model.<module>.lora_A.weight   [r, in]
//	base_model.model.<module>.lora_B.weight   [out, r]
//
// for each adapted linear layer <module> (for example
// model.layers.3.self_attn.q_proj), so that the adapted weight is
//
//	W' = W + (lora_alpha / r) B A.
//
// Only plain LoRA is read: rsLoRA, DoRA, per-module rank or alpha
// patterns, trained biases, extra saved modules and the other PEFT methods
// are refused by name, never silently read as plain LoRA.
package peft

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cde-rl/cde/backends/xla/safetensors"
)

// File names inside an adapter directory.
const (
	ConfigFile  = "adapter_config.json"
	WeightsFile = "adapter_model.safetensors"
	// KeyPrefix starts every tensor name PEFT writes for a causal LM.
	KeyPrefix = "base_model.model."
)

// Modules are the projections of a Llama-style decoder layer that LoRA
// can adapt, in PEFT's (and transformers') names.
var Modules = []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}

// Config is the part of adapter_config.json cde uses.
type Config struct {
	Rank    int      // r
	Alpha   float64  // lora_alpha
	Dropout float64  // lora_dropout (training only)
	Targets []string // target_modules, a subset of Modules
	// BaseModel is base_model_name_or_path (informational).
	BaseModel string
}

// Scale is lora_alpha / r.
func (c Config) Scale() float64 { return c.Alpha / float64(c.Rank) }

// Validate checks the rank, alpha, dropout and target modules.
func (c Config) Validate() error {
	if c.Rank < 1 {
		return fmt.Errorf("r = %d: must be >= 1", c.Rank)
	}
	if !(c.Alpha > 0) || math.IsInf(c.Alpha, 0) {
		return fmt.Errorf("lora_alpha = %v: must be > 0", c.Alpha)
	}
	if c.Dropout < 0 || c.Dropout >= 1 {
		return fmt.Errorf("lora_dropout = %v: must be in [0, 1)", c.Dropout)
	}
	if len(c.Targets) == 0 {
		return fmt.Errorf("target_modules: empty")
	}
	seen := map[string]bool{}
	for _, m := range c.Targets {
		if !slices.Contains(Modules, m) {
			return fmt.Errorf("target_modules: %q is not a projection cde can adapt (known: %s)", m, strings.Join(Modules, ", "))
		}
		if seen[m] {
			return fmt.Errorf("target_modules: %q given twice", m)
		}
		seen[m] = true
	}
	return nil
}

// Targeted reports whether module (a full name such as
// model.layers.3.self_attn.q_proj, or a bare one such as q_proj) is one
// of c's targets.
func (c Config) Targeted(module string) bool {
	return slices.Contains(c.Targets, module[strings.LastIndexByte(module, '.')+1:])
}

// rawConfig is adapter_config.json as PEFT writes it; pointer and any
// fields tell "absent" from "set".
type rawConfig struct {
	PeftType          string          `json:"peft_type"`
	TaskType          string          `json:"task_type,omitempty"`
	R                 int             `json:"r"`
	LoraAlpha         float64         `json:"lora_alpha"`
	LoraDropout       float64         `json:"lora_dropout"`
	TargetModules     json.RawMessage `json:"target_modules"`
	Bias              string          `json:"bias"`
	UseRSLoRA         bool            `json:"use_rslora"`
	UseDoRA           bool            `json:"use_dora"`
	FanInFanOut       bool            `json:"fan_in_fan_out"`
	ModulesToSave     []string        `json:"modules_to_save"`
	RankPattern       map[string]any  `json:"rank_pattern"`
	AlphaPattern      map[string]any  `json:"alpha_pattern"`
	LayersToTransform any             `json:"layers_to_transform"`
	InferenceMode     bool            `json:"inference_mode"`
	BaseModel         string          `json:"base_model_name_or_path"`
	InitLoraWeights   any             `json:"init_lora_weights,omitempty"`
}

// ReadConfig reads dir/adapter_config.json. Every setting that would
// change what the adapter computes and that cde does not implement is an
// error naming its field.
func ReadConfig(dir string) (Config, error) {
	path := filepath.Join(dir, ConfigFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("adapter: %w", err)
	}
	var raw rawConfig
	if err := json.Unmarshal(b, &raw); err != nil {
		return Config{}, fmt.Errorf("adapter: %s: %w", path, err)
	}
	bad := func(format string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("adapter: %s: %s", path, fmt.Sprintf(format, args...))
	}
	switch {
	case raw.PeftType != "LORA":
		return bad("peft_type %q: only LORA adapters are read", raw.PeftType)
	case raw.UseRSLoRA:
		return bad("use_rslora is true: rsLoRA (scale alpha / sqrt(r)) is not implemented")
	case raw.UseDoRA:
		return bad("use_dora is true: DoRA (weight-decomposed LoRA) is not implemented")
	case raw.Bias != "" && raw.Bias != "none":
		return bad("bias %q: only \"none\" is implemented (no trained biases)", raw.Bias)
	case raw.FanInFanOut:
		return bad("fan_in_fan_out is true: only [out, in] linear weights (Llama-style models) are read")
	case len(raw.ModulesToSave) > 0:
		return bad("modules_to_save %v: fully trained extra modules are not implemented", raw.ModulesToSave)
	case len(raw.RankPattern) > 0:
		return bad("rank_pattern is set: per-module ranks are not implemented")
	case len(raw.AlphaPattern) > 0:
		return bad("alpha_pattern is set: per-module alphas are not implemented")
	case raw.LayersToTransform != nil:
		return bad("layers_to_transform is set: adapters on some layers only are not implemented")
	}
	targets, err := parseTargets(raw.TargetModules)
	if err != nil {
		return bad("%v", err)
	}
	c := Config{Rank: raw.R, Alpha: raw.LoraAlpha, Dropout: raw.LoraDropout, Targets: targets, BaseModel: raw.BaseModel}
	if err := c.Validate(); err != nil {
		return bad("%v", err)
	}
	return c, nil
}

// parseTargets reads target_modules: a list of names (a bare module name
// or a dotted path ending in one), or the string "all-linear".
func parseTargets(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, errors.New("target_modules: missing")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "all-linear" {
			return slices.Clone(Modules), nil
		}
		return nil, fmt.Errorf("target_modules %q: a regular expression; give the list of modules (or \"all-linear\")", s)
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("target_modules: want a list of module names: %v", err)
	}
	var out []string
	for _, m := range list {
		bare := m[strings.LastIndexByte(m, '.')+1:]
		if !slices.Contains(out, bare) {
			out = append(out, bare)
		}
	}
	return SortModules(out), nil
}

// SortModules sorts module names in Modules' order (unknown names last,
// by name), so equal sets compare equal.
func SortModules(names []string) []string {
	rank := func(s string) int {
		if i := slices.Index(Modules, s); i >= 0 {
			return i
		}
		return len(Modules)
	}
	slices.SortStableFunc(names, func(a, b string) int {
		if d := rank(a) - rank(b); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	return names
}

// Adapter is a read adapter: its config and, per adapted module (full
// name, e.g. model.layers.0.self_attn.q_proj), A [r, in] and B [out, r]
// row-major.
type Adapter struct {
	Config Config
	A, B   map[string][]float32
	// In and Out are each module's dimensions, from the tensors' shapes.
	In, Out map[string]int
}

// Read reads an adapter directory. Every tensor must be a lora_A or lora_B
// weight of a targeted module, each with its partner and rank r.
func Read(dir string) (*Adapter, error) {
	c, err := ReadConfig(dir)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, WeightsFile)
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, fmt.Errorf("adapter: %w", err)
	}
	defer f.Close()
	ad := &Adapter{Config: c, A: map[string][]float32{}, B: map[string][]float32{}, In: map[string]int{}, Out: map[string]int{}}
	for _, name := range f.Names() {
		module, which, ok := splitKey(name)
		if !ok {
			return nil, fmt.Errorf("adapter: %s: tensor %q is not a LoRA weight (%s<module>.lora_A.weight or .lora_B.weight)", path, name, KeyPrefix)
		}
		if !c.Targeted(module) {
			return nil, fmt.Errorf("adapter: %s: tensor %q adapts a module outside target_modules %v", path, name, c.Targets)
		}
		v, info, err := f.Float32(name)
		if err != nil {
			return nil, fmt.Errorf("adapter: %s: %w", path, err)
		}
		if len(info.Shape) != 2 {
			return nil, fmt.Errorf("adapter: %s: tensor %q has shape %v, want a matrix", path, name, info.Shape)
		}
		for i, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return nil, fmt.Errorf("adapter: %s: tensor %q element %d is %v", path, name, i, x)
			}
		}
		if which == "A" {
			if info.Shape[0] != c.Rank {
				return nil, fmt.Errorf("adapter: %s: tensor %q has shape %v, want [r = %d, in]", path, name, info.Shape, c.Rank)
			}
			ad.A[module], ad.In[module] = v, info.Shape[1]
		} else {
			if info.Shape[1] != c.Rank {
				return nil, fmt.Errorf("adapter: %s: tensor %q has shape %v, want [out, r = %d]", path, name, info.Shape, c.Rank)
			}
			ad.B[module], ad.Out[module] = v, info.Shape[0]
		}
	}
	for m := range ad.A {
		if _, ok := ad.B[m]; !ok {
			return nil, fmt.Errorf("adapter: %s: %s has lora_A but no lora_B", path, m)
		}
	}
	for m := range ad.B {
		if _, ok := ad.A[m]; !ok {
			return nil, fmt.Errorf("adapter: %s: %s has lora_B but no lora_A", path, m)
		}
	}
	if len(ad.A) == 0 {
		return nil, fmt.Errorf("adapter: %s: no LoRA weights", path)
	}
	return ad, nil
}

// Modules lists the adapted modules, sorted.
func (a *Adapter) Modules() []string { return slices.Sorted(maps.Keys(a.A)) }

// splitKey parses base_model.model.<module>.lora_{A,B}.weight (PEFT also
// writes a ".default" adapter name before ".weight" in some versions'
// in-memory names; the saved file never has it, and neither form here).
func splitKey(name string) (module, which string, ok bool) {
	rest, ok := strings.CutPrefix(name, KeyPrefix)
	if !ok {
		return "", "", false
	}
	for _, w := range []string{"A", "B"} {
		if m, ok := strings.CutSuffix(rest, ".lora_"+w+".weight"); ok && m != "" {
			return m, w, true
		}
	}
	return "", "", false
}

// Key is the tensor name of module's lora_A ("A") or lora_B ("B") weight.
func Key(module, which string) string { return KeyPrefix + module + ".lora_" + which + ".weight" }

// Merge adds scale * B A to w, the [out, in] row-major weight of module
// (sums in float64, rounded once to float32).
func (a *Adapter) Merge(module string, w []float32) error {
	A, B := a.A[module], a.B[module]
	in, out, r := a.In[module], a.Out[module], a.Config.Rank
	if len(w) != in*out {
		return fmt.Errorf("adapter: %s: the base weight has %d elements, the adapter implies [%d, %d]", module, len(w), out, in)
	}
	MergeInto(w, A, B, out, in, r, a.Config.Scale())
	return nil
}

// MergeInto sets w[o, i] += scale * sum_k B[o, k] A[k, i] for w [out, in],
// A [r, in], B [out, r], all row-major.
func MergeInto(w, A, B []float32, out, in, r int, scale float64) {
	row := make([]float64, in)
	for o := range out {
		clear(row)
		for k := range r {
			bk := float64(B[o*r+k])
			if bk == 0 {
				continue
			}
			for i, ak := range A[k*in : (k+1)*in] {
				row[i] += bk * float64(ak)
			}
		}
		for i := range in {
			w[o*in+i] = float32(float64(w[o*in+i]) + scale*row[i])
		}
	}
}

// Write writes an adapter directory in PEFT's layout (float32 tensors),
// each file written to a temporary name and renamed into place.
func Write(dir string, c Config, a, b map[string][]float32, in, out map[string]int) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("adapter: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var ts []safetensors.Tensor
	for _, m := range slices.Sorted(maps.Keys(a)) {
		ts = append(ts, safetensors.F32Tensor(Key(m, "A"), []int{c.Rank, in[m]}, a[m]))
		ts = append(ts, safetensors.F32Tensor(Key(m, "B"), []int{out[m], c.Rank}, b[m]))
	}
	if err := safetensors.WriteFile(filepath.Join(dir, WeightsFile), ts, map[string]string{"format": "pt"}); err != nil {
		return err
	}
	raw := map[string]any{
		"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": c.Rank, "lora_alpha": c.Alpha,
		"lora_dropout": c.Dropout, "target_modules": c.Targets, "bias": "none", "use_rslora": false,
		"use_dora": false, "fan_in_fan_out": false, "modules_to_save": nil, "rank_pattern": map[string]any{},
		"alpha_pattern": map[string]any{}, "layers_to_transform": nil, "inference_mode": true,
		"base_model_name_or_path": c.BaseModel, "init_lora_weights": true,
	}
	js, err := json.MarshalIndent(raw, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, ConfigFile+".tmp")
	if err := os.WriteFile(tmp, append(js, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, ConfigFile))
}
