package xla

import (
	"testing"

	"github.com/cde-rl/cde/core"
)

// UpdateActor feeds Sequence.PGWeight into the loss: with every token's
// weight 0 (and no entropy or KL term) the gradient is 0 and the policy
// does not move; the same batch with the weights left nil moves it, as
// TestActorUpdateFollowsAdvantage shows.
func TestActorUpdatePGWeightZero(t *testing.T) {
	b := tinyBackend(t, 0)
	r := &core.Rollout{Seqs: []core.Sequence{
		{Prompt: []int32{1, 5}, Response: []int32{7, 2}, PGWeight: []float64{0, 0}},
		{Prompt: []int32{1, 5}, Response: []int32{8, 2}, PGWeight: []float64{0, 0}},
	}}
	lp, _, err := b.ScoreLogProbs(ptrs(r), 1)
	if err != nil {
		t.Fatal(err)
	}
	r.Seqs[0].LogProbs, r.Seqs[1].LogProbs = lp[0], lp[1]
	r.Seqs[0].Advantages = []float64{1, 1}
	r.Seqs[1].Advantages = []float64{-1, -1}
	u := core.ActorUpdate{Epochs: 1, Minibatches: 1, ClipLow: 0.2, ClipHigh: 0.2, Temperature: 1}
	if _, err := b.UpdateActor(r, u); err != nil {
		t.Fatal(err)
	}
	after, _, _ := b.ScoreLogProbs(ptrs(r), 1)
	for i := range lp {
		for k := range lp[i] {
			if after[i][k] != lp[i][k] {
				t.Fatalf("seq %d token %d moved with every pg weight 0: %v -> %v", i, k, lp[i][k], after[i][k])
			}
		}
	}
	r.Seqs[0].PGWeight = []float64{1}
	if _, err := b.UpdateActor(r, u); err == nil {
		t.Fatal("a pg-weight row of the wrong length was accepted")
	}
}
