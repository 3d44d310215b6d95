package xla

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/dtypes/bfloat16"
	"github.com/gomlx/compute/shapes"
	"github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
	"github.com/gomlx/gomlx/ml/model"

	"github.com/cde-rl/cde/backends/xla/hf"
	"github.com/cde-rl/cde/backends/xla/peft"
	"github.com/cde-rl/cde/backends/xla/safetensors"
)

// hfScope is the context scope of a Hugging Face model's weights; each
// variable is named exactly as the checkpoint names the tensor
// ("model.layers.3.self_attn.q_proj.weight"), with HF's [out, in] layout
// for linear weights, so loading and exporting copy bytes unchanged.
const hfScope = "hf"

// hfArch holds the graph pieces of a Llama, Qwen2, Qwen3 or Mistral causal
// LM (package hf reads its config.json), as published in Hugging Face
// transformers' model definitions:
//
//	x = embed_tokens[tokens]
//	per layer: h = RMSNorm(x); q, k, v = h Wq^T (+bq), h Wk^T (+bk), h Wv^T (+bv)
//	           Qwen3: q, k = RMSNorm per head (q_norm, k_norm)
//	           q, k = RoPE(q), RoPE(k)   (rotate-half convention)
//	           x += softmax(q k^T / sqrt(head_dim) + causal) v  Wo^T (+bo)
//	           (grouped-query: query head i reads key/value head i / (H/KV))
//	           h = RMSNorm(x); x += (SiLU(h Wgate^T) * h Wup^T) Wdown^T
//	logits = RMSNorm(x) W^T, W = lm_head or (tied) embed_tokens
//
// RMSNorm(x) = x / sqrt(mean(x^2) + eps) * weight. Everything is float32.
type hfArch struct {
	c *hf.Config
	// cos and sin are the rotary tables [maxLen, head_dim] (each angle
	// twice), computed on the host in float32 as transformers does (angle =
	// float32(pos) * inv_freq in float32, then cos and sin of that angle).
	cos, sin []float32
	maxLen   int
	// lora, when set, adds its adapters to the projections it targets
	// (lora.go), unless base (the frozen base model: a LoRA policy's
	// reference).
	lora *peft.Config
	base bool
	// recompute checkpoints every block (training graphs with
	// model.recompute; arch.go's checkpointed).
	recompute bool
	// bf16 marks the bfloat16 generation view (genbf16.go): products with
	// a bfloat16 weight round their input too; nativeBF16 computes them
	// with the engine's bfloat16 dot (the xla:* engines).
	bf16, nativeBF16 bool
}

func newHFArch(c *hf.Config, maxLen int) *hfArch {
	half, dh := c.HeadDim/2, c.HeadDim
	inv := c.RopeInvFreq()
	a := &hfArch{c: c, maxLen: maxLen, cos: make([]float32, maxLen*dh), sin: make([]float32, maxLen*dh)}
	for p := range maxLen {
		for i := range half {
			angle := float32(p) * float32(inv[i])
			cs, sn := float32(math.Cos(float64(angle))), float32(math.Sin(float64(angle)))
			a.cos[p*dh+i], a.cos[p*dh+half+i] = cs, cs
			a.sin[p*dh+i], a.sin[p*dh+half+i] = sn, sn
		}
	}
	return a
}

// hfParamShapes lists every weight of the model with its shape; without
// head (a critic, which reads values instead of logits) an untied LM head
// is left out.
func hfParamShapes(c *hf.Config, head bool) map[string][]int {
	d, dh, ff := c.Hidden, c.HeadDim, c.Intermediate
	m := map[string][]int{
		"model.embed_tokens.weight": {c.Vocab, d},
		"model.norm.weight":         {d},
	}
	if !c.TieEmbeddings && head {
		m["lm_head.weight"] = []int{c.Vocab, d}
	}
	for l := range c.Layers {
		p := fmt.Sprintf("model.layers.%d.", l)
		m[p+"input_layernorm.weight"] = []int{d}
		m[p+"post_attention_layernorm.weight"] = []int{d}
		m[p+"self_attn.q_proj.weight"] = []int{c.Heads * dh, d}
		m[p+"self_attn.k_proj.weight"] = []int{c.KVHeads * dh, d}
		m[p+"self_attn.v_proj.weight"] = []int{c.KVHeads * dh, d}
		m[p+"self_attn.o_proj.weight"] = []int{d, c.Heads * dh}
		if c.QKVBias {
			m[p+"self_attn.q_proj.bias"] = []int{c.Heads * dh}
			m[p+"self_attn.k_proj.bias"] = []int{c.KVHeads * dh}
			m[p+"self_attn.v_proj.bias"] = []int{c.KVHeads * dh}
		}
		if c.OBias {
			m[p+"self_attn.o_proj.bias"] = []int{d}
		}
		if c.QKNorm {
			m[p+"self_attn.q_norm.weight"] = []int{dh}
			m[p+"self_attn.k_norm.weight"] = []int{dh}
		}
		m[p+"mlp.gate_proj.weight"] = []int{ff, d}
		m[p+"mlp.up_proj.weight"] = []int{ff, d}
		m[p+"mlp.down_proj.weight"] = []int{d, ff}
	}
	return m
}

