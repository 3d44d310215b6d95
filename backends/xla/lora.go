package xla

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
	"github.com/gomlx/gomlx/ml/model"

	"github.com/cde-rl/cde/backends/xla/peft"
)

// loraScope holds the LoRA adapters of a net whose ModelConfig.LoRA is
// set (model.lora): for each adapted projection <module> (for example
// model.layers.3.self_attn.q_proj) the variables <module>.lora_A.weight
// [r, in] and <module>.lora_B.weight [out, r], PEFT's names and layouts
// without PEFT's "base_model.model." prefix. The projection computes
//
//	y = x W^T (+ bias) + (alpha / r) (x A^T) B^T,
//
// PEFT's order of operations. The Hugging Face weights (hfScope) are then
// frozen: no gradient, no Adam state, not in checkpoints (they are
// model.hf's, loaded again on resume).
const loraScope = "lora"

// loraModules lists the projections of c that cfg adapts, sorted, with
// their [out, in] sizes.
func loraModules(cfg ModelConfig) (names []string, out, in map[string]int) {
	out, in = map[string]int{}, map[string]int{}
	for name, shape := range hfParamShapes(cfg.HF, false) {
		module, ok := strings.CutSuffix(name, ".weight")
		if !ok || len(shape) != 2 || !strings.Contains(module, ".layers.") || !cfg.LoRA.Targeted(module) {
			continue
		}
		names = append(names, module)
		out[module], in[module] = shape[0], shape[1]
	}
	slices.Sort(names)
	return names, out, in
}

// initLoRA creates the adapters: from ad when given (model.adapter, whose
// rank and targets must be cfg's), else PEFT's default initialisation, A
// uniform in [-1/sqrt(in), 1/sqrt(in)] (kaiming-uniform with a = sqrt(5))
// drawn from seed and B = 0, so the adapted model starts equal to the base.
func initLoRA(ctx *model.Scope, cfg ModelConfig, seed uint64, ad *peft.Adapter) error {
	names, out, in := loraModules(cfg)
	if len(names) == 0 {
		return fmt.Errorf("model.lora.target_modules %v: no projection of this model matches", cfg.LoRA.Targets)
	}
	r := cfg.LoRA.Rank
	if ad != nil {
		if ad.Config.Rank != r || !slices.Equal(ad.Config.Targets, cfg.LoRA.Targets) || ad.Config.Alpha != cfg.LoRA.Alpha {
			return fmt.Errorf("model.adapter: r %d, lora_alpha %v, target_modules %v differ from model.lora's r %d, alpha %v, target_modules %v",
				ad.Config.Rank, ad.Config.Alpha, ad.Config.Targets, r, cfg.LoRA.Alpha, cfg.LoRA.Targets)
		}
		if got := ad.Modules(); !slices.Equal(got, names) {
			return fmt.Errorf("model.adapter: adapts %d modules, this model's targets are %d (first difference: %s)", len(got), len(names), firstDiff(got, names))
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x10a))
	for _, m := range names {
		a, b := make([]float32, r*in[m]), make([]float32, out[m]*r)
		if ad != nil {
			if ad.In[m] != in[m] || ad.Out[m] != out[m] {
				return fmt.Errorf("model.adapter: %s is [%d, %d] in the adapter, [%d, %d] in the model", m, ad.Out[m], ad.In[m], out[m], in[m])
			}
			copy(a, ad.A[m])
			copy(b, ad.B[m])
		} else {
			bound := 1 / math.Sqrt(float64(in[m]))
			for i := range a {
				a[i] = float32((2*rng.Float64() - 1) * bound)
			}
		}
		ctx.At(loraScope).VariableWithValue(m+".lora_A.weight", tensors.FromFlatDataAndDimensions(a, r, in[m]))
		ctx.At(loraScope).VariableWithValue(m+".lora_B.weight", tensors.FromFlatDataAndDimensions(b, out[m], r))
	}
	return nil
}

func firstDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return a[i] + " vs " + b[i]
		}
	}
	if len(a) > len(b) {
		return a[len(b)] + " only in the adapter"
	}
	if len(b) > len(a) {
		return b[len(a)] + " only in the model"
	}
	return "none"
}

// proj applies the projection module (its .weight, its .bias when the
// model has one) to x, plus its adapter when the net has adapters and
// they are on.
func (a *hfArch) proj(ctx *model.Scope, x *graph.Node, module string) *graph.Node {
	g := x.Graph()
	var bias *graph.Node
	if a.has(ctx, module+".bias") {
		bias = a.w(ctx, g, module+".bias")
	}
	y := a.linearW(ctx, x, module+".weight", bias)
	if a.lora == nil || a.base || !a.lora.Targeted(module) {
		return y
	}
	down := linearT(x, param(ctx, g, loraScope, module+".lora_A.weight"), nil)
	up := linearT(down, param(ctx, g, loraScope, module+".lora_B.weight"), nil)
	return graph.Add(y, graph.MulScalar(up, a.lora.Scale()))
}

// frozen reports whether v is a frozen base weight (a LoRA net's
// Hugging Face weights).
func (n *net) frozen(v *model.Variable) bool {
	return n.cfg.LoRA != nil && v.Scope() == "/"+hfScope
}

// baseView is n with its adapters off: the same variables (no copy) and
// its own compiled graphs. A LoRA policy's reference for the KL term.
func (n *net) baseView() *net {
	arch := *n.arch.(*hfArch)
	arch.base = true
	return &net{cfg: n.cfg, arch: &arch, trainArch: &arch, backend: n.backend, ctx: n.ctx, view: true,
		prefill: map[int]*model.Exec{}, actor: map[actorKey]*model.Exec{}}
}

