package xla

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
	"github.com/gomlx/gomlx/ml/model"

	"github.com/cde-rl/cde/backends/xla/hf"
	"github.com/cde-rl/cde/backends/xla/peft"
)

// ModelConfig sizes a causal transformer (policy or critic).
type ModelConfig struct {
	Vocab   int // vocabulary size
	Layers  int // transformer blocks
	DModel  int // residual width d
	Heads   int // attention heads (d must divide by it)
	FF      int // feed-forward width (0 = 4 d)
	MaxLen  int // longest prompt + response, in tokens (positions)
	ValueK  int // value heads (critic only; 0 for the policy)
	InitStd float64
	// HF, when set, makes the model that Hugging Face architecture (sizes
	// from its config.json; Vocab, Layers, DModel, Heads and FF mirror it,
	// see HFModelConfig) instead of cde's own transformer.
	HF *hf.Config
	// LoRA, with HF, trains low-rank adapters on the projections it
	// targets with the Hugging Face weights frozen (model.lora; lora.go).
	LoRA *peft.Config
	// Recompute (model.recompute) recomputes each block's activations in
	// the backward pass of the training graphs instead of keeping them
	// (gradient checkpointing per block). It changes memory and time, not
	// results, so checkpoints do not compare it.
	Recompute bool
	// BaseBF16 (model.lora.base_dtype: bfloat16), with LoRA, stores the
	// frozen Hugging Face weights in bfloat16, 2 bytes a value instead of
	// 4: the graphs widen them to float32 where they are read (the cpu
	// engine inside the product that reads them), and compute in float32
	// as before. A checkpoint stored in bfloat16 (most are) loses
	// nothing; a float32 one is rounded to nearest even.
	BaseBF16 bool
}

func (c ModelConfig) ff() int {
	if c.FF > 0 {
		return c.FF
	}
	return 4 * c.DModel
}

// Validate checks the sizes.
func (c ModelConfig) Validate() error {
	if c.LoRA != nil {
		if c.HF == nil {
			return fmt.Errorf("config: model.lora: adapters need a Hugging Face model (model.hf)")
		}
		if err := c.LoRA.Validate(); err != nil {
			return fmt.Errorf("config: model.lora: %w", err)
		}
		if c.LoRA.Dropout != 0 {
			return fmt.Errorf("config: model.lora.dropout = %v: only 0 is implemented (the adapters' dropout would make the first minibatch's policy ratio differ from 1)", c.LoRA.Dropout)
		}
	}
	if c.BaseBF16 && c.LoRA == nil {
		return fmt.Errorf("config: model.lora.base_dtype bfloat16: only a LoRA run's frozen base weights can be stored in bfloat16 (set model.lora.rank)")
	}
	if c.HF != nil {
		if c.MaxLen < 2 || c.MaxLen > c.HF.MaxPositions {
			return fmt.Errorf("config: model.max_len = %d: must be in [2, %d] (max_position_embeddings of the Hugging Face model)", c.MaxLen, c.HF.MaxPositions)
		}
		return nil
	}
	switch {
	case c.Vocab < 2:
		return fmt.Errorf("model: vocab %d < 2", c.Vocab)
	case c.Layers < 1:
		return fmt.Errorf("config: model.layers = %d: must be >= 1", c.Layers)
	case c.DModel < 1 || c.Heads < 1 || c.DModel%c.Heads != 0:
		return fmt.Errorf("config: model.d_model = %d, model.heads = %d: d_model must be a positive multiple of heads", c.DModel, c.Heads)
	case c.MaxLen < 2:
		return fmt.Errorf("model: max length %d < 2", c.MaxLen)
	}
	return nil
}

