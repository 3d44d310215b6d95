package xla

import (
	"fmt"
	"strings"
	"weak"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
	"github.com/gomlx/gomlx/ml/model"
)

// Generation in bfloat16 (rollout.dtype: bfloat16, Options.GenBF16).
//
// Generate then runs a view of the policy (genView) whose Hugging Face
// weight matrices are bfloat16 copies of the policy's, made again only for
// the matrices whose value changed since the last Generate (an update, a
// load, a weight reload): once per weight sync. Each product of the view
// with such a matrix takes bfloat16 inputs, the activations rounded to
// nearest even and the stored matrix, and accumulates in float32, as a
// bfloat16 model does on a GPU; everything else (norms, RoPE, attention,
// the KV cache, the softmax over the vocabulary, the noise) stays float32.
// On the xla:* engines the product is one bfloat16 dot with a float32
// result; the cpu and go engines, which have no bfloat16 arithmetic,
// compute the same products from the rounded values in float32 (a
// product of two bfloat16 values is exact in float32). The training graphs
// never see the copies: the trainer rescores every response in float32
// before the update (trainer.rollout), so only the sampling is bfloat16.

// genView is the net Generate runs: the policy, or with GenBF16 its
// bfloat16 view, refreshed.
func (b *Backend) genView() (*net, error) {
	if !b.opts.GenBF16 {
		return b.policy, nil
	}
	if b.gen == nil {
		if _, ok := b.policy.arch.(*hfArch); !ok {
			return nil, fmt.Errorf("config: rollout.dtype bfloat16: needs a Hugging Face policy (model.hf); this policy is cde's own small model")
		}
		b.gen = &bf16View{}
	}
	if err := b.gen.refresh(b.policy); err != nil {
		return nil, fmt.Errorf("rollout.dtype bfloat16: %w", err)
	}
	return b.gen.net, nil
}

// bf16View holds the bfloat16 generation view and what its variables
// were made from.
type bf16View struct {
	net *net
	// from[path] is the policy tensor the view's variable was made from
	// (weak: the view never keeps an old policy value alive).
	from map[string]weak.Pointer[tensors.Tensor]
	// convert rounds a float32 tensor to bfloat16 on the engine (one
	// compiled graph per shape).
	convert *graph.Exec
	// converted counts the matrices rounded so far (tests).
	converted int
}

// genMatrix reports whether the policy variable v gets a bfloat16 copy:
// a float32 Hugging Face weight of rank 2 (projections, embedding, LM
// head). Norm weights, biases and LoRA adapters are shared as they are.
func genMatrix(v *model.Variable) bool {
	return v.Scope() == "/"+hfScope && v.Shape().Rank() == 2 && v.Shape().DType == dtypes.Float32
}

// refresh makes the view's variables current with the policy's.
func (g *bf16View) refresh(p *net) error {
	if g.net == nil {
		arch := *p.arch.(*hfArch)
		arch.bf16 = true
		arch.nativeBF16 = strings.HasPrefix(p.backend.Name(), "xla")
		store := model.NewStore()
		g.net = &net{cfg: p.cfg, arch: &arch, trainArch: &arch, backend: p.backend, ctx: store.RootScope(), view: true,
			prefill: map[int]*model.Exec{}, actor: map[actorKey]*model.Exec{}}
		g.from = map[string]weak.Pointer[tensors.Tensor]{}
		g.convert = graph.MustNewExec(p.backend, func(x *graph.Node) *graph.Node { return graph.ConvertDType(x, dtypes.BFloat16) })
		g.convert.SetMaxCache(execCacheShapes)
	}
	store := g.net.ctx.Store()
	for v := range p.ctx.Store().IterVariables() {
		path := v.Path()
		if v.Scope() != "/"+hfScope && v.Scope() != "/"+loraScope {
			continue // the critic's head, optimiser state: not read by generation
		}
		val, err := v.Value()
		if err != nil {
			return err
		}
		if w, ok := g.from[path]; ok && w.Value() == val {
			continue
		}
		out := val
		if genMatrix(v) {
			if out, err = g.round(val); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			g.converted++
		}
		if gv := store.GetVariable(path); gv == nil {
			if _, err := store.CreateVariable(path, out); err != nil {
				return err
			}
		} else if genMatrix(v) {
			if err := gv.SetValue(out); err != nil { // frees the old copy
				return err
			}
		} else if err := gv.SetValuePreservingOld(out); err != nil { // the policy's tensor: never freed here
			return err
		}
		g.from[path] = weak.Make(val)
	}
	return nil
}

// round converts a float32 tensor to bfloat16 on the engine.
func (g *bf16View) round(val *tensors.Tensor) (out *tensors.Tensor, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("converting to bfloat16: %v", r)
		}
	}()
	return g.convert.MustExec1(val), nil
}

// linearW is linearT with the weight read by name. In a bfloat16 view
// (a.bf16) a bfloat16 weight meets x rounded to bfloat16 and the product
// accumulates in float32 (see the top of this file); otherwise a bfloat16
// weight (model.lora.base_dtype) is widened and x kept, as before.
func (a *hfArch) linearW(ctx *model.Scope, x *graph.Node, name string, bias *graph.Node) *graph.Node {
	w := param(ctx, x.Graph(), hfScope, name)
	if a.bf16 && w.DType() == dtypes.BFloat16 {
		return linearBF16(x, w, bias, a.nativeBF16)
	}
	return linearT(x, asF32(w), bias)
}

// linearBF16 is x[..., in] @ w^T (+ bias) for w bfloat16 [out, in], with
// x rounded to bfloat16 and a float32 sum and result. native uses the
// engine's bfloat16 dot; otherwise the rounded values are widened (the cpu
// engine folds the weight's widening into the product).
func linearBF16(x, w, bias *graph.Node, native bool) *graph.Node {
	xb := graph.ConvertDType(x, dtypes.BFloat16)
	if !native {
		return linearT(graph.ConvertDType(xb, dtypes.Float32), graph.ConvertDType(w, dtypes.Float32), bias)
	}
	dims := x.Shape().Dimensions
	in := dims[len(dims)-1]
	rows := x.Shape().Size() / in
	y := graph.Dot(graph.Reshape(xb, rows, in), w).WithAccumulatorDType(dtypes.Float32).WithOutputDType(dtypes.Float32).
		General([]int{1}, nil, []int{1}, nil)
	out := append(append([]int{}, dims[:len(dims)-1]...), w.Shape().Dimensions[0])
	y = graph.Reshape(y, out...)
	if bias != nil {
		y = graph.Add(y, asRank(bias, y.Rank()))
	}
	return y
}
