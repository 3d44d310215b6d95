package trainer

import (
	"math/rand/v2"
	"testing"

	"github.com/cde-rl/cde/algos/ppo"
	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/strategies/multihead"
)

// BenchmarkShapeMultihead is one PPO shaping step with multihead in
// process at the paper-scale batch, 2,048 responses x 3,072 tokens and 16
// value heads: GAE, the multihead advantage bonus, whitening and the
// bootstrap masks of the critic update (Shape, then HeadMasks), on a batch
// laid out as the trainer lays it (columns). Peak memory is the process's:
//
//	go test -c -o trainer.test ./trainer
//	/usr/bin/time -v ./trainer.test -test.run '^$' -test.bench ShapeMultihead -test.benchtime 3x
func BenchmarkShapeMultihead(b *testing.B) {
	const n, T, K = 2048, 3072, 16
	algo, err := ppo.New(core.NewParams("algorithm", map[string]any{}))
	if err != nil {
		b.Fatal(err)
	}
	mh, err := multihead.New(core.NewParams("strategies[0]", map[string]any{"heads": K, "zeta": 0.5}), algo)
	if err != nil {
		b.Fatal(err)
	}
	t := &Trainer{Algo: algo, Strategies: []core.Strategy{mh}}
	rng := rand.New(rand.NewPCG(1, 2))
	r := &core.Rollout{Step: 3, TotalSteps: 100, Algorithm: "ppo", ValueHeads: K, Seqs: make([]core.Sequence, n)}
	for i := range r.Seqs {
		s := &r.Seqs[i]
		s.Group, s.Response = i/8, make([]int32, T)
		s.Reward = float64(rng.IntN(2)*2 - 1)
	}
	r.NewColumn(1, func(s *core.Sequence) *[]float64 { return &s.LogProbs })
	values := r.NewColumn(K, func(s *core.Sequence) *[]float64 { return &s.Values })
	for j := range values {
		values[j] = rng.NormFloat64()
	}
	info := core.StepInfo{Step: 3, TotalSteps: 100, Algorithm: "ppo", Seed: 1}
	masker := core.HooksOf(mh).HeadMasks
	for b.Loop() {
		if err := t.Shape(info, r, map[string]float64{}); err != nil {
			b.Fatal(err)
		}
		masks, err := masker(info, r)
		if err != nil {
			b.Fatal(err)
		}
		for i := range r.Seqs {
			r.Seqs[i].HeadMask = masks[i]
		}
	}
}
