package xla

import (
	"io"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/engines/cpu"
)

// Benchmarks on the default model size (2 layers, d_model 64, 4 heads,
// vocab 101, max_len 64) and the default step shape: 16 prompts x 8
// responses, 12-token prompts, 32-token responses.
//
//	go test ./backends/xla -run '^$' -bench . -benchtime 5x
//
// CDE_BENCH_ENGINE selects the engine (default cpu; go is GoMLX's).

const (
	benchVocab  = 101
	benchB      = 128
	benchPrompt = 11
	benchResp   = 32
)

func benchBackend(b *testing.B, heads int) *Backend {
	engine := os.Getenv("CDE_BENCH_ENGINE")
	if engine == "" {
		engine = "cpu"
	}
	be, err := New(Options{Engine: engine, Policy: ModelConfig{Vocab: benchVocab, Layers: 2, DModel: 64, Heads: 4, MaxLen: 64},
		ValueHeads: heads, Seed: 1, ActorLR: 1e-4, CriticLR: 1e-3, PAD: 0, EOS: 2})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { be.Close() })
	return be
}

func benchRollout(heads int) *core.Rollout {
	rng := rand.New(rand.NewPCG(1, 2))
	r := &core.Rollout{ValueHeads: heads}
	for i := range benchB {
		s := core.Sequence{Group: i / 8, Prompt: make([]int32, benchPrompt), Response: make([]int32, benchResp)}
		for j := range s.Prompt {
			s.Prompt[j] = int32(3 + rng.IntN(benchVocab-3))
		}
		for j := range s.Response {
			s.Response[j] = int32(3 + rng.IntN(benchVocab-3))
			s.LogProbs = append(s.LogProbs, -4.6)
			s.Advantages = append(s.Advantages, rng.NormFloat64())
			s.Returns = append(s.Returns, rng.NormFloat64())
		}
		r.Seqs = append(r.Seqs, s)
	}
	return r
}

// BenchmarkSample reports generated tokens per second: 128 rows, exactly
// 32 tokens each (EOS is made unreachable by giving it an impossible id).
func BenchmarkSample(b *testing.B) {
	be := benchBackend(b, 0)
	be.opts.EOS = -1
	prompts := make([][]int32, benchB)
	for i := range prompts {
		prompts[i] = make([]int32, benchPrompt)
		for j := range prompts[i] {
			prompts[i][j] = int32(3 + (i+j)%50)
		}
	}
	req := core.GenerateRequest{Prompts: prompts, Temperature: 1, MaxTokens: benchResp, Seed: 1}
	if _, err := be.Generate(req); err != nil { // compile outside the timer
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req.Seed = uint64(i)
		if _, err := be.Generate(req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(benchB*benchResp*b.N)/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkActorStep is one clipped-surrogate Adam step on the full batch.
func BenchmarkActorStep(b *testing.B) {
	be := benchBackend(b, 0)
	r := benchRollout(0)
	u := core.ActorUpdate{Epochs: 1, Minibatches: 1, ClipLow: 0.2, ClipHigh: 0.2, Temperature: 1}
	if _, err := be.UpdateActor(r, u); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := be.UpdateActor(r, u); err != nil {
			b.Fatal(err)
		}
	}
}

func benchCritic(b *testing.B, heads int) {
	be := benchBackend(b, heads)
	r := benchRollout(heads)
	if _, err := be.UpdateCritic(r, core.CriticUpdate{Epochs: 1, Minibatches: 1}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := be.UpdateCritic(r, core.CriticUpdate{Epochs: 1, Minibatches: 1}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCriticStepK1 and BenchmarkCriticStepK16 compare one critic Adam
// step with 1 and 16 value heads.
func BenchmarkCriticStepK1(b *testing.B)  { benchCritic(b, 1) }
func BenchmarkCriticStepK16(b *testing.B) { benchCritic(b, 16) }

// BenchmarkActorOpStats prints where the cpu engine's actor step goes, by
// op (run with CDE_CPU_OPSTATS=1).
func BenchmarkActorOpStats(b *testing.B) {
	if os.Getenv("CDE_CPU_OPSTATS") == "" {
		b.Skip("set CDE_CPU_OPSTATS=1")
	}
	be := benchBackend(b, 0)
	r := benchRollout(0)
	u := core.ActorUpdate{ClipLow: 0.2, ClipHigh: 0.2, Epochs: 1, Minibatches: 1, Temperature: 1}
	if _, err := be.UpdateActor(r, u); err != nil {
		b.Fatal(err)
	}
	cpu.WriteOpStats(io.Discard, 0)
	for range b.N {
		if _, err := be.UpdateActor(r, u); err != nil {
			b.Fatal(err)
		}
	}
	cpu.WriteOpStats(os.Stdout, 40)
}

// BenchmarkSampleOpStats prints where the cpu engine's sampling goes, by
// op (run with CDE_CPU_OPSTATS=1).
func BenchmarkSampleOpStats(b *testing.B) {
	if os.Getenv("CDE_CPU_OPSTATS") == "" {
		b.Skip("set CDE_CPU_OPSTATS=1")
	}
	be := benchBackend(b, 0)
	be.opts.EOS = -1
	prompts := make([][]int32, benchB)
	for i := range prompts {
		prompts[i] = make([]int32, benchPrompt)
		for j := range prompts[i] {
			prompts[i][j] = int32(3 + j)
		}
	}
	req := core.GenerateRequest{Prompts: prompts, MaxTokens: benchResp, Temperature: 1, Seed: 1}
	if _, err := be.Generate(req); err != nil {
		b.Fatal(err)
	}
	cpu.WriteOpStats(io.Discard, 0)
	for range b.N {
		if _, err := be.Generate(req); err != nil {
			b.Fatal(err)
		}
	}
	cpu.WriteOpStats(os.Stdout, 30)
}
