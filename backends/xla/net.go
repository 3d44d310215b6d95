package xla

import (
	"cmp"
	"fmt"
	"math"
	"strings"

	"github.com/cde-rl/cde/core"
	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
	"github.com/gomlx/gomlx/ml/model"

	"github.com/cde-rl/cde/backends/xla/peft"
	"github.com/cde-rl/cde/backends/xla/safetensors"
)

// net is one transformer (the policy or the critic) with its own variables,
// Adam state and compiled graphs. Graphs are built once per input-shape
// bucket (GoMLX caches compiled graphs per shape).
type net struct {
	cfg  ModelConfig
	arch modelArch
	// trainArch is arch for the training graphs: with cfg.Recompute its
	// blocks are checkpointed.
	trainArch modelArch
	backend   compute.Backend
	ctx       *model.Scope
	// adamStep counts optimiser updates (bias correction).
	adamStep int
	// view marks a net that shares another's variables (baseView): never
	// saved or restored on its own.
	view bool

	prefill map[int]*model.Exec // by total cache length
	decode  *model.Exec
	// devGen holds the device loop's prefill and decode graphs
	// (gendevice.go), by genSpec.key.
	devGen map[string]*model.Exec
	score  *model.Exec
	// embedScore is score that also returns the last-layer states
	// (RescoreWithEmbeddings).
	embedScore *model.Exec
	train      *model.Exec // the critic's update
	// actor holds the actor's update graphs, one per policy loss, with or
	// without the entropy term in the gradient (without it for updates
	// whose entropy coefficient is 0, the default: the term's backward
	// holds several [tokens, vocab] tensors, 1.2 GB each for 2048 tokens of
	// a 150k vocabulary, to add zeros), fused or one micro-batch of a
	// micro-batched update (train.micro_batch_size: the graph adds its
	// gradient to the /accum variables).
	actor map[actorKey]*model.Exec
	sft   *model.Exec
	// The critic's micro-batch graph, and the Adam step that applies the
	// accumulated sum (actor and critic).
	criticAccum, apply *model.Exec
}

// actorKey names one of a net's actor update graphs.
type actorKey struct {
	loss                string // train.policy_loss
	entGrad, accumulate bool
}

// actorExec is the actor update graph for key, built on first use.
func (n *net) actorExec(key actorKey) (*model.Exec, error) {
	if _, ok := graphLosses.Lookup(key.loss); !ok {
		return nil, fmt.Errorf("train.policy_loss %q: this backend has no graph for it (known: %s)", key.loss, strings.Join(graphLossNames(), ", "))
	}
	slot := n.actor[key]
	e, err := n.exec(&slot, n.buildActorTrain(key))
	if err != nil {
		return nil, err
	}
	n.actor[key] = e
	return e, nil
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
	hClipRatioC // dual clip c (0 = off)
	// Loss aggregation: one-hot weights of the four modes, and Lmax.
	hAggTokenMean
	hAggSeqMeanTokenMean
	hAggSeqMeanTokenSum
	hAggSeqMeanTokenSumNorm
	hMaxResponseTokens
	hSeqRatio // 1: GSPO's sequence ratio; 0: the token ratio
	// KL estimator: one-hot weights of k1, k2, k3.
	hKLk1
	hKLk2
	hKLk3
	// Micro-batching (train.micro_batch_size): the whole minibatch's
	// denominators, which one micro-batch cannot count (0: count them in
	// the graph, the minibatch is one pass), namely N and B of the
	// aggregation weights, and the critic's sum of mask x head mask; the
	// first-micro-batch flag (1: the accumulators restart); the summed loss
	// the Adam step checks for finiteness.
	hNTok
	hBRows
	hCriticDen
	hFirst
	hLoss
	// The policy loss's own keys (train.policy_loss_params): slot
	// hLossParams+i holds the value of its i-th key in sorted order
	// (core.PolicyLossKeys), as core.NewPolicyLoss resolved it; at most
	// maxLossParams keys.
	hLossParams
	hNum = hLossParams + maxLossParams
)

// maxLossParams is how many keys a policy loss may declare for its graph
// (hyper slots from hLossParams); registerGraphLoss refuses a loss with
// more.
const maxLossParams = 8

// accumScope holds the micro-batch gradient accumulators, one per trainable
// variable, created on the first micro-batched update: not model state, so
// checkpoints, weight copies and the optimiser leave them out.
const accumScope = "/accum"

// maxLogRatio bounds the log-ratios of the actor loss before exp
// (core.MaxLogRatio).
const maxLogRatio = core.MaxLogRatio

const (
	adamBeta1 = 0.9
	adamBeta2 = 0.999
	adamEps   = 1e-8
)

