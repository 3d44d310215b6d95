package xla

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/internal/threefry"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
)

func roundUp(n, m int) int { return (n + m - 1) / m * m }

// Generate samples one response per prompt with a KV cache: one prefill
// graph for the (padded) prompts, then one decode graph per token, until
// every row emitted EOS (or one of req.StopTokens) or MaxTokens. Sampling is
// Gumbel-max with the counter-based noise of internal/threefry: response
// i's noise at token t is a function of (req.Seed, i, t) alone, so the same
// request and weights give the same tokens on any engine and in any batch.
//
// On the xla engines the loop stays on the device (generateOnDevice): the
// graphs draw the noise themselves, record each token, its log-prob and
// entropy in device buffers and test the stop conditions, and the host
// only reads whether every row is done, every few tokens. The cpu and go
// engines, whose "device" is the host's memory, draw the noise on the host
// (on every core) and test the stops in Go. CDE_GENERATE=host or device
// picks the loop whatever the engine (for benchmarks and tests).
func (b *Backend) Generate(req core.GenerateRequest) ([]core.Generation, error) {
	if len(req.Prompts) == 0 {
		return nil, nil
	}
	P, err := b.checkGenerate(req)
	if err != nil {
		return nil, err
	}
	if b.deviceLoop() {
		return b.generateOnDevice(req, P)
	}
	return b.generateOnHost(req, P)
}

// deviceLoop reports whether Generate keeps its loop on the device.
func (b *Backend) deviceLoop() bool {
	switch os.Getenv("CDE_GENERATE") {
	case "host":
		return false
	case "device":
		return true
	}
	return strings.HasPrefix(b.opts.Engine, "xla:")
}

// checkGenerate validates req and returns the padded prompt length P.
func (b *Backend) checkGenerate(req core.GenerateRequest) (int, error) {
	c := b.policy.cfg
	if req.MaxTokens < 1 {
		return 0, fmt.Errorf("generate: max tokens %d < 1", req.MaxTokens)
	}
	if req.Temperature <= 0 {
		return 0, fmt.Errorf("generate: temperature %v must be > 0", req.Temperature)
	}
	maxP := 0
	for i, p := range req.Prompts {
		if len(p) == 0 {
			return 0, fmt.Errorf("generate: prompt %d is empty", i)
		}
		maxP = max(maxP, len(p))
	}
	P := roundUp(maxP, 4)
	if P+req.MaxTokens > c.MaxLen {
		return 0, fmt.Errorf("generate: prompt length %d + max_response_tokens %d exceeds the model's max length %d (raise model.max_len)", P, req.MaxTokens, c.MaxLen)
	}
	return P, nil
}

// promptBatch lays the prompts out as the prefill reads them: tokens [nb,P]
// padded, the index of each prompt's last token, and each prompt's length
// (the position of its first response token).
func (b *Backend) promptBatch(req core.GenerateRequest, P int) (tokens, last, pos []int32) {
	nb := len(req.Prompts)
	tokens = make([]int32, nb*P)
	last = make([]int32, nb)
	pos = make([]int32, nb)
	for i, p := range req.Prompts {
		for j := range P {
			tokens[i*P+j] = b.opts.PAD
		}
		copy(tokens[i*P:], p)
		last[i] = int32(len(p) - 1)
		pos[i] = int32(len(p))
	}
	return
}

// rowKeys are the noise keys of responses first .. first+n-1.
func rowKeys(seed uint64, first, n int) [][2]uint32 {
	keys := make([][2]uint32, n)
	for i := range keys {
		keys[i][0], keys[i][1] = threefry.RowKey(seed, uint32(first+i))
	}
	return keys
}

// generateOnHost is Generate's loop on the host: noise drawn here, every
// token copied out and tested in Go; with req.Slots, req.Slots prompts at
// a time. P is the padded prompt length (checkGenerate).
func (b *Backend) generateOnHost(req core.GenerateRequest, P int) ([]core.Generation, error) {
	nb := len(req.Prompts)
	if req.Slots <= 0 || req.Slots >= nb {
		return b.generateRows(req, P, 0)
	}
	var gens []core.Generation
	for lo := 0; lo < nb; lo += req.Slots {
		part := req
		part.Prompts = req.Prompts[lo:min(lo+req.Slots, nb)]
		g, err := b.generateRows(part, P, lo)
		if err != nil {
			return nil, err
		}
		gens = append(gens, g...)
	}
	return gens, nil
}

// generateRows generates req's prompts, responses first .. first+n-1 of
// the whole request, padded to P.
func (b *Backend) generateRows(req core.GenerateRequest, P, first int) ([]core.Generation, error) {
	gn, err := b.genView()
	if err != nil {
		return nil, err
	}
	c := gn.cfg
	nb := len(req.Prompts)
	tmax := P + req.MaxTokens
	tokens, last, pos := b.promptBatch(req, P)
	temp := req.Temperature
	invTemp := float32(1 / temp)
	pre, err := gn.prefillExec(tmax)
	if err != nil {
		return nil, err
	}
	// One noise tensor for every step, shared with the engine where it
	// can (the cpu engine reads it in place): refilled, not reallocated.
	keys := rowKeys(req.Seed, first, nb)
	scratch := make([]float64, nb*c.Vocab)
	noiseT := tensors.FromShape(shapesOf(dtypes.Float32, nb, c.Vocab))
	defer noiseT.FinalizeAll()
	if err := noiseT.MaterializeOnDevice(b.engine, true, 0); err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	nextNoise := func(t int) *tensors.Tensor {
		tensors.MustMutableFlatData(noiseT, func(flat []float32) { threefry.Fill(flat, scratch, keys, uint32(t), c.Vocab) })
		return noiseT
	}
	out, err := run(pre, tensors.FromFlatDataAndDimensions(tokens, nb, P), tensors.FromFlatDataAndDimensions(last, nb),
		nextNoise(0), invTemp)
	if err != nil {
		return nil, fmt.Errorf("generate: prefill: %w", err)
	}
	gens := make([]core.Generation, nb)
	hidden := make([][][]float32, nb)
	done := make([]bool, nb)
	decode, err := gn.exec(&gn.decode, gn.buildDecode())
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
		args := []any{out[0], tensors.FromFlatDataAndDimensions(slices.Clone(pos), nb), nextNoise(step + 1), invTemp}
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