// loadHFParams creates the model's variables in ctx from the checkpoint's
// tensors (any of F32, F16, BF16, converted to float32). A missing tensor, a
// tensor of the wrong shape, or a tensor the architecture does not use (a
// sign that the config and the weights disagree) is an error naming it.
// Without head (a critic) the LM head is not loaded.
//
// With an engine that shares buffers (the cpu engine) the weights are
// written straight into its buffers (paramTensor).
//
// ad, when not nil, is merged into the weights it adapts (W + (alpha/r) B
// A): a model served or scored with a PEFT adapter.
//
// With bf16 (a LoRA net's model.lora.base_dtype) the weights are stored
// in bfloat16, rounded to nearest even (exact for a bfloat16 checkpoint).
func loadHFParams(ctx *model.Scope, eng compute.Backend, c *hf.Config, set *safetensors.Set, head bool, ad *peft.Adapter, bf16 bool) error {
	want := hfParamShapes(c, head)
	for _, name := range set.Names() {
		if _, ok := want[name]; ok {
			continue
		}
		if strings.HasSuffix(name, "rotary_emb.inv_freq") {
			continue // a buffer older checkpoints saved; recomputed from config.json
		}
		if name == "lm_head.weight" && (c.TieEmbeddings || !head) {
			continue // tied checkpoints may store the copy too; a critic has no LM head
		}
		return fmt.Errorf("tensor %q is not a weight of %s as config.json describes it", name, c.Arch)
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		shape := want[name]
		info, ok := set.Info(name)
		if !ok {
			return fmt.Errorf("tensor %q: missing from the checkpoint", name)
		}
		if !slices.Equal(info.Shape, shape) {
			return fmt.Errorf("tensor %q: shape %v, config.json implies %v", name, info.Shape, shape)
		}
		v, _, err := set.Float32(name)
		if err != nil {
			return err
		}
		for i, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return fmt.Errorf("tensor %q: element %d is %v", name, i, x)
			}
		}
		if bf16 {
			if ad != nil {
				return fmt.Errorf("tensor %q: an adapter is merged into float32 weights, not bfloat16 ones", name)
			}
			t, err := bf16Tensor(eng, shape, v)
			if err != nil {
				return err
			}
			ctx.At(hfScope).VariableWithValue(name, t)
			continue
		}
		flat, done, err := paramTensor(eng, shape)
		if err != nil {
			return err
		}
		copy(flat, v)
		if err := mergeAdapter(ad, name, flat); err != nil {
			return err
		}
		ctx.At(hfScope).VariableWithValue(name, done())
	}
	return nil
}

// paramTensor returns a float32 weight of dims: fill the values, then call
// done for the tensor. With an engine that shares buffers, the values go
// straight into an engine buffer: otherwise the weight's first execution
// copies them into one (9-13.5 s of page faults for the 2.4 GB of a
// Qwen3-0.6B shape on the 2-core machine) and both copies stay resident
// until the weights first change.
func paramTensor(eng compute.Backend, dims []int) (values []float32, done func() *tensors.Tensor, err error) {
	shape := shapes.Make(dtypes.Float32, dims...)
	if eng == nil || !eng.HasSharedBuffers() {
		values = make([]float32, shape.Size())
		return values, func() *tensors.Tensor { return tensors.FromFlatDataAndDimensions(values, dims...) }, nil
	}
	buf, flat, err := eng.NewSharedBuffer(0, shape)
	if err != nil {
		return nil, nil, err
	}
	t, err := tensors.FromBuffer(buf)
	if err != nil {
		return nil, nil, err
	}
	return flat.([]float32), func() *tensors.Tensor { return t }, nil
}