// newNet builds a model with weights drawn from seed, or, for a Hugging
// Face architecture with weights set, loaded from them (a critic, ValueK >
// 0, then gets a fresh value head: verl's practice). ad is a PEFT adapter:
// with cfg.LoRA the adapters start from it, without it is merged into the
// weights. share, when not nil, is a net of the same Hugging Face model
// whose frozen weights this LoRA net reads instead of its own copy.
func newNet(b compute.Backend, cfg ModelConfig, seed uint64, weights *safetensors.Set, ad *peft.Adapter, share *net) (*net, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx := model.NewStore().RootScope()
	if cfg.HF != nil {
		head := cfg.ValueK == 0
		merge := ad
		if cfg.LoRA != nil {
			merge = nil
		}
		if merge != nil {
			if err := checkAdapterModules(cfg, merge); err != nil {
				return nil, err
			}
		}
		switch {
		case share != nil && cfg.LoRA != nil:
			if err := shareHFParams(ctx, share, head); err != nil {
				return nil, err
			}
		case weights != nil:
			if err := loadHFParams(ctx, b, cfg.HF, weights, head, merge, cfg.BaseBF16); err != nil {
				return nil, err
			}
		default:
			if err := initHFParams(ctx, b, cfg.HF, seed, 0.02, head, cfg.BaseBF16); err != nil {
				return nil, err
			}
			if merge != nil {
				return nil, fmt.Errorf("adapter: no base weights to merge it into")
			}
		}
		if cfg.LoRA != nil {
			if err := initLoRA(ctx, cfg, seed, ad); err != nil {
				return nil, err
			}
		}
		if !head {
			initValueHead(ctx, cfg.HF.Hidden, cfg.ValueK, seed)
		}
	} else {
		initParams(ctx, cfg, seed)
	}
	n := &net{cfg: cfg, arch: archOf(cfg, false), trainArch: archOf(cfg, cfg.Recompute), backend: b, ctx: ctx, prefill: map[int]*model.Exec{}, actor: map[actorKey]*model.Exec{}}
	// Adam moments, created on the host so a checkpoint restores them
	// before any graph is built.
	for _, v := range n.trainable() {
		zeros := tensors.FromShape(v.Shape())
		ctx.Store().Scope("/adam/m"+v.Path()).VariableWithValue("m", zeros)
		ctx.Store().Scope("/adam/v"+v.Path()).VariableWithValue("v", tensors.FromShape(v.Shape()))
	}
	return n, nil
}

// trainable lists the model's own variables (everything but optimiser
// state and, with LoRA, the frozen base weights).
func (n *net) trainable() []*model.Variable {
	var out []*model.Variable
	for v := range n.ctx.IterVariables() {
		if !strings.HasPrefix(v.Scope(), "/adam") && !isAccum(v) && !n.frozen(v) {
			out = append(out, v)
		}
	}
	return out
}

func isAccum(v *model.Variable) bool { return strings.HasPrefix(v.Scope(), accumScope) }

// accumVar is the gradient accumulator of trainable variable v.
func (n *net) accumVar(v *model.Variable) *model.Variable {
	return n.ctx.Store().Scope(accumScope + v.Path()).Store().GetVariable(model.JoinPath(accumScope+v.Path(), "g"))
}

// ensureAccum creates the zeroed gradient accumulators (as much memory as
// the weights) the first time a micro-batched update needs them.
func (n *net) ensureAccum() {
	for _, v := range n.trainable() {
		if n.accumVar(v) == nil {
			n.ctx.Store().Scope(accumScope+v.Path()).VariableWithValue("g", tensors.FromShape(v.Shape()))
		}
	}
}

// sampleFromLogProbs picks argmax(lp + gumbel) for lp [B, V] and returns
// the token, its log-prob and the distribution's entropy -sum p log p.
func sampleFromLogProbs(lp, gumbel *graph.Node) (tok, tokLP, ent *graph.Node) {
	tok = graph.ArgMax(graph.Add(lp, gumbel), -1, dtypes.Int32)
	tokLP = pickLast(lp, tok)
	ent = graph.Neg(graph.ReduceSum(graph.Mul(graph.Exp(lp), lp), -1))
	return
}

// pickLast returns x[..., idx[...]] for x [..., V] and idx int32 [...]: a
// gather of (row, idx) pairs from x viewed as [rows, V]. It gives the same
// values, and gradients, as contracting x with a one-hot of idx, without
// the [..., V]-sized one-hot and product (at a 150k vocabulary, 1.2 GB
// each for 2048 tokens).
func pickLast(x, idx *graph.Node) *graph.Node {
	d := x.Shape().Dimensions
	lead := d[:len(d)-1]
	rows := 1
	for _, n := range lead {
		rows *= n
	}
	g := x.Graph()
	pairs := graph.Concatenate([]*graph.Node{
		graph.Iota(g, shapesOf(dtypes.Int32, rows, 1), 0),
		graph.Reshape(idx, rows, 1),
	}, 1)
	return graph.Reshape(graph.Gather(graph.Reshape(x, rows, d[len(d)-1]), pairs), lead...)
}

