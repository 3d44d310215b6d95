// Package xla is cde's model backend on GoMLX: a causal transformer policy
// with KV-cache sampling, an optional K-head critic of the same design with
// its own parameters, their PPO / MSE updates with Adam, and checkpoints.
//
// Every graph (prefill, decode step, scoring, actor update, critic update) is
// one GoMLX computation, compiled once per input-shape bucket: batch sizes
// are fixed per call site and sequence lengths are padded to multiples of 8.
package xla

import (
	"bytes"
	"encoding/gob"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/cde-rl/cde/backends/xla/safetensors"
	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/internal/gumbellog"
	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// Options configures a Backend.
type Options struct {
	Engine string // auto | cpu | go | xla:cpu | xla:cuda | xla:tpu
	// PJRTPlugin is backend.pjrt_plugin: the PJRT plugin library of the
	// xla:* engines ("" = PJRT_PLUGIN_LIBRARY_PATH, then standard places).
	PJRTPlugin string
	Policy     ModelConfig
	// ValueHeads K > 0 builds a critic (same sizes as the policy, own
	// parameters); 0 builds none.
	ValueHeads  int
	Seed        uint64
	ActorLR     float64
	CriticLR    float64
	MaxGradNorm float64 // global gradient-norm clip (default 1)
	PAD, EOS    int32
	// HFWeights, with a Hugging Face Policy (Policy.HF set), are the
	// checkpoint's weights: the policy starts from them, and so does the
	// critic's trunk (with a fresh value head). Nil draws random weights.
	HFWeights *safetensors.Set
}

// Backend implements core.Backend.
type Backend struct {
	opts       Options
	engine     backends.Backend
	engineName string
	policy     *net
	critic     *net
	// ref is a frozen copy of the initial policy, built on first use of
	// kl_coef > 0.
	ref *net
}

var (
	_ core.Backend         = (*Backend)(nil)
	_ core.ReferenceScorer = (*Backend)(nil)
)

// New builds the policy (and critic) with weights drawn from opts.Seed.
func New(opts Options) (*Backend, error) {
	if opts.MaxGradNorm == 0 {
		opts.MaxGradNorm = 1
	}
	eng, err := NewEngine(opts.Engine, opts.PJRTPlugin)
	if err != nil {
		return nil, err
	}
	b := &Backend{opts: opts, engine: eng, engineName: eng.Name()}
	if b.policy, err = newNet(eng, opts.Policy, opts.Seed, opts.HFWeights); err != nil {
		return nil, err
	}
	if opts.ValueHeads > 0 {
		cc := opts.Policy
		cc.ValueK = opts.ValueHeads
		if b.critic, err = newNet(eng, cc, opts.Seed+1, opts.HFWeights); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// Engine names the GoMLX engine in use.
func (b *Backend) Engine() string { return b.engineName + " (" + b.engine.Description() + ")" }

// Close releases the engine.
func (b *Backend) Close() error {
	b.engine.Finalize()
	return nil
}

func roundUp(n, m int) int { return (n + m - 1) / m * m }

// gumbelNoise draws Gumbel(0, 1) noise, -log(-log(u)) with u uniform in
// (0, 1), from rng: the uniforms in order (the stream, and so the sampled
// tokens, stay what they were), the two logarithms 8 at a time with
// math.Log's own operations (internal/gumbellog: the same bits, 9x faster
// on AVX-512) and on every core for large vocabularies. The float64 buffer
// is kept between calls: at batch 32 and a 150k vocabulary a fresh one per
// decode step is 39 MB of new pages.
type gumbelNoise struct {
	rng *rand.Rand
	u   []float64
}

func gumbel(rng *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	(&gumbelNoise{rng: rng}).fill(out)
	return out
}

// fill writes len(out) values.
func (g *gumbelNoise) fill(out []float32) {
	n := len(out)
	if cap(g.u) < n {
		g.u = make([]float64, n)
	}
	u := g.u[:n]
	for i := range u {
		u[i] = g.rng.Float64()
		for u[i] == 0 {
			u[i] = g.rng.Float64()
		}
	}
	transform := func(lo, hi int) { gumbellog.Transform(out[lo:hi], u[lo:hi]) }
	workers := runtime.GOMAXPROCS(0)
	if n < 1<<15 || workers < 2 {
		transform(0, n)
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := w*n/workers, (w+1)*n/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			transform(lo, hi)
		}()
	}
	wg.Wait()
}

// Generate samples one response per prompt with a KV cache: one prefill
// graph for the (padded) prompts, then one decode graph per token, until
// every row emitted EOS (or one of req.StopTokens) or MaxTokens. Sampling is Gumbel-max with noise drawn
// on the host from req.Seed, so the same request and weights give the same
// tokens on any engine.
func (b *Backend) Generate(req core.GenerateRequest) ([]core.Generation, error) {
	c := b.policy.cfg
	nb := len(req.Prompts)
	if nb == 0 {
		return nil, nil
	}
	if req.MaxTokens < 1 {
		return nil, fmt.Errorf("generate: max tokens %d < 1", req.MaxTokens)
	}
	temp := req.Temperature
	if temp <= 0 {
		return nil, fmt.Errorf("generate: temperature %v must be > 0", temp)
	}
	maxP := 0
	for i, p := range req.Prompts {
		if len(p) == 0 {
			return nil, fmt.Errorf("generate: prompt %d is empty", i)
		}
		maxP = max(maxP, len(p))
	}
	P := roundUp(maxP, 4)
	tmax := P + req.MaxTokens
	if tmax > c.MaxLen {
		return nil, fmt.Errorf("generate: prompt length %d + max_response_tokens %d exceeds the model's max length %d (raise model.max_len)", P, req.MaxTokens, c.MaxLen)
	}
	tokens := make([]int32, nb*P)
	last := make([]int32, nb)
	pos := make([]int32, nb)
	for i, p := range req.Prompts {
		for j := range P {
			tokens[i*P+j] = b.opts.PAD
		}
		copy(tokens[i*P:], p)
		last[i] = int32(len(p) - 1)
		pos[i] = int32(len(p))
	}
	invTemp := float32(1 / temp)
	pre, err := b.policy.prefillExec(tmax)
	if err != nil {
		return nil, err
	}
	// One noise tensor for every step, shared with the engine where it
	// can (the cpu engine reads it in place): refilled, not reallocated.
	noise := &gumbelNoise{rng: rand.New(rand.NewPCG(req.Seed, 0x6e6))}
	noiseT := tensors.FromShape(shapesOf(dtypes.Float32, nb, c.Vocab))
	defer noiseT.FinalizeAll()
	if err := noiseT.MaterializeOnDevice(b.engine, true, 0); err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	nextNoise := func() *tensors.Tensor {
		tensors.MustMutableFlatData(noiseT, func(flat []float32) { noise.fill(flat) })
		return noiseT
	}
	out, err := run(pre, tensors.FromFlatDataAndDimensions(tokens, nb, P), tensors.FromFlatDataAndDimensions(last, nb),
		nextNoise(), invTemp)
	if err != nil {
		return nil, fmt.Errorf("generate: prefill: %w", err)
	}
	gens := make([]core.Generation, nb)
	hidden := make([][][]float32, nb)
	done := make([]bool, nb)
	decode, err := b.policy.exec(&b.policy.decode, b.policy.buildDecode())
	if err != nil {
		return nil, err
	}
	for step := 0; ; step++ {
		tok := tensors.MustCopyFlatData[int32](out[0])
		lp := tensors.MustCopyFlatData[float32](out[1])
		ent := tensors.MustCopyFlatData[float32](out[2])
		var h []float32
		if req.Pooling != "" {
			h = tensors.MustCopyFlatData[float32](out[3])
		}
		allDone := true
		for i := range nb {
			if done[i] {
				continue
			}
			g := &gens[i]
			g.Tokens = append(g.Tokens, tok[i])
			g.LogProbs = append(g.LogProbs, float64(lp[i]))
			g.Entropies = append(g.Entropies, float64(ent[i]))
			if h != nil {
				hidden[i] = append(hidden[i], h[i*c.DModel:(i+1)*c.DModel])
			}
			if tok[i] == b.opts.EOS || slices.Contains(req.StopTokens, tok[i]) {
				done[i] = true
			} else if len(g.Tokens) >= req.MaxTokens {
				done[i] = true
				g.Truncated = true
			} else {
				allDone = false
			}
		}
		if allDone {
			for _, t := range out {
				t.FinalizeAll()
			}
			break
		}
		if stopped(req.Done) {
			for _, t := range out {
				t.FinalizeAll()
			}
			return nil, core.ErrGenerateStopped
		}
		args := []any{out[0], tensors.FromFlatDataAndDimensions(slices.Clone(pos), nb), nextNoise(), invTemp}
		for _, t := range out[4:] {
			// The caches are donated: an engine may then write the new
			// K/V into them in place instead of copying them every token.
			d, err := graph.DonateTensorBuffer(t, b.engine, 0)
			if err != nil {
				return nil, fmt.Errorf("generate: decode step %d: donating a cache: %w", step, err)
			}
			args = append(args, d)
		}
		next, err := run(decode, args...)
		if err != nil {
			return nil, fmt.Errorf("generate: decode step %d: %w", step, err)
		}
		for _, t := range out {
			t.FinalizeAll()
		}
		out = next
		for i := range pos {
			pos[i]++
		}
	}
	if req.Pooling != "" {
		for i := range gens {
			gens[i].Embedding = pool(hidden[i], req.Pooling)
		}
	}
	return gens, nil
}

// pool reduces the hidden states that chose each response token: "last"
// (the state that chose the final token), "second_last" (the one before, or
// the last for one-token responses) or "mean".
func pool(states [][]float32, how string) []float64 {
	if len(states) == 0 {
		return nil
	}
	d := len(states[0])
	out := make([]float64, d)
	switch how {
	case "mean":
		for _, s := range states {
			for j, v := range s {
				out[j] += float64(v) / float64(len(states))
			}
		}
	case "second_last":
		s := states[max(len(states)-2, 0)]
		for j, v := range s {
			out[j] = float64(v)
		}
	default:
		for j, v := range states[len(states)-1] {
			out[j] = float64(v)
		}
	}
	return out
}

// batch is a padded [B, T] layout of (prompt ++ response) sequences. The
// prediction for response token t of row i sits at position P_i - 1 + t.
type batch struct {
	b, t    int
	tokens  []int32
	targets []int32
	mask    []float32
	// at[i][t] is the flat index of response token t of row i.
	at [][]int
}

func (be *Backend) layout(seqs []*core.Sequence) (*batch, error) {
	maxL := 0
	for _, s := range seqs {
		maxL = max(maxL, len(s.Prompt)+len(s.Response))
	}
	T := min(roundUp(maxL, 8), be.policy.cfg.MaxLen)
	if maxL > T {
		return nil, fmt.Errorf("sequence of %d tokens exceeds the model's max length %d", maxL, be.policy.cfg.MaxLen)
	}
	B := len(seqs)
	bt := &batch{b: B, t: T, tokens: make([]int32, B*T), targets: make([]int32, B*T), mask: make([]float32, B*T), at: make([][]int, B)}
	for i, s := range seqs {
		row := bt.tokens[i*T : (i+1)*T]
		for j := range row {
			row[j] = be.opts.PAD
		}
		copy(row, s.Prompt)
		copy(row[len(s.Prompt):], s.Response)
		bt.at[i] = make([]int, len(s.Response))
		for t, tok := range s.Response {
			p := i*T + len(s.Prompt) - 1 + t
			bt.targets[p] = tok
			bt.mask[p] = 1
			bt.at[i][t] = p
		}
	}
	return bt, nil
}

func ptrs(r *core.Rollout) []*core.Sequence {
	out := make([]*core.Sequence, len(r.Seqs))
	for i := range r.Seqs {
		out[i] = &r.Seqs[i]
	}
	return out
}

// ScoreValues fills Values with the critic's K head values.
func (b *Backend) ScoreValues(r *core.Rollout) error {
	if b.critic == nil {
		return fmt.Errorf("score values: no critic (the algorithm or strategies must ask for value heads)")
	}
	seqs := ptrs(r)
	bt, err := b.layout(seqs)
	if err != nil {
		return err
	}
	e, err := b.critic.exec(&b.critic.score, b.critic.buildScore())
	if err != nil {
		return err
	}
	out, err := run(e, tensors.FromFlatDataAndDimensions(bt.tokens, bt.b, bt.t), tensors.FromFlatDataAndDimensions(bt.targets, bt.b, bt.t), float32(1))
	if err != nil {
		return fmt.Errorf("score values: %w", err)
	}
	vals := tensors.MustCopyFlatData[float32](out[0])
	out[0].FinalizeAll()
	K := b.critic.cfg.ValueK
	for i, s := range seqs {
		s.Values = make([][]float64, len(s.Response))
		for t, p := range bt.at[i] {
			v := make([]float64, K)
			for k := range K {
				v[k] = float64(vals[p*K+k])
			}
			s.Values[t] = v
		}
	}
	return nil
}

// ScoreLogProbs returns each sequence's per-token log-probs and entropies
// under the current policy at temperature temp.
func (b *Backend) ScoreLogProbs(seqs []*core.Sequence, temp float64) (lps, ents [][]float64, err error) {
	return scoreLP(b.policy, b, seqs, temp)
}

func scoreLP(n *net, be *Backend, seqs []*core.Sequence, temp float64) (lps, ents [][]float64, err error) {
	bt, err := be.layout(seqs)
	if err != nil {
		return nil, nil, err
	}
	e, err := n.exec(&n.score, n.buildScore())
	if err != nil {
		return nil, nil, err
	}
	out, err := run(e, tensors.FromFlatDataAndDimensions(bt.tokens, bt.b, bt.t), tensors.FromFlatDataAndDimensions(bt.targets, bt.b, bt.t), float32(1/temp))
	if err != nil {
		return nil, nil, fmt.Errorf("score: %w", err)
	}
	lp := tensors.MustCopyFlatData[float32](out[0])
	en := tensors.MustCopyFlatData[float32](out[1])
	for _, t := range out {
		t.FinalizeAll()
	}
	lps = make([][]float64, len(seqs))
	ents = make([][]float64, len(seqs))
	for i := range seqs {
		for _, p := range bt.at[i] {
			lps[i] = append(lps[i], float64(lp[p]))
			ents[i] = append(ents[i], float64(en[p]))
		}
	}
	return lps, ents, nil
}

// minibatches splits indices 0..n-1 into m equal shuffled parts (n must be
// divisible by m, so every minibatch has the same shape).
func minibatches(n, m int, rng *rand.Rand) ([][]int, error) {
	if m < 1 || n%m != 0 {
		return nil, fmt.Errorf("config: train.minibatches = %d: the batch of %d responses must divide into equal minibatches", m, n)
	}
	perm := rng.Perm(n)
	size := n / m
	out := make([][]int, m)
	for j := range m {
		out[j] = perm[j*size : (j+1)*size]
	}
	return out, nil
}

// MaxPromptTokens is the longest prompt Generate accepts with
// maxResponseTokens after it (prompts are padded to a multiple of 4).
func (b *Backend) MaxPromptTokens(maxResponseTokens int) int {
	return (b.policy.cfg.MaxLen - maxResponseTokens) / 4 * 4
}

// MaxSequenceTokens is the longest prompt + response the model scores.
func (b *Backend) MaxSequenceTokens() int { return b.policy.cfg.MaxLen }

// UpdateActor runs Epochs x Minibatches clipped-surrogate Adam steps, each
// minibatch in passes of at most MicroBatchSize responses. Metrics are
// means over the steps.
func (b *Backend) UpdateActor(r *core.Rollout, u core.ActorUpdate) (map[string]float64, error) {
	if u.Temperature <= 0 {
		u.Temperature = 1
	}
	var refLPs [][]float64
	if u.KLCoef > 0 {
		var err error
		// In parts no larger than the update's passes.
		part := (len(r.Seqs) + u.Minibatches - 1) / max(u.Minibatches, 1)
		if u.MicroBatchSize > 0 {
			part = min(part, u.MicroBatchSize)
		}
		if refLPs, err = b.referenceLogProbs(r, u.Temperature, part); err != nil {
			return nil, err
		}
	}
	entGrad := u.EntropyCoef != 0
	slot, accSlot := &b.policy.train, &b.policy.accum
	if !entGrad {
		slot, accSlot = &b.policy.trainNoEnt, &b.policy.accumNoEnt
	}
	p := b.policy
	fused := func() (*context.Exec, error) { return p.exec(slot, p.buildActorTrain(entGrad, false)) }
	accum := func() (*context.Exec, error) { return p.exec(accSlot, p.buildActorTrain(entGrad, true)) }
	names := []string{"actor/loss", "actor/pg_loss", "actor/pg_clipfrac", "actor/entropy", "actor/kl", "actor/nll"}
	fusedNames := []string{"actor/loss", "actor/pg_loss", "actor/pg_clipfrac", "actor/entropy", "actor/kl", "actor/grad_norm", "actor/nll"}
	sums, err := b.eachMinibatch(r, u.Epochs, u.Minibatches, u.Seed, func(idx []int, seqs []*core.Sequence) (map[string]float64, error) {
		hyper := make([]float32, hNum)
		if err := actorHyper(hyper, u); err != nil {
			return nil, err
		}
		hyper[hLR] = float32(p.biasCorrectedLR(b.opts.ActorLR))
		hyper[hMaxGradNorm] = float32(b.opts.MaxGradNorm)
		parts := microBatches(len(seqs), u.MicroBatchSize)
		if len(parts) > 1 {
			// The aggregation's N and B over the whole minibatch.
			for _, s := range seqs {
				if len(s.Response) > 0 {
					hyper[hNTok] += float32(len(s.Response))
					hyper[hBRows]++
				}
			}
			hyper[hNTok] = max(hyper[hNTok], 1)
			hyper[hBRows] = max(hyper[hBRows], 1)
		}
		return b.microSteps(p, parts, idx, seqs, hyper, fusedNames, names, "actor/loss", "actor/grad_norm", fused, accum,
			func(pidx []int, pseqs []*core.Sequence, bt *batch) ([]any, error) {
				return actorInputs(pidx, pseqs, bt, refLPs)
			})
	})
	if err != nil {
		return nil, err
	}
	if u.KLCoef == 0 {
		delete(sums, "actor/kl")
	}
	return sums, nil
}

// actorInputs is the actor train graph's inputs but hyper for the
// sequences seqs (rollout indices idx) laid out as bt.
func actorInputs(idx []int, seqs []*core.Sequence, bt *batch, refLPs [][]float64) ([]any, error) {
	n := bt.b * bt.t
	adv, oldLP, refLP := make([]float32, n), make([]float32, n), make([]float32, n)
	pgW, absKL := make([]float32, n), make([]float32, n) // core.TokenLoss: 1 and 0 unless set
	for j, s := range seqs {
		if len(s.Advantages) != len(s.Response) || len(s.LogProbs) != len(s.Response) {
			return nil, fmt.Errorf("update actor: sequence %d has %d advantages and %d log-probs for %d tokens", idx[j], len(s.Advantages), len(s.LogProbs), len(s.Response))
		}
		if s.PGWeight != nil && len(s.PGWeight) != len(s.Response) || s.AbsKLCoef != nil && len(s.AbsKLCoef) != len(s.Response) {
			return nil, fmt.Errorf("update actor: sequence %d has %d pg weights and %d abs-KL coefficients for %d tokens", idx[j], len(s.PGWeight), len(s.AbsKLCoef), len(s.Response))
		}
		for t, p := range bt.at[j] {
			adv[p] = float32(s.Advantages[t])
			oldLP[p] = float32(s.LogProbs[t])
			refLP[p] = oldLP[p]
			if refLPs != nil {
				refLP[p] = float32(refLPs[idx[j]][t])
			}
			pgW[p] = 1
			if s.PGWeight != nil {
				pgW[p] = float32(s.PGWeight[t])
			}
			if s.AbsKLCoef != nil {
				absKL[p] = float32(s.AbsKLCoef[t])
			}
		}
	}
	bt2 := func(x []float32) *tensors.Tensor { return tensors.FromFlatDataAndDimensions(x, bt.b, bt.t) }
	return []any{
		tensors.FromFlatDataAndDimensions(bt.tokens, bt.b, bt.t),
		tensors.FromFlatDataAndDimensions(bt.targets, bt.b, bt.t),
		bt2(bt.mask), bt2(adv), bt2(oldLP), bt2(refLP), bt2(pgW), bt2(absKL)}, nil
}

// microBatches splits a minibatch of n responses into consecutive parts of
// at most size responses (size 0 or >= n: one part).
func microBatches(n, size int) [][2]int {
	if size <= 0 || size >= n {
		return [][2]int{{0, n}}
	}
	var out [][2]int
	for lo := 0; lo < n; lo += size {
		out = append(out, [2]int{lo, min(lo+size, n)})
	}
	return out
}

// microSteps runs one minibatch's update of net p: with one part, the
// fused graph (loss, gradient and Adam step in one pass, outputs
// fusedNames, then the applied flag); with several,
// the accumulate graph per part (outputs names, each part's share, summed
// here) and then the Adam step on the summed gradient. inputs lays out a
// part's inputs but hyper, which is appended.
func (b *Backend) microSteps(p *net, parts [][2]int, idx []int, seqs []*core.Sequence, hyper []float32,
	fusedNames, names []string, lossName, normName string, fused, accum func() (*context.Exec, error),
	inputs func(idx []int, seqs []*core.Sequence, bt *batch) ([]any, error)) (map[string]float64, error) {
	what := strings.Split(lossName, "/")[0]
	if len(parts) == 1 {
		e, err := fused()
		if err != nil {
			return nil, err
		}
		bt, err := b.layout(seqs)
		if err != nil {
			return nil, err
		}
		args, err := inputs(idx, seqs, bt)
		if err != nil {
			return nil, err
		}
		out, err := run(e, append(args, tensors.FromFlatDataAndDimensions(hyper, hNum))...)
		if err != nil {
			return nil, fmt.Errorf("update %s: %w", what, err)
		}
		return guardedScalars(out, lossName, normName, fusedNames...)
	}
	e, err := accum()
	if err != nil {
		return nil, err
	}
	p.ensureAccum()
	sums := map[string]float64{}
	for k, part := range parts {
		pseqs, pidx := seqs[part[0]:part[1]], idx[part[0]:part[1]]
		bt, err := b.layout(pseqs)
		if err != nil {
			return nil, err
		}
		args, err := inputs(pidx, pseqs, bt)
		if err != nil {
			return nil, err
		}
		hyper[hFirst] = 0
		if k == 0 {
			hyper[hFirst] = 1
		}
		out, err := run(e, append(args, tensors.FromFlatDataAndDimensions(slices.Clone(hyper), hNum))...)
		if err != nil {
			return nil, fmt.Errorf("update %s: micro-batch %d of %d: %w", what, k+1, len(parts), err)
		}
		for name, v := range scalars(out, names...) {
			sums[name] += v
		}
	}
	ae, err := p.exec(&p.apply, p.buildApply())
	if err != nil {
		return nil, err
	}
	hyper[hLoss] = float32(sums[lossName])
	out, err := run(ae, tensors.FromFlatDataAndDimensions(hyper, hNum))
	if err != nil {
		return nil, fmt.Errorf("update %s: %w", what, err)
	}
	m, err := guardedScalars(out, lossName, normName, normName)
	if err != nil {
		var nf *core.NonFiniteError
		if errors.As(err, &nf) && nf.Quantity == normName && !isFinite(sums[lossName]) {
			nf.Quantity, nf.Value = lossName, sums[lossName]
		}
		return nil, err
	}
	sums[normName] = m[normName]
	return sums, nil
}

func isFinite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// ReferenceLogProbs scores the batch under the frozen reference policy
// (core.ReferenceScorer).
func (b *Backend) ReferenceLogProbs(r *core.Rollout, temp float64) ([][]float64, error) {
	return b.referenceLogProbs(r, temp, len(r.Seqs))
}

// referenceLogProbs scores the batch under the frozen initial policy, in
// passes of at most part sequences.
func (b *Backend) referenceLogProbs(r *core.Rollout, temp float64, part int) ([][]float64, error) {
	if b.ref == nil {
		return nil, fmt.Errorf("kl_coef > 0 needs a reference policy: none was frozen (call FreezeReference after loading the base checkpoint)")
	}
	seqs, part := ptrs(r), max(part, 1)
	var lps [][]float64
	for lo := 0; lo < len(seqs); lo += part {
		p, _, err := scoreLP(b.ref, b, seqs[lo:min(lo+part, len(seqs))], temp)
		if err != nil {
			return nil, err
		}
		lps = append(lps, p...)
	}
	return lps, nil
}

// FreezeReference copies the current policy weights into a frozen reference
// (for the k3 KL term).
func (b *Backend) FreezeReference() error {
	ref, err := newNet(b.engine, b.policy.cfg, 0, nil)
	if err != nil {
		return err
	}
	for _, v := range b.policy.trainable() {
		rv := ref.ctx.GetVariableByScopeAndName(v.Scope(), v.Name())
		if rv == nil {
			return fmt.Errorf("reference: missing variable %s", v.ScopeAndName())
		}
		val, err := v.Value()
		if err != nil {
			return err
		}
		data := tensors.MustCopyFlatData[float32](val)
		if err := rv.SetValue(tensors.FromFlatDataAndDimensions(data, val.Shape().Dimensions...)); err != nil {
			return err
		}
	}
	b.ref = ref
	return nil
}

// UpdateCritic regresses every head on Returns with the HeadMask weights.
func (b *Backend) UpdateCritic(r *core.Rollout, u core.CriticUpdate) (map[string]float64, error) {
	if b.critic == nil {
		return nil, fmt.Errorf("update critic: no critic")
	}
	c := b.critic
	K := c.cfg.ValueK
	fused := func() (*context.Exec, error) { return c.exec(&c.train, c.buildCriticTrain(false)) }
	accum := func() (*context.Exec, error) { return c.exec(&c.criticAccum, c.buildCriticTrain(true)) }
	return b.eachMinibatch(r, u.Epochs, u.Minibatches, u.Seed^0xc41, func(idx []int, seqs []*core.Sequence) (map[string]float64, error) {
		for j, s := range seqs {
			if len(s.Returns) != len(s.Response) {
				return nil, fmt.Errorf("update critic: sequence %d has %d returns for %d tokens", idx[j], len(s.Returns), len(s.Response))
			}
			if s.HeadMask != nil && len(s.HeadMask) != len(s.Response) {
				return nil, fmt.Errorf("update critic: sequence %d has %d head-mask rows for %d tokens", idx[j], len(s.HeadMask), len(s.Response))
			}
			for t := range s.HeadMask {
				if len(s.HeadMask[t]) != K {
					return nil, fmt.Errorf("update critic: sequence %d token %d has %d head-mask entries, want %d", idx[j], t, len(s.HeadMask[t]), K)
				}
			}
		}
		hyper := make([]float32, hNum)
		hyper[hLR] = float32(c.biasCorrectedLR(b.opts.CriticLR))
		hyper[hMaxGradNorm] = float32(b.opts.MaxGradNorm)
		parts := microBatches(len(seqs), u.MicroBatchSize)
		if len(parts) > 1 {
			// sum(mask x head mask) over the whole minibatch, in float32
			// as the graph counts it.
			den := float32(0)
			for _, s := range seqs {
				for t := range s.Response {
					for k := range K {
						w := float32(1)
						if s.HeadMask != nil {
							w = float32(s.HeadMask[t][k])
						}
						den += w
					}
				}
			}
			hyper[hCriticDen] = max(den, 1)
		}
		return b.microSteps(c, parts, idx, seqs, hyper, []string{"critic/vf_loss", "critic/grad_norm"}, []string{"critic/vf_loss"}, "critic/vf_loss", "critic/grad_norm", fused, accum,
			func(pidx []int, pseqs []*core.Sequence, bt *batch) ([]any, error) {
				n := bt.b * bt.t
				ret := make([]float32, n)
				hm := make([]float32, n*K)
				for j, s := range pseqs {
					for t, p := range bt.at[j] {
						ret[p] = float32(s.Returns[t])
						for k := range K {
							w := float32(1)
							if s.HeadMask != nil {
								w = float32(s.HeadMask[t][k])
							}
							hm[p*K+k] = w
						}
					}
				}
				return []any{
					tensors.FromFlatDataAndDimensions(bt.tokens, bt.b, bt.t),
					tensors.FromFlatDataAndDimensions(bt.mask, bt.b, bt.t),
					tensors.FromFlatDataAndDimensions(ret, bt.b, bt.t),
					tensors.FromFlatDataAndDimensions(hm, bt.b, bt.t, K)}, nil
			})
	})
}

// eachMinibatch runs step on epochs x m shuffled equal minibatches of r
// (laid out as padded batches) and returns the mean of the metrics step
// reports.
func (b *Backend) eachMinibatch(r *core.Rollout, epochs, m int, seed uint64,
	step func(idx []int, seqs []*core.Sequence) (map[string]float64, error)) (map[string]float64, error) {
	rng := rand.New(rand.NewPCG(seed, 0xac7))
	sums := map[string]float64{}
	nSteps := 0
	for range max(epochs, 1) {
		mbs, err := minibatches(len(r.Seqs), max(m, 1), rng)
		if err != nil {
			return nil, err
		}
		for _, idx := range mbs {
			seqs := make([]*core.Sequence, len(idx))
			for j, i := range idx {
				seqs[j] = &r.Seqs[i]
			}
			out, err := step(idx, seqs)
			if err != nil {
				return nil, err
			}
			for k, v := range out {
				sums[k] += v
			}
			nSteps++
		}
	}
	for k := range sums {
		sums[k] /= float64(nSteps)
	}
	return sums, nil
}

// scalars reads the first element of each output into metrics by name and
// releases the outputs.
func scalars(out []*tensors.Tensor, names ...string) map[string]float64 {
	m := map[string]float64{}
	for k, name := range names {
		m[name] = float64(tensors.MustCopyFlatData[float32](out[k])[0])
	}
	for _, t := range out {
		t.FinalizeAll()
	}
	return m
}

// guardedScalars reads the outputs of a train graph (named as in scalars,
// followed by adamUpdate's applied flag). When the graph did not apply its
// update (a non-finite loss, gradient norm or updated weight; the model is
// unchanged), it returns an error naming the first non-finite quantity.
func guardedScalars(out []*tensors.Tensor, lossName, normName string, names ...string) (map[string]float64, error) {
	applied := tensors.MustCopyFlatData[float32](out[len(names)])[0] == 1
	m := scalars(out, names...)
	if applied {
		return m, nil
	}
	for _, k := range []string{lossName, normName} {
		if v := m[k]; math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, &core.NonFiniteError{Quantity: k, Value: v}
		}
	}
	return nil, &core.NonFiniteError{Quantity: "weights (an updated weight or Adam moment)", Value: math.NaN()}
}

// checkpoint is the on-disk form of one net: every variable (weights and
// Adam moments) and the Adam step count.
type checkpoint struct {
	Config   ModelConfig
	AdamStep int
	Vars     map[string]savedTensor
}

type savedTensor struct {
	Dims []int
	Data []float32
}

func (n *net) snapshot() (checkpoint, error) {
	ck := checkpoint{Config: n.cfg, AdamStep: n.adamStep, Vars: map[string]savedTensor{}}
	for v := range n.ctx.IterVariables() {
		if isAccum(v) {
			continue
		}
		val, err := v.Value()
		if err != nil {
			return ck, err
		}
		ck.Vars[v.ScopeAndName()] = savedTensor{Dims: val.Shape().Dimensions, Data: tensors.MustCopyFlatData[float32](val)}
	}
	return ck, nil
}

// restore sets every variable from ck after checking all of them (sizes,
// shapes, data length, finiteness), so a bad checkpoint changes nothing.
func (n *net) restore(ck checkpoint, what string) error {
	if ck.Config.Vocab != n.cfg.Vocab || ck.Config.Layers != n.cfg.Layers || ck.Config.DModel != n.cfg.DModel ||
		ck.Config.Heads != n.cfg.Heads || ck.Config.FF != n.cfg.FF || ck.Config.MaxLen != n.cfg.MaxLen || ck.Config.ValueK != n.cfg.ValueK ||
		!reflect.DeepEqual(ck.Config.HF, n.cfg.HF) {
		return fmt.Errorf("checkpoint %s: model sizes %+v differ from the configured %+v", what, ck.Config, n.cfg)
	}
	if ck.AdamStep < 0 {
		return fmt.Errorf("checkpoint %s: negative Adam step count %d", what, ck.AdamStep)
	}
	var vars []*context.Variable
	for v := range n.ctx.IterVariables() {
		if isAccum(v) {
			continue
		}
		st, ok := ck.Vars[v.ScopeAndName()]
		if !ok {
			return fmt.Errorf("checkpoint %s: variable %s missing", what, v.ScopeAndName())
		}
		if !slices.Equal(st.Dims, v.Shape().Dimensions) {
			return fmt.Errorf("checkpoint %s: variable %s has shape %v, model wants %v", what, v.ScopeAndName(), st.Dims, v.Shape().Dimensions)
		}
		if len(st.Data) != v.Shape().Size() {
			return fmt.Errorf("checkpoint %s: variable %s has %d values for shape %v", what, v.ScopeAndName(), len(st.Data), st.Dims)
		}
		for i, x := range st.Data {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return fmt.Errorf("checkpoint %s: variable %s[%d] is %v", what, v.ScopeAndName(), i, x)
			}
		}
		vars = append(vars, v)
	}
	for _, v := range vars {
		st := ck.Vars[v.ScopeAndName()]
		if err := v.SetValue(tensors.FromFlatDataAndDimensions(slices.Clone(st.Data), st.Dims...)); err != nil {
			return err
		}
	}
	n.adamStep = ck.AdamStep
	return nil
}

