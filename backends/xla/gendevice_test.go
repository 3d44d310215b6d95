package xla

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/internal/threefry"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
)

// The noise graph draws the host's noise bit for bit (on the go engine,
// whose float64 logarithm is Go's), for an odd vocabulary (a block's second
// word unused) and an even one.
func TestGumbelGraphMatchesHost(t *testing.T) {
	be := testBackend(t)
	seed := uint64(0xfeedface12345678)
	keys := rowKeys(seed, 0, 3)
	flat := []uint32{}
	for _, k := range keys {
		flat = append(flat, k[0], k[1])
	}
	for _, vocab := range []int{1001, 4096} {
		// Each row at its own token index.
		steps := []int32{0, 7, 3}
		e := graph.MustNewExec(be, func(k, s *graph.Node) *graph.Node { return gumbelGraph(k, s, vocab) })
		out := e.MustExec(tensors.FromFlatDataAndDimensions(flat, 3, 2), steps)[0]
		got := tensors.MustCopyFlatData[float32](out)
		for r, step := range steps {
			want := make([]float32, vocab)
			threefry.Fill(want, nil, keys[r:r+1], uint32(step), vocab)
			for i := range want {
				if math.Float32bits(got[r*vocab+i]) != math.Float32bits(want[i]) {
					t.Fatalf("vocab %d row %d step %d: value %d is %v in the graph, %v on the host", vocab, r, step, i, got[r*vocab+i], want[i])
				}
			}
			if out.Shape().DType != dtypes.Float32 {
				t.Fatalf("noise dtype %s", out.Shape().DType)
			}
		}
	}
}

// The device loop gives the host loop's generations on the same engine:
// the same tokens, log-probs and entropies, truncation flags and pooled
// states, with stop tokens, rows that stop at different steps, and more
// steps than one check of the done flags covers. With fewer slots than
// prompts (continuous batching on the device, groups of Slots on the host)
// each response is still the one of the whole batch: its noise is its own.
func TestDeviceLoopMatchesHostLoop(t *testing.T) {
	b, err := New(Options{Engine: "go", Policy: ModelConfig{Vocab: 12, Layers: 2, DModel: 16, Heads: 2, MaxLen: 48},
		Seed: 7, ActorLR: 1e-2, PAD: 0, EOS: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	prompts := [][]int32{{1, 5, 6}, {1, 7}, {1, 8, 9, 10, 11}, {1, 4}, {1, 3, 3}, {1, 9}, {1, 10, 4, 4}}
	cases := []core.GenerateRequest{
		{Prompts: prompts, Temperature: 1, MaxTokens: 20, Seed: 3},
		{Prompts: prompts, Temperature: 0.7, MaxTokens: 5, Seed: 11, StopTokens: []int32{9}, Pooling: "mean"},
		{Prompts: prompts, Temperature: 1.3, MaxTokens: 17, Seed: 12, StopTokens: []int32{2, 10}, Pooling: "last"},
		{Prompts: prompts[:2], Temperature: 1, MaxTokens: 9, Seed: 13, Pooling: "second_last"},
		{Prompts: prompts[:1], Temperature: 1, MaxTokens: 1, Seed: 14},
		{Prompts: prompts, Temperature: 1.5, MaxTokens: 30, Seed: 15, StopTokens: []int32{3, 4}, Pooling: "second_last"},
	}
	type variant struct {
		loop  string
		slots int
	}
	variants := []variant{{"device", 0}, {"device", 2}, {"device", 3}, {"host", 3}}
	sawStop, sawTrunc, sawLong, sawRefill := false, false, false, false
	for ci, req := range cases {
		t.Setenv("CDE_GENERATE", "host")
		host, err := b.Generate(req)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range variants {
			t.Setenv("CDE_GENERATE", v.loop)
			r := req
			r.Slots = v.slots
			got, err := b.Generate(r)
			if err != nil {
				t.Fatalf("case %d %s loop, %d slots: %v", ci, v.loop, v.slots, err)
			}
			lens := map[int]bool{}
			for i := range host {
				h, d := host[i], got[i]
				label := fmt.Sprintf("case %d row %d, %s loop with %d slots", ci, i, v.loop, v.slots)
				if !slices.Equal(h.Tokens, d.Tokens) || h.Truncated != d.Truncated {
					t.Fatalf("%s: %v (truncated %v), host loop at once %v (truncated %v)", label, d.Tokens, d.Truncated, h.Tokens, h.Truncated)
				}
				for j := range h.Tokens {
					if math.Abs(h.LogProbs[j]-d.LogProbs[j]) > 1e-5 || math.Abs(h.Entropies[j]-d.Entropies[j]) > 1e-5 {
						t.Fatalf("%s token %d: lp %v H %v, host loop at once lp %v H %v", label, j, d.LogProbs[j], d.Entropies[j], h.LogProbs[j], h.Entropies[j])
					}
				}
				if len(h.Embedding) != len(d.Embedding) {
					t.Fatalf("%s: embedding of %d values, %d at once on the host", label, len(d.Embedding), len(h.Embedding))
				}
				for j := range h.Embedding {
					// The mean sums in float32 on the device, float64 on the host.
					if math.Abs(h.Embedding[j]-d.Embedding[j]) > 1e-5*(1+math.Abs(h.Embedding[j])) {
						t.Fatalf("%s: embedding[%d] %v, %v at once on the host", label, j, d.Embedding[j], h.Embedding[j])
					}
				}
				lens[len(h.Tokens)] = true
			}
			// Slots freed at different times were refilled.
			sawRefill = sawRefill || (v.loop == "device" && v.slots > 0 && v.slots < len(req.Prompts) && len(lens) > 1)
		}
		for _, h := range host {
			last := h.Tokens[len(h.Tokens)-1]
			sawStop = sawStop || (!h.Truncated && last != 2)
			sawTrunc = sawTrunc || h.Truncated
			sawLong = sawLong || len(h.Tokens) > genCheckEvery
		}
	}
	if !sawStop || !sawTrunc || !sawLong || !sawRefill {
		t.Fatalf("the cases never exercised a stop token (%v), a truncation (%v), a response past %d tokens (%v) or slots freed at different steps (%v)",
			sawStop, sawTrunc, genCheckEvery, sawLong, sawRefill)
	}
}

// Response i's tokens do not depend on the other prompts of its batch: the
// noise is keyed by (seed, i, t), not by the batch.
func TestNoiseFollowsTheResponse(t *testing.T) {
	b := tinyBackend(t, 0)
	prompts := [][]int32{{1, 5, 6}, {1, 7}, {1, 8, 9, 10, 11}}
	all, err := b.Generate(core.GenerateRequest{Prompts: prompts, Temperature: 1, MaxTokens: 8, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	// The same first two rows with a different third.
	part, err := b.Generate(core.GenerateRequest{Prompts: [][]int32{prompts[0], prompts[1], {1, 4}}, Temperature: 1, MaxTokens: 8, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if !slices.Equal(all[i].Tokens, part[i].Tokens) {
			t.Fatalf("row %d: %v in one batch, %v in another", i, all[i].Tokens, part[i].Tokens)
		}
	}
}