// buildPrefill returns the graph for a prompt batch: inputs tokens int32
// [B,P], last int32 [B] (index of each prompt's last token), gumbel [B,V],
// invTemp scalar; outputs token, logp, entropy, hidden [B,d], then per layer
// the K and V caches [B,H,Tmax,dh] (positions >= P are zero).
func (n *net) buildPrefill(tmax int) func(ctx *model.Scope, in []*graph.Node) []*graph.Node {
	return func(ctx *model.Scope, in []*graph.Node) []*graph.Node {
		tokens, last, gumbel, invTemp := in[0], in[1], in[2], in[3]
		g := tokens.Graph()
		b, p := tokens.Shape().Dimensions[0], tokens.Shape().Dimensions[1]
		dh := n.arch.headDim()
		pos := graph.BroadcastToDims(graph.Iota(g, shapesOf(dtypes.Int32, 1, p), 1), b, p)
		bias := causalBias(g, p)
		var caches []*graph.Node
		pad := graph.Zeros(g, shapesOf(dtypes.Float32, b, n.arch.cacheHeads(), tmax-p, dh))
		keep := func(k, v *graph.Node) (*graph.Node, *graph.Node) {
			caches = append(caches, graph.Concatenate([]*graph.Node{k, pad}, 2), graph.Concatenate([]*graph.Node{v, pad}, 2))
			return k, v
		}
		h := n.arch.states(ctx, tokens, pos, bias, keep)
		pick := graph.OneHot(last, p, dtypes.Float32)                              // [B,P]
		hLast := graph.DotGeneral(pick, []int{1}, []int{0}, h, []int{1}, []int{0}) // [B,d]
		lp := graph.LogSoftmax(graph.Mul(n.arch.logits(ctx, hLast), invTemp), -1)
		tok, tokLP, ent := sampleFromLogProbs(lp, gumbel)
		return append([]*graph.Node{tok, tokLP, ent, hLast}, caches...)
	}
}

// buildDecode returns the one-token step with a KV cache: inputs token int32
// [B], pos int32 [B] (the token's position), gumbel [B,V], invTemp, then the
// 2L caches; outputs as buildPrefill, with the token's K, V written at pos.
func (n *net) buildDecode() func(ctx *model.Scope, in []*graph.Node) []*graph.Node {
	c := n.cfg
	return func(ctx *model.Scope, in []*graph.Node) []*graph.Node {
		token, pos, gumbel, invTemp := in[0], in[1], in[2], in[3]
		cachesIn := in[4:]
		g := token.Graph()
		b := token.Shape().Dimensions[0]
		tmax := cachesIn[0].Shape().Dimensions[2]
		full := []int{b, n.arch.cacheHeads(), tmax, n.arch.headDim()}
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
		h := n.arch.states(ctx, graph.Reshape(token, b, 1), graph.Reshape(pos, b, 1), bias, func(k, v *graph.Node) (*graph.Node, *graph.Node) {
			kc, vc := update(k, v)
			l++
			return kc, vc
		})
		h = graph.Reshape(h, b, c.DModel)
		lp := graph.LogSoftmax(graph.Mul(n.arch.logits(ctx, h), invTemp), -1)
		tok, tokLP, ent := sampleFromLogProbs(lp, gumbel)
		return append([]*graph.Node{tok, tokLP, ent, h}, caches...)
	}
}

// buildScore: inputs tokens int32 [B,T], targets int32 [B,T], invTemp;
// outputs for the policy the log-prob of targets[t] at each position and the
// entropy [B,T]; for the critic the values [B,T,K].
func (n *net) buildScore() func(ctx *model.Scope, in []*graph.Node) []*graph.Node {
	c := n.cfg
	return func(ctx *model.Scope, in []*graph.Node) []*graph.Node {
		h := fullStates(ctx, n.arch, in[0])
		if c.ValueK > 0 {
			return []*graph.Node{valuesOf(ctx, h)}
		}
		tlp, ent := scoreHead(ctx, n.arch, h, in[1], in[2])
		return []*graph.Node{tlp, ent}
	}
}

// scoreChunkBytes bounds the logits a scoring graph holds at once: the
// positions are taken in chunks whose [B, chunk, V] float32 logits are at
// most this large (a whole batch of Qwen3's 151,936-token vocabulary is
// 1.2 GB per 1,024 positions, and log-softmax, its exponential and their
// product each as much again).
var scoreChunkBytes = 256 << 20

// scoreHead is the log-prob of targets [B, T] and the entropy at each
// position of h [B, T, d] at inverse temperature invTemp, for graphs that
// take no gradient: the logits, their log-softmax and the entropy's terms
// are made for a chunk of positions at a time (scoreChunkBytes), the
// chunks' [B, chunk] results concatenated, so the engine frees each
// chunk's [B, chunk, V] tensors before the next one's.
func scoreHead(ctx *model.Scope, arch modelArch, h, targets, invTemp *graph.Node) (tlp, ent *graph.Node) {
	d := h.Shape().Dimensions
	b, t := d[0], d[1]
	per := b * arch.vocab() * 4 // bytes of one position's logits
	chunk := max(1, min(t, scoreChunkBytes/max(per, 1)))
	if chunk >= t {
		lp := graph.LogSoftmax(graph.Mul(arch.logits(ctx, h), invTemp), -1)
		return tokenLogProbs(lp, targets)
	}
	var tlps, ents []*graph.Node
	for lo := 0; lo < t; lo += chunk {
		hi := min(lo+chunk, t)
		hc := graph.Slice(h, graph.AxisRange(), graph.AxisRange(lo, hi), graph.AxisRange())
		lp := graph.LogSoftmax(graph.Mul(arch.logits(ctx, hc), invTemp), -1)
		a, e := tokenLogProbs(lp, graph.Slice(targets, graph.AxisRange(), graph.AxisRange(lo, hi)))
		tlps, ents = append(tlps, a), append(ents, e)
	}
	return graph.Concatenate(tlps, 1), graph.Concatenate(ents, 1)
}

