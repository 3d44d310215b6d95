package xla

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/internal/gumbellog"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
)

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