// bf16Tensor is a bfloat16 weight of dims holding v rounded to nearest
// even, in an engine buffer when the engine shares them.
func bf16Tensor(eng compute.Backend, dims []int, v []float32) (*tensors.Tensor, error) {
	shape := shapes.Make(dtypes.BFloat16, dims...)
	if eng == nil || !eng.HasSharedBuffers() {
		out := make([]bfloat16.BFloat16, len(v))
		roundBF16(out, v)
		return tensors.FromFlatDataAndDimensions(out, dims...), nil
	}
	buf, flat, err := eng.NewSharedBuffer(0, shape)
	if err != nil {
		return nil, err
	}
	roundBF16(flat.([]bfloat16.BFloat16), v)
	return tensors.FromBuffer(buf)
}

// roundBF16 rounds x into d, to nearest even.
func roundBF16(d []bfloat16.BFloat16, x []float32) {
	for i, v := range x {
		d[i] = bfloat16.BFloat16(safetensors.Float32ToBF16(v))
	}
}

// hostFloats copies a weight's values as float32 (widening bfloat16).
func hostFloats(t *tensors.Tensor) []float32 {
	if t.DType() == dtypes.BFloat16 {
		b := tensors.MustCopyFlatData[bfloat16.BFloat16](t)
		out := make([]float32, len(b))
		for i, x := range b {
			out[i] = x.Float32()
		}
		return out
	}
	return tensors.MustCopyFlatData[float32](t)
}

// initHFParams creates random weights (N(0, std) matrices, unit norm
// weights, N(0, std) biases) drawn on the host from seed: a random
// checkpoint of the configured shape.
//
// With bf16 they are then stored in bfloat16 (rounded).
func initHFParams(ctx *model.Scope, eng compute.Backend, c *hf.Config, seed uint64, std float64, head, bf16 bool) error {
	rng := rand.New(rand.NewPCG(seed, 0x4f))
	want := hfParamShapes(c, head)
	for _, name := range slices.Sorted(maps.Keys(want)) {
		host := eng
		if bf16 {
			host = nil // drawn in float32 on the host, then rounded into the engine's buffer
		}
		data, done, err := paramTensor(host, want[name])
		if err != nil {
			return err
		}
		norm := strings.HasSuffix(name, "norm.weight")
		for i := range data {
			if norm {
				data[i] = 1 + float32(rng.NormFloat64()*std)
			} else {
				data[i] = float32(rng.NormFloat64() * std)
			}
		}
		if bf16 {
			t, err := bf16Tensor(eng, want[name], data)
			if err != nil {
				return err
			}
			ctx.At(hfScope).VariableWithValue(name, t)
			continue
		}
		ctx.At(hfScope).VariableWithValue(name, done())
	}
	return nil
}

// w is weight name as float32: a bfloat16 weight (model.lora.base_dtype)
// is widened where it is read (the cpu engine folds the conversion into a
// product that reads it).
func (a *hfArch) w(ctx *model.Scope, g *graph.Graph, name string) *graph.Node {
	return asF32(param(ctx, g, hfScope, name))
}

func asF32(x *graph.Node) *graph.Node {
	if x.DType() == dtypes.BFloat16 {
		return graph.ConvertDType(x, dtypes.Float32)
	}
	return x
}

func (a *hfArch) has(ctx *model.Scope, name string) bool {
	return ctx.At(hfScope).Store().GetVariable(model.JoinPath(ctx.At(hfScope).Scope(), name)) != nil
}

// rmsNorm is x / sqrt(mean(x^2, last axis) + eps) * weight.
func rmsNorm(x, weight *graph.Node, eps float64) *graph.Node {
	last := x.Rank() - 1
	ms := graph.ReduceAndKeep(graph.Square(x), graph.ReduceMean, last)
	y := graph.Div(x, graph.Sqrt(graph.AddScalar(ms, eps)))
	return graph.Mul(y, asRank(weight, x.Rank()))
}