// TrainChunkBytes bounds the logits a training graph holds at once with
// model.recompute (see trainHead): 64 MiB.
var TrainChunkBytes = 64 << 20

// trainHead is scoreHead for training graphs. Without model.recompute it
// is the whole batch's head at once. With it, the positions are taken in
// chunks of at most TrainChunkBytes of logits, each chunk's head under
// gradient checkpointing: the forward pass keeps only the chunks' [B,
// chunk] results, and the backward pass recomputes one chunk's logits and
// softmax at a time, so the [B, T, V] logits, their softmax and their
// gradient never exist for the whole batch (at the cost of a second
// product with the output embedding).
func (n *net) trainHead(ctx *model.Scope, h, targets, invTemp *graph.Node) (tlp, ent *graph.Node) {
	d := h.Shape().Dimensions
	b, t := d[0], d[1]
	chunk := evenChunk(t, TrainChunkBytes/max(b*n.arch.vocab()*4, 1))
	if !n.cfg.Recompute || chunk >= t {
		lp := graph.LogSoftmax(graph.Mul(n.arch.logits(ctx, h), invTemp), -1)
		return tokenLogProbs(lp, targets)
	}
	var tlps, ents []*graph.Node
	for lo := 0; lo < t; lo += chunk {
		hi := min(lo+chunk, t)
		hc := graph.Slice(h, graph.AxisRange(), graph.AxisRange(lo, hi), graph.AxisRange()).Checkpoint()
		lp := graph.LogSoftmax(graph.Mul(n.arch.logits(ctx, hc), invTemp), -1)
		a, e := tokenLogProbs(lp, graph.Slice(targets, graph.AxisRange(), graph.AxisRange(lo, hi)))
		tlps, ents = append(tlps, a.StopCheckpoint()), append(ents, e.StopCheckpoint())
	}
	return graph.Concatenate(tlps, 1), graph.Concatenate(ents, 1)
}

// evenChunk is a chunk length of at most most positions (at least 1) for
// t positions: the largest divisor of t not under most/2 when there is
// one, so that every chunk's buffers have one size and the engine's pool
// reuses them (a tail chunk of another size would hold buffers of its own
// size), else most.
func evenChunk(t, most int) int {
	most = max(1, min(t, most))
	for c := most; c >= max(1, most/2); c-- {
		if t%c == 0 {
			return c
		}
	}
	return most
}