// adapterValue copies module's lora_A ("A") or lora_B ("B") weight and
// its dimensions.
func (n *net) adapterValue(module, which string) ([]float32, []int, error) {
	v := n.ctx.Store().GetVariable(model.JoinPath("/"+loraScope, module+".lora_"+which+".weight"))
	if v == nil {
		return nil, nil, fmt.Errorf("adapter %s lora_%s missing", module, which)
	}
	val, err := v.Value()
	if err != nil {
		return nil, nil, err
	}
	return tensors.MustCopyFlatData[float32](val), val.Shape().Dimensions, nil
}

// adapterTensors returns the policy's adapters as PEFT keys them (module
// name to A and B) with their sizes.
func (n *net) adapterTensors() (a, b map[string][]float32, in, out map[string]int, err error) {
	names, outs, ins := loraModules(n.cfg)
	a, b = map[string][]float32{}, map[string][]float32{}
	for _, m := range names {
		if a[m], _, err = n.adapterValue(m, "A"); err != nil {
			return nil, nil, nil, nil, err
		}
		if b[m], _, err = n.adapterValue(m, "B"); err != nil {
			return nil, nil, nil, nil, err
		}
	}
	return a, b, ins, outs, nil
}

// mergedWeight returns the value of the Hugging Face weight name with the
// adapter merged in (W + (alpha/r) B A) when the net adapts it; data is
// the stored W and is not modified.
func (n *net) mergedWeight(name string, data []float32) ([]float32, error) {
	module, ok := strings.CutSuffix(name, ".weight")
	if n.cfg.LoRA == nil || !ok || !strings.Contains(module, ".layers.") || !n.cfg.LoRA.Targeted(module) {
		return data, nil
	}
	A, ad, err := n.adapterValue(module, "A")
	if err != nil {
		return nil, err
	}
	B, bd, err := n.adapterValue(module, "B")
	if err != nil {
		return nil, err
	}
	w := slices.Clone(data)
	peft.MergeInto(w, A, B, bd[0], ad[1], ad[0], n.cfg.LoRA.Scale())
	return w, nil
}

// ExportAdapter writes the policy's adapters as a PEFT adapter directory
// out (adapter_config.json and adapter_model.safetensors, float32); out
// must not exist. baseModel is recorded as base_model_name_or_path.
func (b *Backend) ExportAdapter(out, baseModel string) error {
	if b.policy.cfg.LoRA == nil {
		return fmt.Errorf("export: the run has no adapters (model.lora.rank 0): export writes the full model")
	}
	a, bb, in, outs, err := b.policy.adapterTensors()
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	c := *b.policy.cfg.LoRA
	c.BaseModel = baseModel
	return writeNewDir(out, func(tmp string) error { return peft.Write(tmp, c, a, bb, in, outs) })
}

// mergeAdapter adds ad to the Hugging Face weight name (values w, [out,
// in]) when ad adapts it.
func mergeAdapter(ad *peft.Adapter, name string, w []float32) error {
	module, ok := strings.CutSuffix(name, ".weight")
	if ad == nil || !ok {
		return nil
	}
	if _, adapted := ad.A[module]; !adapted {
		return nil
	}
	return ad.Merge(module, w)
}

// checkAdapterModules checks that every module ad adapts is a projection
// of the model c describes, with the adapter's sizes.
func checkAdapterModules(cfg ModelConfig, ad *peft.Adapter) error {
	shapes := hfParamShapes(cfg.HF, true)
	for _, m := range slices.Sorted(maps.Keys(ad.A)) {
		s, ok := shapes[m+".weight"]
		if !ok || len(s) != 2 {
			return fmt.Errorf("adapter: %s is not a linear layer of this %s model", m, cfg.HF.Arch)
		}
		if s[0] != ad.Out[m] || s[1] != ad.In[m] {
			return fmt.Errorf("adapter: %s is [%d, %d] in the adapter, [%d, %d] in the model", m, ad.Out[m], ad.In[m], s[0], s[1])
		}
	}
	return nil
}

// writeNewDir has write fill a temporary directory beside out, then
// renames it to out, which must not exist: a crash never leaves a partial
// out.
func writeNewDir(out string, write func(tmp string) error) error {
	out = filepath.Clean(out)
	if _, err := os.Stat(out); err == nil {
		return fmt.Errorf("export: %s exists; choose a new directory", out)
	}
	tmp := out + ".partial"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := write(tmp); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// shareHFParams gives ctx the Hugging Face weights of src, the same
// tensors (no copy): a LoRA critic reads the policy's frozen trunk. Without
// head the LM head is left out.
func shareHFParams(ctx *model.Scope, src *net, head bool) error {
	n := 0
	for v := range src.ctx.IterVariables() {
		if v.Scope() != "/"+hfScope || (!head && v.Name() == "lm_head.weight") {
			continue
		}
		val, err := v.Value()
		if err != nil {
			return err
		}
		ctx.At(hfScope).VariableWithValue(v.Name(), val)
		n++
	}
	if n == 0 {
		return fmt.Errorf("share weights: the source net has no Hugging Face weights")
	}
	return nil
}

// LoRAOf is the adapter setting of model.lora's values: nil for rank 0
// (off), the targets in peft.Modules' order (so a checkpoint's recorded
// setting compares equal whatever order the config listed them in).
func LoRAOf(rank int, alpha, dropout float64, targets []string) *peft.Config {
	if rank == 0 {
		return nil
	}
	return &peft.Config{Rank: rank, Alpha: alpha, Dropout: dropout, Targets: peft.SortModules(slices.Clone(targets))}
}
