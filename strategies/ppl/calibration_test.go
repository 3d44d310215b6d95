package ppl

import (
	"math/rand/v2"
	"testing"

	"github.com/cde-rl/cde/algos/grpo"
	"github.com/cde-rl/cde/core"
)

// The paper's Theorem 3.1 (calibration), as a property of the code: with
// the perplexity bonus, among the responses of one group with the same
// correctness (the same verifier reward), one of higher perplexity never
// gets a lower shaped reward or a lower GRPO advantage. Checked on 20,000
// random groups (sizes 2-16, rewards +1/-1, 1-40 tokens, log-probs of
// varied scale, random kappa and alpha), the shaped reward and the
// advantages computed by the in-tree strategy and algorithm.
func TestCalibrationOrdering(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 7))
	algo, err := grpo.New(core.NewParams("algorithm", map[string]any{}))
	if err != nil {
		t.Fatal(err)
	}
	reversals := 0
	for g := range 20000 {
		s, err := New(core.NewParams("", map[string]any{"kappa": 0.5 + 5*rng.Float64(), "alpha": 0.1 + 2*rng.Float64()}), algo)
		if err != nil {
			t.Fatal(err)
		}
		n := 2 + rng.IntN(15)
		r := &core.Rollout{Step: 1, TotalSteps: 10, Algorithm: "grpo"}
		scale := []float64{0.01, 0.3, 3}[rng.IntN(3)]
		for range n {
			T := 1 + rng.IntN(40)
			sq := core.Sequence{Group: 0, Response: make([]int32, T), LogProbs: make([]float64, T), Reward: -1}
			if rng.IntN(2) == 0 {
				sq.Reward, sq.Correct = 1, true
			}
			for j := range sq.LogProbs {
				sq.LogProbs[j] = -scale * rng.ExpFloat64()
			}
			r.Seqs = append(r.Seqs, sq)
		}
		bonus, err := s.(core.RewardHook).RewardBonus(core.StepInfo{Step: 1, TotalSteps: 10, Algorithm: "grpo"}, r)
		if err != nil {
			t.Fatal(err)
		}
		for i := range r.Seqs {
			r.Seqs[i].RewardBonus = bonus[i]
			r.Seqs[i].ShapedReward = r.Seqs[i].Reward + bonus[i]
		}
		if err := algo.Advantages(r); err != nil {
			t.Fatal(err)
		}
		for i := range r.Seqs {
			for j := range r.Seqs {
				a, b := &r.Seqs[i], &r.Seqs[j]
				if a.Correct != b.Correct || !(ActorBonus(a.LogProbs) > ActorBonus(b.LogProbs)) {
					continue
				}
				// a has the higher perplexity: its shaped reward and its
				// (sequence-level, so first-token) advantage are not lower.
				if a.ShapedReward < b.ShapedReward || a.Advantages[0] < b.Advantages[0] {
					reversals++
					if reversals <= 3 {
						t.Errorf("group %d: responses %d (B %v, shaped %v, adv %v) and %d (B %v, shaped %v, adv %v) are reversed",
							g, i, ActorBonus(a.LogProbs), a.ShapedReward, a.Advantages[0], j, ActorBonus(b.LogProbs), b.ShapedReward, b.Advantages[0])
					}
				}
			}
		}
	}
	if reversals > 0 {
		t.Fatalf("%d reversals in 20,000 groups", reversals)
	}
}