// tokenLogProbs picks lp[..., target] and the entropy at each position.
func tokenLogProbs(lp, targets *graph.Node) (tlp, ent *graph.Node) {
	tlp = pickLast(lp, targets)
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
func (n *net) adamUpdate(ctx *model.Scope, loss, lr, maxNorm *graph.Node) (norm, applied *graph.Node) {
	vars, nodes := n.trainableNodes(loss.Graph())
	return n.adamApply(ctx, vars, nodes, graph.Gradient(loss, nodes...), loss, lr, maxNorm)
}

// trainableNodes is the trainable variables and their values in g.
func (n *net) trainableNodes(g *graph.Graph) ([]*model.Variable, []*graph.Node) {
	vars := n.trainable()
	nodes := make([]*graph.Node, len(vars))
	for i, v := range vars {
		nodes[i] = v.NodeValue(g)
	}
	return vars, nodes
}

// accumulateGrads adds the gradient of loss to the accumulators, or, when
// first (a scalar bool) holds, sets them to it: one micro-batch of a
// micro-batched update. The losses of the micro-batches use the whole
// minibatch's denominators, so their gradients sum to the minibatch's.
func (n *net) accumulateGrads(loss, first *graph.Node) {
	vars, nodes := n.trainableNodes(loss.Graph())
	grads := graph.Gradient(loss, nodes...)
	for i, v := range vars {
		acc := n.accumVar(v)
		old := acc.NodeValue(loss.Graph())
		cond := graph.BroadcastToDims(first, old.Shape().Dimensions...)
		acc.SetNodeValue(graph.Where(cond, grads[i], graph.Add(old, grads[i])))
	}
}

// buildApply: the Adam step of adamUpdate on the accumulated gradient of
// a micro-batched update. Input: hyper (hLR, hMaxGradNorm, and hLoss, the
// summed loss, checked for finiteness). Outputs: grad norm, applied flag.
func (n *net) buildApply() func(ctx *model.Scope, in []*graph.Node) []*graph.Node {
	return func(ctx *model.Scope, in []*graph.Node) []*graph.Node {
		hyper := in[0]
		vars, nodes := n.trainableNodes(hyper.Graph())
		grads := make([]*graph.Node, len(vars))
		for i, v := range vars {
			grads[i] = n.accumVar(v).NodeValue(hyper.Graph())
		}
		norm, applied := n.adamApply(ctx, vars, nodes, grads, hyperAt(hyper, hLoss), hyperAt(hyper, hLR), hyperAt(hyper, hMaxGradNorm))
		return []*graph.Node{norm, applied}
	}
}

// adamApply is adamUpdate given the gradients grads of loss with respect
// to the values nodes of vars.
func (n *net) adamApply(ctx *model.Scope, vars []*model.Variable, nodes, grads []*graph.Node, loss, lr, maxNorm *graph.Node) (norm, applied *graph.Node) {
	g := loss.Graph()
	sq := graph.ScalarZero(g, dtypes.Float32)
	for _, gr := range grads {
		sq = graph.Add(sq, graph.ReduceAllSum(graph.Square(gr)))
	}
	norm = graph.Sqrt(sq)
	// scale = min(1, maxNorm / (norm + 1e-6))
	scale := graph.Min(graph.ScalarOne(g, dtypes.Float32), graph.Div(maxNorm, graph.AddScalar(norm, 1e-6)))
	type update struct {
		v         *model.Variable
		old, next *graph.Node
	}
	var ups []update
	// poison is 0 when every value it has seen is finite and NaN otherwise
	// (x*0 is NaN exactly for infinite or NaN x, per IEEE 754).
	poison := graph.Add(graph.MulScalar(loss, 0), graph.MulScalar(norm, 0))
	for i, v := range vars {
		gr := graph.Mul(grads[i], scale)
		mv := ctx.Store().Scope("/adam/m" + v.Path()).Store().GetVariable(model.JoinPath("/adam/m"+v.Path(), "m"))
		vv := ctx.Store().Scope("/adam/v" + v.Path()).Store().GetVariable(model.JoinPath("/adam/v"+v.Path(), "v"))
		mOld, vOld := mv.NodeValue(g), vv.NodeValue(g)
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
		u.v.SetNodeValue(graph.Where(cond, u.next, u.old))
	}
	return norm, graph.ConvertDType(ok, dtypes.Float32)
}

// biasCorrectedLR advances the Adam step count and returns the step size.
func (n *net) biasCorrectedLR(lr float64) float64 {
	n.adamStep++
	t := float64(n.adamStep)
	return lr * math.Sqrt(1-math.Pow(adamBeta2, t)) / (1 - math.Pow(adamBeta1, t))
}

// buildActorTrain: the actor loss of actorLoss, then one Adam step. Inputs:
// tokens, targets int32 [B,T]; mask, adv, oldLP, refLP, pgW, absKL [B,T];
// hyper [hNum].
// Outputs: loss, pg_loss, clipfrac, entropy, kl, grad_norm, ppl-term (mean
// -logp), applied flag.
//
// With entGrad false the entropy is a constant of the gradient
// (StopGradient): the update is the same when the entropy coefficient is 0,
// the loss and metrics too.
//
// With accumulate, the graph is one micro-batch of a micro-batched update:
// it adds its gradient to the accumulators (accumulateGrads; hyper hFirst
// restarts them) instead of stepping, and outputs loss, pg_loss, clipfrac,
// entropy, kl and the ppl-term, each this micro-batch's share (the whole
// minibatch's denominators come in hyper), so the shares sum to the
// minibatch's values.
func (n *net) buildActorTrain(key actorKey) func(ctx *model.Scope, in []*graph.Node) []*graph.Node {
	entGrad, accumulate := key.entGrad, key.accumulate
	return func(ctx *model.Scope, in []*graph.Node) []*graph.Node {
		tokens, targets, mask, adv, oldLP, refLP, pgW, absKL, hyper := in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7], in[8]
		h := fullStates(ctx, n.trainArch, tokens)
		logp, ent := n.trainHead(ctx, h, targets, hyperAt(hyper, hInvTemp))
		if !entGrad {
			ent = graph.StopGradient(ent)
		}
		a := actorLoss(logp, ent, mask, adv, oldLP, refLP, pgW, absKL, hyper, key.loss)
		nll := graph.Div(graph.ReduceAllSum(graph.Mul(graph.Neg(logp), mask)), a.nTok)
		if accumulate {
			n.accumulateGrads(a.loss, graph.GreaterThan(hyperAt(hyper, hFirst), graph.ScalarZero(hyper.Graph(), dtypes.Float32)))
			return []*graph.Node{a.loss, a.pg, a.clipFrac, a.ent, a.kl, nll}
		}
		norm, applied := n.adamUpdate(ctx, a.loss, hyperAt(hyper, hLR), hyperAt(hyper, hMaxGradNorm))
		return []*graph.Node{a.loss, a.pg, a.clipFrac, a.ent, a.kl, norm, nll, applied}
	}
}

// actorTerms are the scalars of the actor loss.
type actorTerms struct {
	loss, pg, clipFrac, ent, kl *graph.Node
	nTok                        *graph.Node // N, the minibatch's valid tokens (at least 1)
}

// orCounted is the whole minibatch's count in hyper slot i when the host
// set it (a micro-batched update), else the count made in the graph.
func orCounted(hyper *graph.Node, i int, counted *graph.Node) *graph.Node {
	h := hyperAt(hyper, i)
	return graph.Where(graph.GreaterThan(h, graph.ZerosLike(h)), h, counted)
}

