package xla

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/cde-rl/cde/core"
	"github.com/gomlx/gomlx/core/tensors"
	"github.com/gomlx/gomlx/ml/model"
)

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
	loss := cmp.Or(u.PolicyLoss, core.LossPPO)
	p := b.policy
	fused := func() (*model.Exec, error) { return p.actorExec(actorKey{loss: loss, entGrad: entGrad}) }
	accum := func() (*model.Exec, error) {
		return p.actorExec(actorKey{loss: loss, entGrad: entGrad, accumulate: true})
	}
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
	fusedNames, names []string, lossName, normName string, fused, accum func() (*model.Exec, error),
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
//
// A LoRA policy's reference is its base (the policy with the adapters
// off), set when the backend is built: nothing to copy.
func (b *Backend) FreezeReference() error {
	if b.policy.cfg.LoRA != nil {
		return nil
	}
	ref, err := newNet(b.engine, b.policy.cfg, 0, nil, nil, nil)
	if err != nil {
		return err
	}
	for _, v := range b.policy.trainable() {
		rv := ref.ctx.Store().GetVariable(model.JoinPath(v.Scope(), v.Name()))
		if rv == nil {
			return fmt.Errorf("reference: missing variable %s", v.Path())
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
	fused := func() (*model.Exec, error) { return c.exec(&c.train, c.buildCriticTrain(false)) }
	accum := func() (*model.Exec, error) { return c.exec(&c.criticAccum, c.buildCriticTrain(true)) }
	return b.eachMinibatch(r, u.Epochs, u.Minibatches, u.Seed^0xc41, func(idx []int, seqs []*core.Sequence) (map[string]float64, error) {
		for j, s := range seqs {
			if len(s.Returns) != len(s.Response) {
				return nil, fmt.Errorf("update critic: sequence %d has %d returns for %d tokens", idx[j], len(s.Returns), len(s.Response))
			}
			if s.HeadMask != nil && len(s.HeadMask) != len(s.Response)*K {
				return nil, fmt.Errorf("update critic: sequence %d has %d head-mask entries for %d tokens x %d heads", idx[j], len(s.HeadMask), len(s.Response), K)
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
							w = float32(s.HeadMask[t*K+k])
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
								w = float32(s.HeadMask[t*K+k])
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

// SupervisedStep takes one Adam step of token cross-entropy on the
// sequences' responses (given the prompts) and returns the mean token NLL.
func (b *Backend) SupervisedStep(seqs []*core.Sequence, lr float64) (float64, error) {
	n := b.policy
	if n.sft == nil {
		e, err := model.NewExec(b.engine, n.ctx.Store(), n.buildSFT())
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