// linearT applies x[..., in] @ w^T for w [out, in] (HF's layout), plus bias
// [out] when not nil.
func linearT(x, w, bias *graph.Node) *graph.Node {
	dims := x.Shape().Dimensions
	in := dims[len(dims)-1]
	rows := x.Shape().Size() / in
	y := graph.DotGeneral(graph.Reshape(x, rows, in), []int{1}, nil, w, []int{1}, nil)
	out := append(append([]int{}, dims[:len(dims)-1]...), w.Shape().Dimensions[0])
	y = graph.Reshape(y, out...)
	if bias != nil {
		y = graph.Add(y, asRank(bias, y.Rank()))
	}
	return y
}

// silu is x * sigmoid(x) = x / (1 + exp(-x)).
func silu(x *graph.Node) *graph.Node {
	return graph.Div(x, graph.OnePlus(graph.Exp(graph.Neg(x))))
}

// rope rotates x [B, H, T, dh] by the angles of its positions: with x1, x2
// the two halves of the last axis, (x1 cos - x2 sin, x2 cos + x1 sin), which
// is transformers' x*cos + rotate_half(x)*sin; cos, sin: [B, 1, T, dh]
// (each angle twice, as transformers builds them). rotate_half(x) = (-x2,
// x1) is a contraction of the pair axis with [[0, 1], [-1, 0]]: no Slice,
// whose gradient (Pad) GoMLX's own engine lacks. The rotation is the
// left operand, batched over the B·H·T rows, so that both operands are read
// in place and the product comes out as [rows, 2, half], the layout of x:
// with the pairs on the left, the engine transposed x to put the pair axis
// last and the graph transposed the product back.
func rope(x, cos, sin *graph.Node) *graph.Node {
	d := x.Shape().Dimensions
	rows, half := d[0]*d[1]*d[2], d[3]/2
	pairs := graph.Reshape(x, rows, 2, half)
	r := graph.Const(x.Graph(), [][][]float32{{{0, 1}, {-1, 0}}})
	rot := graph.DotGeneral(graph.BroadcastToDims(r, rows, 2, 2), []int{1}, []int{0}, pairs, []int{1}, []int{0}) // [rows, 2, half]
	return graph.Add(graph.Mul(x, cos), graph.Mul(graph.Reshape(rot, d...), sin))
}

// ropeTables gathers the cos and sin rows of positions pos int32 [B, T],
// as [B, 1, T, dh].
func (a *hfArch) ropeTables(pos *graph.Node) (cos, sin *graph.Node) {
	g := pos.Graph()
	dh := a.c.HeadDim
	b, t := pos.Shape().Dimensions[0], pos.Shape().Dimensions[1]
	idx := graph.Reshape(pos, b, t, 1)
	cosT := graph.Const(g, tensors.FromFlatDataAndDimensions(a.cos, a.maxLen, dh))
	sinT := graph.Const(g, tensors.FromFlatDataAndDimensions(a.sin, a.maxLen, dh))
	return graph.Reshape(graph.Gather(cosT, idx), b, 1, t, dh), graph.Reshape(graph.Gather(sinT, idx), b, 1, t, dh)
}

// embed returns embed_tokens[tokens], [B, T, d].
func (a *hfArch) embed(ctx *model.Scope, tokens *graph.Node) *graph.Node {
	b, t := tokens.Shape().Dimensions[0], tokens.Shape().Dimensions[1]
	// The rows are gathered before they are widened: a bfloat16 table is
	// never converted whole.
	return asF32(graph.Gather(param(ctx, tokens.Graph(), hfScope, "model.embed_tokens.weight"), graph.Reshape(tokens, b, t, 1)))
}

// attend is grouped-query attention: q [B, H, Tq, dh] against k, v
// [B, KV, Tk, dh], query head i reading key/value head i / (H/KV); bias
// broadcasts to [B, H, Tq, Tk]. The H/KV query heads of a group are one
// product against their shared K and V (batch axes B and KV), so K and V
// are never repeated per query head: in a decode step that copy of the
// whole cache cost as much as the attention itself.
func (a *hfArch) attend(q, k, v, bias *graph.Node) *graph.Node {
	rep := a.c.Heads / a.c.KVHeads
	if rep == 1 {
		return attend(q, k, v, bias)
	}
	d := q.Shape().Dimensions
	b, h, tq, dh := d[0], d[1], d[2], d[3]
	kv, tk := k.Shape().Dimensions[1], k.Shape().Dimensions[2]
	q5 := graph.Reshape(q, b, kv, rep, tq, dh)
	scores := graph.DotGeneral(q5, []int{4}, []int{0, 1}, k, []int{3}, []int{0, 1}) // [B,KV,rep,Tq,Tk]
	scores = graph.Reshape(scores, b, h, tq, tk)
	scores = graph.MulScalar(scores, 1/math.Sqrt(float64(dh)))
	probs := graph.Softmax(graph.Add(scores, bias), -1)
	probs = graph.Reshape(probs, b, kv, rep*tq, tk)
	out := graph.DotGeneral(probs, []int{3}, []int{0, 1}, v, []int{2}, []int{0, 1}) // [B,KV,rep·Tq,dh]
	return graph.Reshape(out, b, h, tq, dh)
}