// Save writes policy.gob (and critic.gob, and reference.gob for the KL
// term's frozen policy) under dir, each written to a
// temporary file and renamed, so a crash never leaves a torn file.
func (b *Backend) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	nets := map[string]*net{"policy": b.policy}
	if b.critic != nil {
		nets["critic"] = b.critic
	}
	if b.ref != nil {
		nets["reference"] = b.ref
	}
	for name, n := range nets {
		ck, err := n.snapshot()
		if err != nil {
			return err
		}
		if err := writeGob(filepath.Join(dir, name+".gob"), ck); err != nil {
			return err
		}
	}
	return nil
}

// Load restores what Save wrote. A directory holding only a policy (a
// pretrained base) leaves the critic at its initial weights.
func (b *Backend) Load(dir string) error {
	var ck checkpoint
	if err := readGob(filepath.Join(dir, "policy.gob"), &ck); err != nil {
		return err
	}
	if err := b.policy.restore(ck, dir+"/policy.gob"); err != nil {
		return err
	}
	if path := filepath.Join(dir, "reference.gob"); fileExists(path) {
		var rc checkpoint
		if err := readGob(path, &rc); err != nil {
			return err
		}
		ref, err := newNet(b.engine, b.policy.cfg, 0, nil)
		if err != nil {
			return err
		}
		if err := ref.restore(rc, path); err != nil {
			return err
		}
		b.ref = ref
	}
	if b.critic != nil {
		path := filepath.Join(dir, "critic.gob")
		if _, err := os.Stat(path); err == nil {
			var cc checkpoint
			if err := readGob(path, &cc); err != nil {
				return err
			}
			if err := b.critic.restore(cc, path); err != nil {
				return err
			}
		}
	}
	return nil
}

