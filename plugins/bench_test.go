package plugins_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/plugins"
)

// benchRollouts are two batches of n responses of t tokens (benchRollout,
// seeds 1 and 2) packed into columns in one arena, as the trainer lays out
// a step's batch when a shared-memory plugin runs: the plugins that take
// the arena (useArena) read the columns in place. The arena holds both
// batches and room for the arrays the plugins' hosts copy into it.
func benchRollouts(b *testing.B, n, t, k int) ([2]*core.Rollout, *plugins.Arena) {
	a := plugins.NewArena()
	b.Cleanup(a.Close)
	if err := a.Reserve(2*n*t*(3+k)*8 + 16*n*t*4 + 64<<20); err != nil {
		b.Fatal(err)
	}
	var rs [2]*core.Rollout
	for i := range rs {
		rs[i] = benchRollout(n, t, k, uint64(i+1))
		rs[i].Alloc = a
		rs[i].Pack()
		// The hooks' answers come from the heap: calls repeated without a
		// step's Reset would otherwise fill the arena with them.
		rs[i].Alloc = nil
	}
	return rs, a
}

// useArena gives a plugin strategy the arena (a no-op with the messages).
func useArena(s core.Strategy, a *plugins.Arena) {
	if p, ok := plugins.Of(s); ok {
		p.UseArena(a)
	}
}

// benchRollout is n responses of t tokens with log-probs, entropies, K
// head values and advantages (groups of 8), drawn from seed.
func benchRollout(n, t, k int, seed uint64) *core.Rollout {
	rng := newRand(seed)
	r := &core.Rollout{Step: 3, TotalSteps: 100, Algorithm: "ppo", ValueHeads: k, Seqs: make([]core.Sequence, n)}
	for i := range r.Seqs {
		s := &r.Seqs[i]
		s.Group, s.Reward, s.Text = i/8, float64(rng.IntN(2)*2-1), "Answer: 42"
		s.Response = make([]int32, t)
		s.LogProbs, s.Entropies, s.Advantages = make([]float64, t), make([]float64, t), make([]float64, t)
		s.Values = make([]float64, t*k)
		for j := range t {
			s.Response[j] = int32(3 + rng.IntN(60))
			s.LogProbs[j], s.Entropies[j], s.Advantages[j] = -rng.ExpFloat64(), rng.ExpFloat64(), rng.NormFloat64()
			for h := range k {
				s.Values[j*k+h] = rng.NormFloat64()
			}
		}
		s.ShapedReward = s.Reward
	}
	return r
}

// benchSizes are the batch shapes of the overhead benchmarks (responses
// x tokens): small, medium, and the paper-scale RL batch.
var benchSizes = []struct{ n, t int }{{256, 64}, {512, 256}, {2048, 3072}}

// loopFresh calls hook on a and b in turn, so that every call brings a
// batch whose content differs from the last one's: the cost of the first
// hook of a training step, which must write every array. (Calling the same
// batch again would measure a later hook of the same step, for which the
// shared-memory transport writes nothing.)
func loopFresh(b *testing.B, s core.Strategy, info core.StepInfo, rs [2]*core.Rollout,
	hook func(core.Strategy, core.StepInfo, *core.Rollout) error) {
	i := 0
	for b.Loop() {
		if err := hook(s, info, rs[i%2]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// transportModes are the plugin sub-benchmarks: the gRPC messages (what
// every call cost before protocol version 3) and the shared memory.
var transportModes = []struct{ name, config string }{
	{"messages", plugins.TransportMessages},
	{"shm", plugins.TransportAuto},
}

// BenchmarkPluginOverhead compares a hook called in-tree with the same
// strategy served by a Go plugin process (gRPC over a Unix socket,
// AutoMTLS), over the messages and over shared memory, side by side in one
// run, for each of benchSizes with 16 value heads; every call brings a
// fresh batch (loopFresh):
//
//	go test ./plugins -run '^$' -bench PluginOverhead -benchtime 3x -timeout 60m
func BenchmarkPluginOverhead(b *testing.B) {
	hooks := []struct {
		name, strategy, algo string
		params               map[string]any
		call                 func(s core.Strategy, info core.StepInfo, r *core.Rollout) error
	}{
		{"ppl/RewardBonus", "ppl", "grpo", map[string]any{}, func(s core.Strategy, info core.StepInfo, r *core.Rollout) error {
			_, err := core.HooksOf(s).RewardBonus(info, r)
			return err
		}},
		{"multihead/AdvantageBonus", "multihead", "ppo", map[string]any{"heads": 16}, func(s core.Strategy, info core.StepInfo, r *core.Rollout) error {
			_, err := core.HooksOf(s).AdvantageBonus(info, r)
			return err
		}},
	}
	for _, sz := range benchSizes {
		rs, arena := benchRollouts(b, sz.n, sz.t, 16)
		info := core.StepInfo{Step: 3, TotalSteps: 100, Algorithm: "ppo", Seed: 1}
		for _, h := range hooks {
			algo := algorithm(b, h.algo)
			local := newInTree(b, h.strategy, h.params, algo)
			b.Run(fmt.Sprintf("%dx%d/%s/in-tree", sz.n, sz.t, h.name), func(b *testing.B) { loopFresh(b, local, info, rs, h.call) })
			for _, m := range transportModes {
				b.Run(fmt.Sprintf("%dx%d/%s/%s", sz.n, sz.t, h.name, m.name), func(b *testing.B) {
					s, err := plugins.Open(plugins.Config{Path: testPlugin, Params: map[string]any{"strategy": h.strategy, "params": h.params},
						Algorithm: algo, CallTimeout: 10 * time.Minute, Transport: m.config, Log: zerolog.Nop()})
					if err != nil {
						b.Fatal(err)
					}
					defer core.HooksOf(s).Close()
					useArena(s, arena)
					loopFresh(b, s, info, rs, h.call)
				})
			}
		}
	}
}