// actorLoss is the actor loss over [B,T] per-token inputs (logp the current
// policy's log-probs, ent its entropies; mask 1 at response tokens; pgW and
// absKL the strategies' per-token weights, core.TokenLoss: 1 and 0 where
// no strategy set them), the graph form of core.PolicyLoss (whose doc
// gives the formulas; a test holds the two equal, loss and gradient with
// respect to logp) with the registered policy loss named loss (graphLosses):
//
//	loss = agg(pgW * pg + absKL * |logp - oldLP|) - entropy_coef * agg(entropy) + kl_coef * agg(k)
//
// for a token loss (a sequence loss gives its scalar in place of the first
// term; token weights do not apply to it). agg sums w_i * x over valid
// tokens with the weights of the aggregation mode (one-hot in hyper), pg
// the loss's per-token term at the token or GSPO sequence ratio, k the KL
// estimator chosen in hyper. pg_clipfrac is a token mean in every mode.
func actorLoss(logp, ent, mask, adv, oldLP, refLP, pgW, absKL, hyper *graph.Node, loss string) actorTerms {
	g := logp.Graph()
	b, t := logp.Shape().Dimensions[0], logp.Shape().Dimensions[1]
	one := graph.ScalarOne(g, dtypes.Float32)
	// Aggregation weights w_i (core.AggTokenMean documents them), at valid
	// tokens only: T_i tokens of row i, B rows with a token, N tokens.
	lens := graph.ReduceSum(mask, 1) // [B]
	rows := graph.ReduceAllSum(graph.ConvertDType(graph.GreaterThan(lens, graph.ZerosLike(lens)), dtypes.Float32))
	bRows := orCounted(hyper, hBRows, graph.Max(rows, one))
	nTok := orCounted(hyper, hNTok, graph.Max(graph.ReduceAllSum(lens), one))
	lensSafe := graph.Max(lens, graph.OnesLike(lens))
	w := graph.Add(
		graph.Add(graph.Div(hyperAt(hyper, hAggTokenMean), nTok),
			graph.Div(hyperAt(hyper, hAggSeqMeanTokenMean), graph.Mul(bRows, lensSafe))),
		graph.Add(graph.Div(hyperAt(hyper, hAggSeqMeanTokenSum), bRows),
			graph.Div(hyperAt(hyper, hAggSeqMeanTokenSumNorm), graph.Mul(bRows, hyperAt(hyper, hMaxResponseTokens)))))
	weights := graph.Mul(graph.BroadcastToDims(graph.Reshape(w, b, 1), b, t), mask)
	agg := func(x *graph.Node) *graph.Node { return graph.ReduceAllSum(graph.Mul(x, weights)) }

	// Log-ratios are taken only at response tokens (padding gets 0, so a
	// very unlikely pad target at a low temperature cannot overflow exp and
	// reach the loss or its gradient as 0 * Inf), and clamped to
	// [-maxLogRatio, maxLogRatio] before exp, as verl does.
	valid := graph.GreaterThan(mask, graph.ZerosLike(mask))
	zeros := graph.ZerosLike(logp)
	clamp := func(x *graph.Node) *graph.Node { return graph.ClipScalar(x, -maxLogRatio, maxLogRatio) }
	diff := graph.Where(valid, graph.Sub(logp, oldLP), zeros)
	tokLogRatio := clamp(diff)
	// GSPO-token: the value is the sequence's mean log-ratio, the gradient
	// flows through each token's own log-prob (sg = StopGradient).
	seqMean := graph.Div(graph.ReduceSum(diff, 1), lensSafe) // [B]
	own := graph.Where(valid, graph.Sub(logp, graph.StopGradient(logp)), zeros)
	seqLogRatio := clamp(graph.Where(valid,
		graph.Add(graph.BroadcastToDims(graph.Reshape(graph.StopGradient(seqMean), b, 1), b, t), own), zeros))
	seqFlag := hyperAt(hyper, hSeqRatio)
	logRatio := graph.Add(graph.Mul(seqFlag, seqLogRatio), graph.Mul(graph.OneMinus(seqFlag), tokLogRatio))

	in := lossIn{logp: logp, adv: adv, mask: mask, valid: valid, zeros: zeros, logRatio: logRatio, tokLogRatio: tokLogRatio,
		clipLow: hyperAt(hyper, hClipLow), clipHigh: hyperAt(hyper, hClipHigh), clipRatioC: hyperAt(hyper, hClipRatioC),
		lens: lens, lensSafe: lensSafe, bRows: bRows, loss: loss, params: map[string]*graph.Node{}}
	keys, _ := core.PolicyLossKeys(loss)
	for i, k := range keys {
		in.params[k] = hyperAt(hyper, hLossParams+i)
	}
	gl, _ := graphLosses.Lookup(loss)
	var pgLoss, clipped *graph.Node
	if gl.token != nil {
		pg, c := gl.token(in)
		// Token weights (core.TokenLoss): PGWeight on the loss's term,
		// KL-Cov's |log-ratio| (unclamped; d|x|/dx = sign(x), 0 at 0) with
		// AbsKLCoef.
		pgLoss, clipped = agg(graph.Add(graph.Mul(pgW, pg), graph.Mul(absKL, graph.Abs(diff)))), c
	} else {
		pgLoss, clipped = gl.sequence(in)
	}

	// KL(pi || pi_ref) estimators at log r = ref - logp (core.KLEstimators).
	d := clamp(graph.Where(valid, graph.Sub(refLP, logp), zeros))
	k1 := graph.Neg(d)
	k2 := graph.MulScalar(graph.Square(d), 0.5)
	k3 := graph.Sub(graph.Sub(graph.Exp(d), d), one)
	kl := graph.Add(graph.Add(graph.Mul(hyperAt(hyper, hKLk1), k1), graph.Mul(hyperAt(hyper, hKLk2), k2)),
		graph.Mul(hyperAt(hyper, hKLk3), k3))

	a := actorTerms{pg: pgLoss, clipFrac: graph.Div(graph.ReduceAllSum(graph.Mul(clipped, mask)), nTok), ent: agg(ent), kl: agg(kl), nTok: nTok}
	a.loss = graph.Sub(a.pg, graph.Mul(hyperAt(hyper, hEntCoef), a.ent))
	a.loss = graph.Add(a.loss, graph.Mul(hyperAt(hyper, hKLCoef), a.kl))
	return a
}