// ResetOptimizer zeroes the policy's Adam state (used when RL starts from a
// supervised checkpoint).
func (b *Backend) ResetOptimizer() {
	for v := range b.policy.ctx.IterVariables() {
		if len(v.Scope()) >= 5 && v.Scope()[:5] == "/adam" {
			v.MustSetValue(tensors.FromShape(v.Shape()))
		}
	}
	b.policy.adamStep = 0
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func writeGob(path string, v any) error {
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(v); err != nil {
		return err
	}
	return core.WriteFileAtomic(path, buf.Bytes())
}

func readGob(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return decodeGob(data, path, v)
}

// decodeGob decodes one gob value from data. The stream's message framing
// is checked first (the gob decoder allocates whatever length a message
// claims, up to 1 GiB, before reading it), and a decoder panic on hostile
// input becomes an error naming what.
func decodeGob(data []byte, what string, v any) (err error) {
	if err := checkGobFraming(data); err != nil {
		return fmt.Errorf("checkpoint %s: corrupt gob data: %w", what, err)
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("checkpoint %s: corrupt gob data: %v", what, p)
		}
	}()
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(v); err != nil {
		return fmt.Errorf("checkpoint %s: %w", what, err)
	}
	return nil
}

// checkGobFraming walks the length-prefixed messages of a gob stream and
// reports the first whose length runs past the data. A length is a gob
// unsigned integer: one byte below 128, else a byte holding minus the
// count of big-endian bytes that follow.
func checkGobFraming(data []byte) error {
	for off := 0; off < len(data); {
		b := data[off]
		off++
		n := uint64(b)
		if b >= 0x80 {
			k := int(-int8(b))
			if k < 1 || k > 8 || off+k > len(data) {
				return fmt.Errorf("bad message length at byte %d", off-1)
			}
			n = 0
			for _, c := range data[off : off+k] {
				n = n<<8 | uint64(c)
			}
			off += k
		}
		if n > uint64(len(data)-off) {
			return fmt.Errorf("message at byte %d claims %d bytes, %d remain", off, n, len(data)-off)
		}
		off += int(n)
	}
	return nil
}