// initParams creates the model's variables in ctx with values drawn on the
// host from seed (so initialisation is reproducible and engine independent):
// N(0, InitStd) matrices, output projections scaled by 1/sqrt(2 L) (GPT-2),
// unit LayerNorm gains, zero biases.
func initParams(ctx *model.Scope, c ModelConfig, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	std := c.InitStd
	if std == 0 {
		std = 0.02
	}
	normal := func(s float64, dims ...int) *tensors.Tensor {
		n := 1
		for _, d := range dims {
			n *= d
		}
		data := make([]float32, n)
		for i := range data {
			data[i] = float32(rng.NormFloat64() * s)
		}
		return tensors.FromFlatDataAndDimensions(data, dims...)
	}
	fill := func(v float32, dims ...int) *tensors.Tensor {
		n := 1
		for _, d := range dims {
			n *= d
		}
		data := make([]float32, n)
		for i := range data {
			data[i] = v
		}
		return tensors.FromFlatDataAndDimensions(data, dims...)
	}
	d, f := c.DModel, c.ff()
	proj := std / math.Sqrt(2*float64(c.Layers))
	ctx.At("embed").VariableWithValue("tokens", normal(std, c.Vocab, d))
	ctx.At("embed").VariableWithValue("positions", normal(std, c.MaxLen, d))
	for l := range c.Layers {
		lc := ctx.At("layer%d", l)
		lc.VariableWithValue("ln1_gain", fill(1, d))
		lc.VariableWithValue("ln1_bias", fill(0, d))
		lc.VariableWithValue("wq", normal(std, d, d))
		lc.VariableWithValue("wk", normal(std, d, d))
		lc.VariableWithValue("wv", normal(std, d, d))
		lc.VariableWithValue("wo", normal(proj, d, d))
		lc.VariableWithValue("ln2_gain", fill(1, d))
		lc.VariableWithValue("ln2_bias", fill(0, d))
		lc.VariableWithValue("w1", normal(std, d, f))
		lc.VariableWithValue("b1", fill(0, f))
		lc.VariableWithValue("w2", normal(proj, f, d))
		lc.VariableWithValue("b2", fill(0, d))
	}
	ctx.At("final").VariableWithValue("ln_gain", fill(1, d))
	ctx.At("final").VariableWithValue("ln_bias", fill(0, d))
	if c.ValueK > 0 {
		ctx.At("value").VariableWithValue("w", normal(std, d, c.ValueK))
		ctx.At("value").VariableWithValue("b", fill(0, c.ValueK))
	} else {
		ctx.At("lm").VariableWithValue("w", normal(std, d, c.Vocab))
	}
}

// initValueHead creates the critic's value head (w [d, K] N(0, 0.02), b
// zero) drawn from seed, as initParams does for cde's own critic.
func initValueHead(ctx *model.Scope, d, k int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x7a1e))
	w := make([]float32, d*k)
	for i := range w {
		w[i] = float32(rng.NormFloat64() * 0.02)
	}
	ctx.At("value").VariableWithValue("w", tensors.FromFlatDataAndDimensions(w, d, k))
	ctx.At("value").VariableWithValue("b", tensors.FromFlatDataAndDimensions(make([]float32, k), k))
}

// param reads a variable created by initParams.
func param(ctx *model.Scope, g *graph.Graph, scope, name string) *graph.Node {
	v := ctx.Store().GetVariable(model.JoinPath(ctx.Scope(), scope, name))
	if v == nil {
		panic(fmt.Sprintf("model variable %s/%s missing", scope, name))
	}
	return v.NodeValue(g)
}

// layerNorm normalises the last axis: (x - mean) / sqrt(var + 1e-5) * gain + bias.
func layerNorm(x, gain, bias *graph.Node) *graph.Node {
	last := x.Rank() - 1
	mean := graph.ReduceAndKeep(x, graph.ReduceMean, last)
	xc := graph.Sub(x, mean)
	variance := graph.ReduceAndKeep(graph.Square(xc), graph.ReduceMean, last)
	y := graph.Div(xc, graph.Sqrt(graph.AddScalar(variance, 1e-5)))
	return graph.Add(graph.Mul(y, asRank(gain, x.Rank())), asRank(bias, x.Rank()))
}

// asRank reshapes a vector [n] to [1, ..., 1, n] of the given rank, so it
// broadcasts against the last axis.
func asRank(vec *graph.Node, rank int) *graph.Node {
	dims := make([]int, rank)
	for i := range dims {
		dims[i] = 1
	}
	dims[rank-1] = vec.Shape().Dimensions[0]
	return graph.Reshape(vec, dims...)
}

// linear applies x[..., in] @ w[in, out] as one 2-D matmul.
func linear(x, w *graph.Node) *graph.Node {
	dims := x.Shape().Dimensions
	in := dims[len(dims)-1]
	rows := x.Shape().Size() / in
	y := graph.DotGeneral(graph.Reshape(x, rows, in), []int{1}, nil, w, []int{0}, nil)
	out := append(append([]int{}, dims[:len(dims)-1]...), w.Shape().Dimensions[1])
	return graph.Reshape(y, out...)
}

// splitHeads turns [B, T, d] into [B, H, T, d/H].
func splitHeads(x *graph.Node, heads int) *graph.Node {
	d := x.Shape().Dimensions
	x = graph.Reshape(x, d[0], d[1], heads, d[2]/heads)
	return graph.TransposeAllAxes(x, 0, 2, 1, 3)
}

// mergeHeads turns [B, H, T, dh] into [B, T, H*dh].
func mergeHeads(x *graph.Node) *graph.Node {
	d := x.Shape().Dimensions
	x = graph.TransposeAllAxes(x, 0, 2, 1, 3)
	return graph.Reshape(x, d[0], d[2], d[1]*d[3])
}