// lossIn is what a policy loss's graph sees: [B,T] inputs (logp, adv,
// mask, valid as a bool mask, zeros), the clamped log-ratio at the
// configured level (token or GSPO's sequence ratio, with the gradient
// flowing through logp) and the clamped token log-ratio (both 0 at
// padding), the clip settings (scalars), and per row the valid tokens
// (lens [B], lensSafe at least 1) and the rows with a token (bRows), and
// the loss's own keys (param).
type lossIn struct {
	logp, adv, mask, valid, zeros *graph.Node
	logRatio, tokLogRatio         *graph.Node
	clipLow, clipHigh, clipRatioC *graph.Node
	lens, lensSafe, bRows         *graph.Node
	loss                          string
	params                        map[string]*graph.Node // by key, scalars from hyper
}

// param is the value of the loss's key k (train.policy_loss_params), a
// scalar: the number core.NewPolicyLoss resolved for the run, the one its
// reference has bound (core.PolicyLossDef.Values), fed through hyper. It
// panics on a key the loss's RegisterPolicyLoss call does not declare.
func (in lossIn) param(k string) *graph.Node {
	n, ok := in.params[k]
	if !ok {
		panic(fmt.Sprintf("xla: the graph of policy loss %s reads key %q, which core.RegisterPolicyLoss does not declare for it", in.loss, k))
	}
	return n
}

// graphLoss is the graph form of a registered policy loss
// (core.PolicyLossDef), registered under the same name with
// registerGraphLoss; policyloss_test.go holds each equal to its reference.
// A token loss gives the per-token term and the clipped flags, both
// [B,T] (actorLoss weights and aggregates them); a sequence loss gives the
// loss itself (a scalar) and the clipped flags.
type graphLoss struct {
	token    func(in lossIn) (pg, clipped *graph.Node)
	sequence func(in lossIn) (loss, clipped *graph.Node)
}

var graphLosses = core.NewRegistry("xla: policy loss graph", func(_ string, g graphLoss) string {
	if (g.token == nil) == (g.sequence == nil) {
		return "want exactly one of token and sequence"
	}
	return ""
})

// registerGraphLoss registers the graph of the policy loss name; it panics
// (besides the registry's reasons) on a loss whose reference declares more
// keys than maxLossParams. core's losses are registered by then: this
// package imports core, so core's init functions run first.
func registerGraphLoss(name string, g graphLoss) {
	if keys, _ := core.PolicyLossKeys(name); len(keys) > maxLossParams {
		panic(fmt.Sprintf("xla: policy loss %s declares %d keys; its graph has room for %d (maxLossParams)", name, len(keys), maxLossParams))
	}
	graphLosses.Register(name, g)
}

func graphLossNames() []string { return graphLosses.Names() }

// actorHyper fills the actor-loss slots of a hyper vector from u.
func actorHyper(hyper []float32, u core.ActorUpdate) error {
	hyper[hInvTemp] = float32(1 / u.Temperature)
	hyper[hClipLow] = float32(u.ClipLow)
	hyper[hClipHigh] = float32(u.ClipHigh)
	hyper[hEntCoef] = float32(u.EntropyCoef)
	hyper[hKLCoef] = float32(u.KLCoef)
	if u.ClipRatioC != 0 && u.ClipRatioC <= 1 {
		return fmt.Errorf("config: train.clip_ratio_c = %v: must be 0 (off) or > 1", u.ClipRatioC)
	}
	hyper[hClipRatioC] = float32(u.ClipRatioC)
	switch u.LossAggMode {
	case "", core.AggTokenMean:
		hyper[hAggTokenMean] = 1
	case core.AggSeqMeanTokenMean:
		hyper[hAggSeqMeanTokenMean] = 1
	case core.AggSeqMeanTokenSum:
		hyper[hAggSeqMeanTokenSum] = 1
	case core.AggSeqMeanTokenSumNorm:
		if u.MaxResponseTokens < 1 {
			return fmt.Errorf("train.loss_agg_mode %s needs rollout.max_response_tokens >= 1", u.LossAggMode)
		}
		hyper[hAggSeqMeanTokenSumNorm] = 1
	default:
		return fmt.Errorf("config: train.loss_agg_mode: unknown value %q (known: %s)", u.LossAggMode, strings.Join(core.LossAggModes, ", "))
	}
	hyper[hMaxResponseTokens] = float32(max(u.MaxResponseTokens, 1))
	switch u.RatioLevel {
	case "", core.RatioToken:
	case core.RatioSequence:
		hyper[hSeqRatio] = 1
	default:
		return fmt.Errorf("config: train.ratio_level: unknown value %q (known: token, sequence)", u.RatioLevel)
	}
	if err := core.CheckPolicyLoss(u.PolicyLoss, u.RatioLevel, u.ClipRatioC); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	// The loss's own keys, resolved as the reference resolves them.
	loss := cmp.Or(u.PolicyLoss, core.LossPPO)
	def, err := core.NewPolicyLoss(loss, core.NewParams(core.PolicyLossParamsKey, u.PolicyLossParams))
	if err != nil {
		return err
	}
	keys, _ := core.PolicyLossKeys(loss)
	if len(keys) > maxLossParams {
		return fmt.Errorf("train.policy_loss %s: %d keys, more than this backend's %d", loss, len(keys), maxLossParams)
	}
	for i, k := range keys {
		hyper[hLossParams+i] = float32(def.Values[k])
	}
	switch u.KLEstimator {
	case "k1":
		hyper[hKLk1] = 1
	case "k2":
		hyper[hKLk2] = 1
	case "", "k3":
		hyper[hKLk3] = 1
	default:
		return fmt.Errorf("config: train.kl_estimator: unknown value %q (known: k1, k2, k3)", u.KLEstimator)
	}
	return nil
}