// SupervisedStep takes one Adam step of token cross-entropy on the
// sequences' responses (given the prompts) and returns the mean token NLL.
func (b *Backend) SupervisedStep(seqs []*core.Sequence, lr float64) (float64, error) {
	n := b.policy
	if n.sft == nil {
		e, err := context.NewExec(b.engine, n.ctx, n.buildSFT())
		if err != nil {
			return 0, err
		}
		n.sft = e
	}
	bt, err := b.layout(seqs)
	if err != nil {
		return 0, err
	}
	hyper := make([]float32, hNum)
	hyper[hLR] = float32(n.biasCorrectedLR(lr))
	hyper[hMaxGradNorm] = float32(b.opts.MaxGradNorm)
	out, err := run(n.sft, tensors.FromFlatDataAndDimensions(bt.tokens, bt.b, bt.t),
		tensors.FromFlatDataAndDimensions(bt.targets, bt.b, bt.t),
		tensors.FromFlatDataAndDimensions(bt.mask, bt.b, bt.t), tensors.FromFlatDataAndDimensions(hyper, hNum))
	if err != nil {
		return 0, fmt.Errorf("supervised step: %w", err)
	}
	m, err := guardedScalars(out, "sft/loss", "sft/grad_norm", "sft/loss", "sft/grad_norm")
	if err != nil {
		return 0, fmt.Errorf("supervised step: %w", err)
	}
	return m["sft/loss"], nil
}

// stopped reports whether done is closed (nil never is).
func stopped(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}
