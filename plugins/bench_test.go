package plugins_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/plugins"
)

// benchRollout is n responses of t tokens with log-probs, entropies, K
// head values and advantages (groups of 8).
func benchRollout(n, t, k int) *core.Rollout {
	rng := newRand(1)
	r := &core.Rollout{Step: 3, TotalSteps: 100, Algorithm: "ppo", ValueHeads: k, Seqs: make([]core.Sequence, n)}
	for i := range r.Seqs {
		s := &r.Seqs[i]
		s.Group, s.Reward, s.Text = i/8, float64(rng.IntN(2)*2-1), "Answer: 42"
		s.Response = make([]int32, t)
		s.LogProbs, s.Entropies, s.Advantages = make([]float64, t), make([]float64, t), make([]float64, t)
		s.Values = make([][]float64, t)
		vals := make([]float64, t*k)
		for j := range t {
			s.Response[j] = int32(3 + rng.IntN(60))
			s.LogProbs[j], s.Entropies[j], s.Advantages[j] = -rng.ExpFloat64(), rng.ExpFloat64(), rng.NormFloat64()
			s.Values[j] = vals[j*k : (j+1)*k : (j+1)*k]
			for h := range k {
				s.Values[j][h] = rng.NormFloat64()
			}
		}
		s.ShapedReward = s.Reward
	}
	return r
}

// BenchmarkPluginOverhead compares a hook called in-tree with the same
// strategy served by a plugin process (gRPC over a Unix socket, AutoMTLS),
// for a 256 x 64-token batch and the paper-scale 2048 x 3072-token batch
// with 16 value heads:
//
//	go test ./plugins -run '^$' -bench PluginOverhead -benchtime 3x -timeout 30m
func BenchmarkPluginOverhead(b *testing.B) {
	sizes := []struct{ n, t int }{{256, 64}, {2048, 3072}}
	hooks := []struct {
		name, algo string
		params     map[string]any
		call       func(s core.Strategy, info core.StepInfo, r *core.Rollout) error
	}{
		{"ppl/RewardBonus", "grpo", map[string]any{}, func(s core.Strategy, info core.StepInfo, r *core.Rollout) error {
			_, err := s.(core.RewardHook).RewardBonus(info, r)
			return err
		}},
		{"multihead/AdvantageBonus", "ppo", map[string]any{"heads": 16}, func(s core.Strategy, info core.StepInfo, r *core.Rollout) error {
			_, err := s.(core.AdvantageHook).AdvantageBonus(info, r)
			return err
		}},
	}
	for _, sz := range sizes {
		r := benchRollout(sz.n, sz.t, 16)
		info := core.StepInfo{Step: 3, TotalSteps: 100, Algorithm: "ppo", Seed: 1}
		for _, h := range hooks {
			name := h.name[:len(h.name)-len("/RewardBonus")]
			if h.name[0] == 'm' {
				name = "multihead"
			}
			algo := algorithm(b, h.algo)
			local := newInTree(b, name, h.params, algo)
			b.Run(fmt.Sprintf("%dx%d/%s/in-tree", sz.n, sz.t, h.name), func(b *testing.B) {
				for b.Loop() {
					if err := h.call(local, info, r); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(fmt.Sprintf("%dx%d/%s/plugin", sz.n, sz.t, h.name), func(b *testing.B) {
				s, err := plugins.Open(plugins.Config{Path: testPlugin, Params: map[string]any{"strategy": name, "params": h.params},
					Algorithm: algo, CallTimeout: 10 * time.Minute, Log: zerolog.Nop()})
				if err != nil {
					b.Fatal(err)
				}
				defer s.(core.Closer).Close()
				for b.Loop() {
					if err := h.call(s, info, r); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