// attend computes softmax(q k^T / sqrt(dh) + bias) v for q [B,H,Tq,dh],
// k, v [B,H,Tk,dh], bias broadcastable to [B,H,Tq,Tk] (0 or -1e9).
func attend(q, k, v, bias *graph.Node) *graph.Node {
	dh := q.Shape().Dimensions[3]
	scores := graph.DotGeneral(q, []int{3}, []int{0, 1}, k, []int{3}, []int{0, 1}) // [B,H,Tq,Tk]
	scores = graph.MulScalar(scores, 1/math.Sqrt(float64(dh)))
	scores = graph.Add(scores, bias)
	probs := graph.Softmax(scores, -1)
	return graph.DotGeneral(probs, []int{3}, []int{0, 1}, v, []int{2}, []int{0, 1}) // [B,H,Tq,dh]
}

// block runs one pre-LayerNorm transformer block on x [B,T,d]. kvFn, when
// set, maps this layer's fresh (k, v) [B,H,T,dh] to the (k, v) to attend to
// (the KV cache) and bias is the attention mask.
func block(ctx *model.Scope, c ModelConfig, l int, x, bias *graph.Node,
	kvFn func(k, v *graph.Node) (*graph.Node, *graph.Node)) *graph.Node {
	g := x.Graph()
	s := fmt.Sprintf("layer%d", l)
	h := layerNorm(x, param(ctx, g, s, "ln1_gain"), param(ctx, g, s, "ln1_bias"))
	q := splitHeads(linear(h, param(ctx, g, s, "wq")), c.Heads)
	k := splitHeads(linear(h, param(ctx, g, s, "wk")), c.Heads)
	v := splitHeads(linear(h, param(ctx, g, s, "wv")), c.Heads)
	if kvFn != nil {
		k, v = kvFn(k, v)
	}
	a := mergeHeads(attend(q, k, v, bias))
	x = graph.Add(x, linear(a, param(ctx, g, s, "wo")))
	h = layerNorm(x, param(ctx, g, s, "ln2_gain"), param(ctx, g, s, "ln2_bias"))
	h = graph.Add(linear(h, param(ctx, g, s, "w1")), asRank(param(ctx, g, s, "b1"), h.Rank()))
	h = graph.Max(h, graph.ScalarZero(g, h.DType())) // ReLU: cheapest on the pure-Go engine
	h = graph.Add(linear(h, param(ctx, g, s, "w2")), asRank(param(ctx, g, s, "b2"), h.Rank()))
	return graph.Add(x, h)
}

// embed returns token + position embeddings, [B,T,d], for tokens and
// positions int32 [B,T].
func embed(ctx *model.Scope, c ModelConfig, tokens, positions *graph.Node) *graph.Node {
	g := tokens.Graph()
	te := param(ctx, g, "embed", "tokens")
	pe := param(ctx, g, "embed", "positions")
	b, t := tokens.Shape().Dimensions[0], tokens.Shape().Dimensions[1]
	x := graph.Gather(te, graph.Reshape(tokens, b, t, 1))
	p := graph.Gather(pe, graph.Reshape(positions, b, t, 1))
	return graph.Add(x, p)
}

// causalBias is 0 where key <= query and -1e9 elsewhere, [1,1,T,T].
func causalBias(g *graph.Graph, t int) *graph.Node {
	shape := shapesOf(dtypes.Int32, t, t)
	qi := graph.Iota(g, shape, 0)
	ki := graph.Iota(g, shape, 1)
	allowed := graph.LessOrEqual(ki, qi)
	zero := graph.Zeros(g, shapesOf(dtypes.Float32, t, t))
	neg := graph.AddScalar(zero, -1e9)
	return graph.Reshape(graph.Where(allowed, zero, neg), 1, 1, t, t)
}

// hiddenStates runs the full causal transformer on tokens int32 [B,T]
// (positions 0..T-1) and returns the final-LayerNorm states [B,T,d].
func hiddenStates(ctx *model.Scope, c ModelConfig, tokens *graph.Node) *graph.Node {
	g := tokens.Graph()
	b, t := tokens.Shape().Dimensions[0], tokens.Shape().Dimensions[1]
	pos := graph.BroadcastToDims(graph.Iota(g, shapesOf(dtypes.Int32, 1, t), 1), b, t)
	x := embed(ctx, c, tokens, pos)
	bias := causalBias(g, t)
	for l := range c.Layers {
		x = block(ctx, c, l, x, bias, nil)
	}
	return layerNorm(x, param(ctx, g, "final", "ln_gain"), param(ctx, g, "final", "ln_bias"))
}

// logitsOf maps hidden states [..., d] to vocabulary logits [..., V].
func logitsOf(ctx *model.Scope, h *graph.Node) *graph.Node {
	return linear(h, param(ctx, h.Graph(), "lm", "w"))
}

// valuesOf maps hidden states [..., d] to K head values [..., K].
func valuesOf(ctx *model.Scope, h *graph.Node) *graph.Node {
	g := h.Graph()
	return graph.Add(linear(h, param(ctx, g, "value", "w")), asRank(param(ctx, g, "value", "b"), h.Rank()))
}
