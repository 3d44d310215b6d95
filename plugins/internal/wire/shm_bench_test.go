//go:build linux

package wire

import (
	"testing"

	"github.com/cde-rl/cde/core"
)

// BenchmarkShmEncode: the host's side of one call at the paper-scale
// batch (2048 x 3072 tokens, 16 value heads), fresh content every call:
//
//	go test ./plugins/internal/wire -run '^$' -bench ShmEncode -benchtime 5x
func BenchmarkShmEncode(b *testing.B) {
	rs := [2]*core.Rollout{bigRollout(2048, 3072, 16, 1), bigRollout(2048, 3072, 16, 2)}
	probe, err := NewShmProbe()
	if err != nil {
		b.Fatal(err)
	}
	h := NewShmHost(probe)
	defer h.Close()
	needs := core.Needs{LogProbs: true, ValueHeads: 16}
	i := 0
	for b.Loop() {
		if _, err := h.Encode(core.StepInfo{}, rs[i%2], needs, 8*rs[0].NumTokens()); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.SetBytes(h.Written / int64(i))
}

func bigRollout(n, t, k int, seed float64) *core.Rollout {
	r := &core.Rollout{ValueHeads: k, Seqs: make([]core.Sequence, n)}
	for i := range r.Seqs {
		s := &r.Seqs[i]
		s.Response = make([]int32, t)
		s.LogProbs, s.Advantages = make([]float64, t), make([]float64, t)
		s.Values = make([]float64, t*k)
		for j := range t {
			s.LogProbs[j], s.Advantages[j] = seed, seed
			s.Values[j*k] = seed
		}
	}
	return r
}