// buildCriticTrain: masked MSE over heads. Inputs: tokens int32 [B,T]; mask,
// returns [B,T]; headMask [B,T,K]; hyper. Loss = sum(m (V - R)^2) / sum(m)
// with m = mask * headMask, which equals the multi-head critic's loss
// (docs/algorithms.md, "The exploration bonuses")
// 1/(zeta K |D|) sum_j sum_{(s,R) in D_j} (V_j(s) - R)^2.
//
// With accumulate, one micro-batch of a micro-batched update (as in
// buildActorTrain): the denominator sum(m) of the whole minibatch comes in
// hyper hCriticDen, the gradient goes to the accumulators, and the output is
// the loss share alone.
func (n *net) buildCriticTrain(accumulate bool) func(ctx *model.Scope, in []*graph.Node) []*graph.Node {
	return func(ctx *model.Scope, in []*graph.Node) []*graph.Node {
		tokens, mask, returns, headMask, hyper := in[0], in[1], in[2], in[3], in[4]
		b, t := tokens.Shape().Dimensions[0], tokens.Shape().Dimensions[1]
		vals := valuesOf(ctx, fullStates(ctx, n.trainArch, tokens)) // [B,T,K]
		m := graph.Mul(headMask, graph.Reshape(mask, b, t, 1))
		diff := graph.Sub(vals, graph.Reshape(returns, b, t, 1))
		den := orCounted(hyper, hCriticDen, graph.Max(graph.ReduceAllSum(m), graph.ScalarOne(hyper.Graph(), dtypes.Float32)))
		loss := graph.Div(graph.ReduceAllSum(graph.Mul(graph.Square(diff), m)), den)
		if accumulate {
			n.accumulateGrads(loss, graph.GreaterThan(hyperAt(hyper, hFirst), graph.ScalarZero(hyper.Graph(), dtypes.Float32)))
			return []*graph.Node{loss}
		}
		norm, applied := n.adamUpdate(ctx, loss, hyperAt(hyper, hLR), hyperAt(hyper, hMaxGradNorm))
		return []*graph.Node{loss, norm, applied}
	}
}

// execCacheShapes is how many input shapes one Exec compiles and keeps
// (GoMLX's default, 32, errors past it): dynamic sampling
// (train.dynamic_sampling) makes batch sizes vary from step to step.
const execCacheShapes = 256

func (n *net) exec(slot **model.Exec, fn func(ctx *model.Scope, in []*graph.Node) []*graph.Node) (*model.Exec, error) {
	if *slot == nil {
		e, err := model.NewExec(n.backend, n.ctx.Store(), fn)
		if err != nil {
			return nil, err
		}
		e.SetMaxCache(execCacheShapes)
		*slot = e
	}
	return *slot, nil
}

func (n *net) prefillExec(tmax int) (*model.Exec, error) {
	if e, ok := n.prefill[tmax]; ok {
		return e, nil
	}
	e, err := model.NewExec(n.backend, n.ctx.Store(), n.buildPrefill(tmax))
	if err != nil {
		return nil, err
	}
	n.prefill[tmax] = e
	return e, nil
}

// run executes e and converts a GoMLX panic into an error.
func run(e *model.Exec, args ...any) (out []*tensors.Tensor, err error) {
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
func (n *net) buildSFT() func(ctx *model.Scope, in []*graph.Node) []*graph.Node {
	return func(ctx *model.Scope, in []*graph.Node) []*graph.Node {
		tokens, targets, mask, hyper := in[0], in[1], in[2], in[3]
		logp, _ := n.trainHead(ctx, fullStates(ctx, n.trainArch, tokens), targets, graph.ScalarOne(tokens.Graph(), dtypes.Float32))
		loss := maskedMean(graph.Neg(logp), mask)
		norm, applied := n.adamUpdate(ctx, loss, hyperAt(hyper, hLR), hyperAt(hyper, hMaxGradNorm))
		return []*graph.Node{loss, norm, applied}
	}
}
