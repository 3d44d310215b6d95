package xla

import (
	"fmt"
	"math"
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// net is one transformer (the policy or the critic) with its own variables,
// Adam state and compiled graphs. Graphs are built once per input-shape
// bucket (GoMLX caches compiled graphs per shape).
type net struct {
	cfg     ModelConfig
	backend backends.Backend
	ctx     *context.Context
	// adamStep counts optimiser updates (bias correction).
	adamStep int

	prefill map[int]*context.Exec // by total cache length
	decode  *context.Exec
	score   *context.Exec
	train   *context.Exec
	sft     *context.Exec
}

// Hyper-parameter slots of the train graphs' `hyper` input (one small
// tensor, so changing a value never recompiles).
const (
	hInvTemp = iota
	hClipLow
	hClipHigh
	hEntCoef
	hKLCoef
	hLR // bias-corrected Adam step size
	hMaxGradNorm
	hNum
)

// maxLogRatio bounds the log-ratios log(pi/pi_old) and log(pi_ref/pi) of
// the actor loss before exp (exp(20) is about 4.9e8, far past any clip
// range, and finite in float32).
const maxLogRatio = 20

const (
	adamBeta1 = 0.9
	adamBeta2 = 0.999
	adamEps   = 1e-8
)

func newNet(b backends.Backend, cfg ModelConfig, seed uint64) (*net, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx := context.New().Checked(false)
	initParams(ctx, cfg, seed)
	n := &net{cfg: cfg, backend: b, ctx: ctx, prefill: map[int]*context.Exec{}}
	// Adam moments, created on the host so a checkpoint restores them
	// before any graph is built.
	for _, v := range n.trainable() {
		zeros := tensors.FromShape(v.Shape())
		ctx.InAbsPath("/adam/m"+v.ScopeAndName()).VariableWithValue("m", zeros)
		ctx.InAbsPath("/adam/v"+v.ScopeAndName()).VariableWithValue("v", tensors.FromShape(v.Shape()))
	}
	return n, nil
}

// trainable lists the model's own variables (everything but optimiser state).
func (n *net) trainable() []*context.Variable {
	var out []*context.Variable
	for v := range n.ctx.IterVariables() {
		if !strings.HasPrefix(v.Scope(), "/adam") {
			out = append(out, v)
		}
	}
	return out
}

// sampleFromLogProbs picks argmax(lp + gumbel) and returns the token, its
// log-prob and the distribution's entropy -sum p log p.
func sampleFromLogProbs(lp, gumbel *graph.Node) (tok, tokLP, ent *graph.Node) {
	vocab := lp.Shape().Dimensions[lp.Rank()-1]
	tok = graph.ArgMax(graph.Add(lp, gumbel), -1, dtypes.Int32)
	oh := graph.OneHot(tok, vocab, dtypes.Float32)
	tokLP = graph.ReduceSum(graph.Mul(oh, lp), -1)
	ent = graph.Neg(graph.ReduceSum(graph.Mul(graph.Exp(lp), lp), -1))
	return
}

// buildPrefill returns the graph for a prompt batch: inputs tokens int32
// [B,P], last int32 [B] (index of each prompt's last token), gumbel [B,V],
// invTemp scalar; outputs token, logp, entropy, hidden [B,d], then per layer
// the K and V caches [B,H,Tmax,dh] (positions >= P are zero).
func (n *net) buildPrefill(tmax int) func(ctx *context.Context, in []*graph.Node) []*graph.Node {
	c := n.cfg
	return func(ctx *context.Context, in []*graph.Node) []*graph.Node {
		tokens, last, gumbel, invTemp := in[0], in[1], in[2], in[3]
		g := tokens.Graph()
		b, p := tokens.Shape().Dimensions[0], tokens.Shape().Dimensions[1]
		dh := c.DModel / c.Heads
		pos := graph.BroadcastToDims(graph.Iota(g, shapesOf(dtypes.Int32, 1, p), 1), b, p)
		x := embed(ctx, c, tokens, pos)
		bias := causalBias(g, p)
		var caches []*graph.Node
		pad := graph.Zeros(g, shapesOf(dtypes.Float32, b, c.Heads, tmax-p, dh))
		keep := func(k, v *graph.Node) (*graph.Node, *graph.Node) {
			caches = append(caches, graph.Concatenate([]*graph.Node{k, pad}, 2), graph.Concatenate([]*graph.Node{v, pad}, 2))
			return k, v
		}
		for l := range c.Layers {
			x = block(ctx, c, l, x, bias, keep)
		}
		h := layerNorm(x, param(ctx, g, "final", "ln_gain"), param(ctx, g, "final", "ln_bias"))
		pick := graph.OneHot(last, p, dtypes.Float32)                              // [B,P]
		hLast := graph.DotGeneral(pick, []int{1}, []int{0}, h, []int{1}, []int{0}) // [B,d]
		lp := graph.LogSoftmax(graph.Mul(logitsOf(ctx, hLast), invTemp), -1)
		tok, tokLP, ent := sampleFromLogProbs(lp, gumbel)
		return append([]*graph.Node{tok, tokLP, ent, hLast}, caches...)
	}
}

// buildDecode returns the one-token step with a KV cache: inputs token int32
// [B], pos int32 [B] (the token's position), gumbel [B,V], invTemp, then the
// 2L caches; outputs as buildPrefill, with the token's K, V written at pos.
func (n *net) buildDecode() func(ctx *context.Context, in []*graph.Node) []*graph.Node {
	c := n.cfg
	return func(ctx *context.Context, in []*graph.Node) []*graph.Node {
		token, pos, gumbel, invTemp := in[0], in[1], in[2], in[3]
		cachesIn := in[4:]
		g := token.Graph()
		b := token.Shape().Dimensions[0]
		tmax := cachesIn[0].Shape().Dimensions[2]
		dh := c.DModel / c.Heads
		x := embed(ctx, c, graph.Reshape(token, b, 1), graph.Reshape(pos, b, 1)) // [B,1,d]
		full := []int{b, c.Heads, tmax, dh}
		// Keys at positions <= pos are visible.
		ki := graph.Iota(g, shapesOf(dtypes.Int32, b, tmax), 1)
		// The new K and V go to position pos of the caches: a select, one
		// pass over each cache (a one-hot blend would take several).
		at := graph.Equal(ki, graph.BroadcastToDims(graph.Reshape(pos, b, 1), b, tmax)) // [B,Tmax]
		write := graph.BroadcastToDims(graph.Reshape(at, b, 1, tmax, 1), full...)
		visible := graph.LessOrEqual(ki, graph.BroadcastToDims(graph.Reshape(pos, b, 1), b, tmax))
		zero := graph.Zeros(g, shapesOf(dtypes.Float32, b, tmax))
		bias := graph.Reshape(graph.Where(visible, zero, graph.AddScalar(zero, -1e9)), b, 1, 1, tmax)
		var caches []*graph.Node
		l := 0
		update := func(k, v *graph.Node) (*graph.Node, *graph.Node) {
			kc := graph.Where(write, graph.BroadcastToDims(k, full...), cachesIn[2*l])
			vc := graph.Where(write, graph.BroadcastToDims(v, full...), cachesIn[2*l+1])
			caches = append(caches, kc, vc)
			return kc, vc
		}
		for l = 0; l < c.Layers; l++ {
			x = block(ctx, c, l, x, bias, update)
		}
		h := layerNorm(x, param(ctx, g, "final", "ln_gain"), param(ctx, g, "final", "ln_bias"))
		h = graph.Reshape(h, b, c.DModel)
		lp := graph.LogSoftmax(graph.Mul(logitsOf(ctx, h), invTemp), -1)
		tok, tokLP, ent := sampleFromLogProbs(lp, gumbel)
		return append([]*graph.Node{tok, tokLP, ent, h}, caches...)
	}
}

// buildScore: inputs tokens int32 [B,T], targets int32 [B,T], invTemp;
// outputs for the policy the log-prob of targets[t] at each position and the
// entropy [B,T]; for the critic the values [B,T,K].
func (n *net) buildScore() func(ctx *context.Context, in []*graph.Node) []*graph.Node {
	c := n.cfg
	return func(ctx *context.Context, in []*graph.Node) []*graph.Node {
		h := hiddenStates(ctx, c, in[0])
		if c.ValueK > 0 {
			return []*graph.Node{valuesOf(ctx, h)}
		}
		lp := graph.LogSoftmax(graph.Mul(logitsOf(ctx, h), in[2]), -1)
		tlp, ent := tokenLogProbs(lp, in[1])
		return []*graph.Node{tlp, ent}
	}
}

// tokenLogProbs picks lp[..., target] and the entropy at each position.
func tokenLogProbs(lp, targets *graph.Node) (tlp, ent *graph.Node) {
	vocab := lp.Shape().Dimensions[lp.Rank()-1]
	oh := graph.OneHot(targets, vocab, dtypes.Float32)
	tlp = graph.ReduceSum(graph.Mul(oh, lp), -1)
	ent = graph.Neg(graph.ReduceSum(graph.Mul(graph.Exp(lp), lp), -1))
	return
}

// maskedMean is sum(x * mask) / max(sum(mask), 1).
func maskedMean(x, mask *graph.Node) *graph.Node {
	den := graph.Max(graph.ReduceAllSum(mask), graph.ScalarOne(x.Graph(), dtypes.Float32))
	return graph.Div(graph.ReduceAllSum(graph.Mul(x, mask)), den)
}

func hyperAt(hyper *graph.Node, i int) *graph.Node {
	return graph.Reshape(graph.Slice(hyper, graph.AxisRange(i, i+1)))
}

// adamUpdate applies one Adam step with global-norm gradient clipping to the
// trainable variables, given loss. lr is the bias-corrected step size
// lr * sqrt(1 - b2^t) / (1 - b1^t), computed on the host. Returns the
// gradient norm before clipping and a float32 flag, 1 when the update was
// applied.
//
// The update is guarded: when the loss, the gradient norm or any updated
// weight or Adam moment is not finite, every variable keeps its old value
// (flag 0), so a bad step can never write NaN or Inf into the model; the
// host reads the flag and stops the run naming the quantity.
func (n *net) adamUpdate(ctx *context.Context, loss, lr, maxNorm *graph.Node) (norm, applied *graph.Node) {
	g := loss.Graph()
	vars := n.trainable()
	nodes := make([]*graph.Node, len(vars))
	for i, v := range vars {
		nodes[i] = v.ValueGraph(g)
	}
	grads := graph.Gradient(loss, nodes...)
	sq := graph.ScalarZero(g, dtypes.Float32)
	for _, gr := range grads {
		sq = graph.Add(sq, graph.ReduceAllSum(graph.Square(gr)))
	}
	norm = graph.Sqrt(sq)
	// scale = min(1, maxNorm / (norm + 1e-6))
	scale := graph.Min(graph.ScalarOne(g, dtypes.Float32), graph.Div(maxNorm, graph.AddScalar(norm, 1e-6)))
	type update struct {
		v         *context.Variable
		old, next *graph.Node
	}
	var ups []update
	// poison is 0 when every value it has seen is finite and NaN otherwise
	// (x*0 is NaN exactly for infinite or NaN x, per IEEE 754).
	poison := graph.Add(graph.MulScalar(loss, 0), graph.MulScalar(norm, 0))
	for i, v := range vars {
		gr := graph.Mul(grads[i], scale)
		mv := ctx.InAbsPath("/adam/m"+v.ScopeAndName()).GetVariableByScopeAndName("/adam/m"+v.ScopeAndName(), "m")
		vv := ctx.InAbsPath("/adam/v"+v.ScopeAndName()).GetVariableByScopeAndName("/adam/v"+v.ScopeAndName(), "v")
		mOld, vOld := mv.ValueGraph(g), vv.ValueGraph(g)
		m := graph.Add(graph.MulScalar(mOld, adamBeta1), graph.MulScalar(gr, 1-adamBeta1))
		s := graph.Add(graph.MulScalar(vOld, adamBeta2), graph.MulScalar(graph.Square(gr), 1-adamBeta2))
		step := graph.Div(graph.Mul(m, lr), graph.AddScalar(graph.Sqrt(s), adamEps))
		w := graph.Sub(nodes[i], step)
		for _, x := range []*graph.Node{w, m, s} {
			poison = graph.Add(poison, graph.ReduceAllSum(graph.MulScalar(x, 0)))
		}
		ups = append(ups, update{mv, mOld, m}, update{vv, vOld, s}, update{v, nodes[i], w})
	}
	ok := graph.Equal(poison, graph.ScalarZero(g, dtypes.Float32))
	for _, u := range ups {
		cond := graph.BroadcastToDims(ok, u.old.Shape().Dimensions...)
		u.v.SetValueGraph(graph.Where(cond, u.next, u.old))
	}
	return norm, graph.ConvertDType(ok, dtypes.Float32)
}

// biasCorrectedLR advances the Adam step count and returns the step size.
func (n *net) biasCorrectedLR(lr float64) float64 {
	n.adamStep++
	t := float64(n.adamStep)
	return lr * math.Sqrt(1-math.Pow(adamBeta2, t)) / (1 - math.Pow(adamBeta1, t))
}

// buildActorTrain: the PPO clipped surrogate (token-mean), with optional
// entropy bonus and k3 KL to a reference. Inputs: tokens, targets int32
// [B,T]; mask, adv, oldLP, refLP [B,T]; hyper [hNum]. Outputs: loss,
// pg_loss, clipfrac, entropy, kl, grad_norm, ppl-term (mean -logp).
func (n *net) buildActorTrain() func(ctx *context.Context, in []*graph.Node) []*graph.Node {
	c := n.cfg
	return func(ctx *context.Context, in []*graph.Node) []*graph.Node {
		tokens, targets, mask, adv, oldLP, refLP, hyper := in[0], in[1], in[2], in[3], in[4], in[5], in[6]
		h := hiddenStates(ctx, c, tokens)
		lp := graph.LogSoftmax(graph.Mul(logitsOf(ctx, h), hyperAt(hyper, hInvTemp)), -1)
		logp, ent := tokenLogProbs(lp, targets)
		// Log-ratios are taken only at response tokens (padding gets 0, so
		// a very unlikely pad target at a low temperature cannot overflow
		// exp and reach the loss or its gradient as 0 * Inf), and clamped
		// to [-maxLogRatio, maxLogRatio] before exp, as verl does.
		valid := graph.GreaterThan(mask, graph.ZerosLike(mask))
		zeros := graph.ZerosLike(logp)
		logRatio := func(a, b *graph.Node) *graph.Node {
			d := graph.Where(valid, graph.Sub(a, b), zeros)
			return graph.ClipScalar(d, -maxLogRatio, maxLogRatio)
		}
		// ratio = pi / pi_old; per-token loss max(-A ratio, -A clip(ratio, 1-cl, 1+ch)).
		ratio := graph.Exp(logRatio(logp, oldLP))
		lo := graph.OneMinus(hyperAt(hyper, hClipLow))
		hi := graph.OnePlus(hyperAt(hyper, hClipHigh))
		clipped := graph.Min(graph.Max(ratio, lo), hi)
		loss1 := graph.Neg(graph.Mul(adv, ratio))
		loss2 := graph.Neg(graph.Mul(adv, clipped))
		pg := graph.Max(loss1, loss2)
		clipFrac := graph.ConvertDType(graph.GreaterThan(loss2, loss1), dtypes.Float32)
		// k3 estimator of KL(pi || pi_ref): exp(ref - logp) - (ref - logp) - 1.
		d := logRatio(refLP, logp)
		kl := graph.Sub(graph.Sub(graph.Exp(d), d), graph.ScalarOne(tokens.Graph(), dtypes.Float32))
		pgLoss := maskedMean(pg, mask)
		entMean := maskedMean(ent, mask)
		klMean := maskedMean(kl, mask)
		loss := graph.Sub(pgLoss, graph.Mul(hyperAt(hyper, hEntCoef), entMean))
		loss = graph.Add(loss, graph.Mul(hyperAt(hyper, hKLCoef), klMean))
		norm, applied := n.adamUpdate(ctx, loss, hyperAt(hyper, hLR), hyperAt(hyper, hMaxGradNorm))
		return []*graph.Node{loss, pgLoss, maskedMean(clipFrac, mask), entMean, klMean, norm, maskedMean(graph.Neg(logp), mask), applied}
	}
}

// buildCriticTrain: masked MSE over heads. Inputs: tokens int32 [B,T]; mask,
// returns [B,T]; headMask [B,T,K]; hyper. Loss = sum(m (V - R)^2) / sum(m)
// with m = mask * headMask, which equals DESIGN's
// 1/(zeta K |D|) sum_j sum_{(s,R) in D_j} (V_j(s) - R)^2.
func (n *net) buildCriticTrain() func(ctx *context.Context, in []*graph.Node) []*graph.Node {
	c := n.cfg
	return func(ctx *context.Context, in []*graph.Node) []*graph.Node {
		tokens, mask, returns, headMask, hyper := in[0], in[1], in[2], in[3], in[4]
		b, t := tokens.Shape().Dimensions[0], tokens.Shape().Dimensions[1]
		vals := valuesOf(ctx, hiddenStates(ctx, c, tokens)) // [B,T,K]
		m := graph.Mul(headMask, graph.Reshape(mask, b, t, 1))
		diff := graph.Sub(vals, graph.Reshape(returns, b, t, 1))
		loss := maskedMean(graph.Square(diff), m)
		norm, applied := n.adamUpdate(ctx, loss, hyperAt(hyper, hLR), hyperAt(hyper, hMaxGradNorm))
		return []*graph.Node{loss, norm, applied}
	}
}

func (n *net) exec(slot **context.Exec, fn func(ctx *context.Context, in []*graph.Node) []*graph.Node) (*context.Exec, error) {
	if *slot == nil {
		e, err := context.NewExec(n.backend, n.ctx, fn)
		if err != nil {
			return nil, err
		}
		*slot = e
	}
	return *slot, nil
}

func (n *net) prefillExec(tmax int) (*context.Exec, error) {
	if e, ok := n.prefill[tmax]; ok {
		return e, nil
	}
	e, err := context.NewExec(n.backend, n.ctx, n.buildPrefill(tmax))
	if err != nil {
		return nil, err
	}
	n.prefill[tmax] = e
	return e, nil
}

// run executes e and converts a GoMLX panic into an error.
func run(e *context.Exec, args ...any) (out []*tensors.Tensor, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("graph execution failed: %v", r)
		}
	}()
	return e.Exec(args...)
}

// buildSFT: supervised cross-entropy on the masked target tokens (the warm
// start). Inputs: tokens, targets int32 [B,T]; mask [B,T]; hyper. Outputs:
// loss (mean token NLL), grad norm.
func (n *net) buildSFT() func(ctx *context.Context, in []*graph.Node) []*graph.Node {
	c := n.cfg
	return func(ctx *context.Context, in []*graph.Node) []*graph.Node {
		tokens, targets, mask, hyper := in[0], in[1], in[2], in[3]
		lp := graph.LogSoftmax(logitsOf(ctx, hiddenStates(ctx, c, tokens)), -1)
		logp, _ := tokenLogProbs(lp, targets)
		loss := maskedMean(graph.Neg(logp), mask)
		norm, applied := n.adamUpdate(ctx, loss, hyperAt(hyper, hLR), hyperAt(hyper, hMaxGradNorm))
		return []*graph.Node{loss, norm, applied}
	}
}