// block runs layer l on x [B, T, d] at positions pos [B, T]. kvFn, when
// set, maps this layer's fresh (k, v) [B, KV, T, dh] (after RoPE) to the
// (k, v) to attend to (the KV cache holds the KV heads only); bias is the
// attention mask, broadcastable to [B, H, T, Tk].
func (a *hfArch) block(ctx *model.Scope, l int, x, cos, sin, bias *graph.Node,
	kvFn func(k, v *graph.Node) (*graph.Node, *graph.Node)) *graph.Node {
	c := a.c
	g := x.Graph()
	p := fmt.Sprintf("model.layers.%d.", l)
	h := rmsNorm(x, a.w(ctx, g, p+"input_layernorm.weight"), c.RMSNormEps)
	heads := func(y *graph.Node, n int) *graph.Node { // [B,T,n*dh] -> [B,n,T,dh]
		d := y.Shape().Dimensions
		return graph.TransposeAllAxes(graph.Reshape(y, d[0], d[1], n, c.HeadDim), 0, 2, 1, 3)
	}
	q := heads(a.proj(ctx, h, p+"self_attn.q_proj"), c.Heads)
	k := heads(a.proj(ctx, h, p+"self_attn.k_proj"), c.KVHeads)
	v := heads(a.proj(ctx, h, p+"self_attn.v_proj"), c.KVHeads)
	if c.QKNorm {
		q = rmsNorm(q, a.w(ctx, g, p+"self_attn.q_norm.weight"), c.RMSNormEps)
		k = rmsNorm(k, a.w(ctx, g, p+"self_attn.k_norm.weight"), c.RMSNormEps)
	}
	q, k = rope(q, cos, sin), rope(k, cos, sin)
	if kvFn != nil {
		k, v = kvFn(k, v)
	}
	att := mergeHeads(a.attend(q, k, v, bias)) // [B,T,H*dh]
	x = graph.Add(x, a.proj(ctx, att, p+"self_attn.o_proj"))
	h = rmsNorm(x, a.w(ctx, g, p+"post_attention_layernorm.weight"), c.RMSNormEps)
	gate := silu(a.proj(ctx, h, p+"mlp.gate_proj"))
	up := a.proj(ctx, h, p+"mlp.up_proj")
	return graph.Add(x, a.proj(ctx, graph.Mul(gate, up), p+"mlp.down_proj"))
}

func (a *hfArch) vocab() int { return a.c.Vocab }

// final applies the last RMSNorm.
func (a *hfArch) final(ctx *model.Scope, x *graph.Node) *graph.Node {
	return rmsNorm(x, a.w(ctx, x.Graph(), "model.norm.weight"), a.c.RMSNormEps)
}

// logits maps hidden states [..., d] to [..., V] with the LM head (the
// embedding table when tied).
func (a *hfArch) logits(ctx *model.Scope, h *graph.Node) *graph.Node {
	name := "lm_head.weight"
	if a.c.TieEmbeddings {
		name = "model.embed_tokens.weight"
	}
	return a.linearW(ctx, h, name, nil)
}

// hidden runs the model on tokens int32 [B, T] at positions 0..T-1 and
// returns the final-norm states [B, T, d].
func (a *hfArch) hidden(ctx *model.Scope, tokens *graph.Node) *graph.Node {
	return fullStates(ctx, a, tokens)
}

// HFParamShapes lists every weight of a Hugging Face policy with its shape
// (for sizing and benchmarks).
func HFParamShapes(c *hf.Config) map[string][]int { return hfParamShapes(c, true) }
