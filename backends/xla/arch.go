package xla

import (
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/ml/model"

	"github.com/cde-rl/cde/backends/xla/hf"
)

// modelArch is what the graphs of a net (prefill, decode, scoring, updates)
// need of a model: cde's character transformer (charArch) or a Hugging Face
// architecture (hfArch).
type modelArch interface {
	// states runs the model on tokens int32 [B,T] at positions pos int32
	// [B,T] with the attention bias (broadcastable to [B,heads,T,Tk]) and
	// returns the final-normalised states [B,T,d]. kvFn, when set, maps each
	// layer's fresh keys and values [B,cacheHeads,T,headDim] to those to
	// attend to (the KV cache).
	states(ctx *model.Scope, tokens, pos, bias *graph.Node, kvFn func(k, v *graph.Node) (*graph.Node, *graph.Node)) *graph.Node
	// logits maps states [..., d] to vocabulary logits [..., V].
	logits(ctx *model.Scope, h *graph.Node) *graph.Node
	// cacheHeads and headDim size the KV cache: [B, cacheHeads, Tmax, headDim]
	// per layer and per K and V.
	cacheHeads() int
	headDim() int
	// vocab is the number of logits per position.
	vocab() int
}

// charArch is cde's own transformer (model.go). recompute puts each block
// under gradient checkpointing (see checkpointed).
type charArch struct {
	c         ModelConfig
	recompute bool
}

func (a charArch) vocab() int { return a.c.Vocab }

func (a charArch) states(ctx *model.Scope, tokens, pos, bias *graph.Node, kvFn func(k, v *graph.Node) (*graph.Node, *graph.Node)) *graph.Node {
	x := embed(ctx, a.c, tokens, pos)
	for l := range a.c.Layers {
		x = checkpointed(a.recompute, x, func(x *graph.Node) *graph.Node { return block(ctx, a.c, l, x, bias, kvFn) })
	}
	x = endCheckpoints(a.recompute, x)
	g := x.Graph()
	return layerNorm(x, param(ctx, g, "final", "ln_gain"), param(ctx, g, "final", "ln_bias"))
}

func (a charArch) logits(ctx *model.Scope, h *graph.Node) *graph.Node { return logitsOf(ctx, h) }
func (a charArch) cacheHeads() int                                    { return a.c.Heads }
func (a charArch) headDim() int                                       { return a.c.DModel / a.c.Heads }

func (a *hfArch) states(ctx *model.Scope, tokens, pos, bias *graph.Node, kvFn func(k, v *graph.Node) (*graph.Node, *graph.Node)) *graph.Node {
	cos, sin := a.ropeTables(pos)
	x := a.embed(ctx, tokens)
	l := 0
	for l = 0; l < a.c.Layers; l++ {
		x = checkpointed(a.recompute, x, func(x *graph.Node) *graph.Node { return a.block(ctx, l, x, cos, sin, bias, kvFn) })
	}
	return a.final(ctx, endCheckpoints(a.recompute, x))
}

func (a *hfArch) cacheHeads() int { return a.c.KVHeads }
func (a *hfArch) headDim() int    { return a.c.HeadDim }

// archOf returns the architecture of cfg; recompute (for training graphs,
// with cfg.Recompute) checkpoints every block.
func archOf(cfg ModelConfig, recompute bool) modelArch {
	if cfg.HF != nil {
		a := newHFArch(cfg.HF, cfg.MaxLen)
		a.lora = cfg.LoRA
		a.recompute = recompute
		return a
	}
	return charArch{c: cfg, recompute: recompute}
}

// checkpointed applies block to x, under GoMLX's gradient checkpointing
// when on: the backward pass recomputes the block's activations from its
// input instead of keeping them from the forward pass (model.recompute),
// so a training pass holds one block's activations and every block's
// input, at the cost of a second forward through each block.
func checkpointed(on bool, x *graph.Node, block func(*graph.Node) *graph.Node) *graph.Node {
	if on {
		x = x.Checkpoint()
	}
	return block(x)
}

// endCheckpoints closes the checkpointed region after the last block.
func endCheckpoints(on bool, x *graph.Node) *graph.Node {
	if on {
		return x.StopCheckpoint()
	}
	return x
}

// HFModelConfig sizes a net for the Hugging Face model c, with sequences of
// at most maxLen tokens.
func HFModelConfig(c *hf.Config, maxLen int) ModelConfig {
	return ModelConfig{HF: c, Vocab: c.Vocab, Layers: c.Layers, DModel: c.Hidden, Heads: c.Heads, FF: c.Intermediate, MaxLen: maxLen}
}

// fullStates runs arch on tokens [B,T] at positions 0..T-1 with the causal
// mask.
func fullStates(ctx *model.Scope, arch modelArch, tokens *graph.Node) *graph.Node {
	g := tokens.Graph()
	b, t := tokens.Shape().Dimensions[0], tokens.Shape().Dimensions[1]
	pos := graph.BroadcastToDims(graph.Iota(g, shapesOf(dtypes.Int32, 1, t), 1), b, t)
	return arch.states(ctx, tokens, pos, causalBias(g, t), nil)
}
