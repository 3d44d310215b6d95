package xla

import (
	"math"
	"testing"

	"github.com/cde-rl/cde/core"
)

func tinyBackend(t testing.TB, heads int) *Backend {
	t.Helper()
	b, err := New(Options{Engine: "cpu", Policy: ModelConfig{Vocab: 12, Layers: 2, DModel: 16, Heads: 2, MaxLen: 32},
		ValueHeads: heads, Seed: 7, ActorLR: 1e-2, CriticLR: 1e-2, PAD: 0, EOS: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// The KV-cache sampler and the full-sequence scorer are different graphs;
// the log-probs and entropies they give for the same tokens must agree.
func TestSamplerAgreesWithScorer(t *testing.T) {
	b := tinyBackend(t, 0)
	prompts := [][]int32{{1, 5, 6}, {1, 7}, {1, 8, 9, 10, 11}, {1, 4}}
	gens, err := b.Generate(core.GenerateRequest{Prompts: prompts, Temperature: 0.7, MaxTokens: 6, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	seqs := make([]*core.Sequence, len(gens))
	for i, g := range gens {
		if len(g.Tokens) == 0 || len(g.Tokens) > 6 || len(g.LogProbs) != len(g.Tokens) {
			t.Fatalf("generation %d: %d tokens, %d log-probs", i, len(g.Tokens), len(g.LogProbs))
		}
		if g.Truncated != (g.Tokens[len(g.Tokens)-1] != 2) {
			t.Fatalf("generation %d: truncated=%v with last token %d", i, g.Truncated, g.Tokens[len(g.Tokens)-1])
		}
		seqs[i] = &core.Sequence{Prompt: prompts[i], Response: g.Tokens}
	}
	lps, ents, err := b.ScoreLogProbs(seqs, 0.7)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range gens {
		for j := range g.Tokens {
			if math.Abs(lps[i][j]-g.LogProbs[j]) > 1e-4 || math.Abs(ents[i][j]-g.Entropies[j]) > 1e-4 {
				t.Fatalf("seq %d token %d: sampler (lp %v, H %v) vs scorer (lp %v, H %v)", i, j, g.LogProbs[j], g.Entropies[j], lps[i][j], ents[i][j])
			}
			if g.LogProbs[j] > 0 || g.Entropies[j] < 0 || g.Entropies[j] > math.Log(12)+1e-5 {
				t.Fatalf("seq %d token %d: impossible lp %v or entropy %v", i, j, g.LogProbs[j], g.Entropies[j])
			}
		}
	}
	// Same seed, same tokens.
	again, _ := b.Generate(core.GenerateRequest{Prompts: prompts, Temperature: 0.7, MaxTokens: 6, Seed: 3})
	for i := range gens {
		if len(again[i].Tokens) != len(gens[i].Tokens) {
			t.Fatalf("not deterministic under seed")
		}
	}
}

// A positive advantage on a token must raise its probability after an
// actor update (and a negative one lower it).
func TestActorUpdateFollowsAdvantage(t *testing.T) {
	b := tinyBackend(t, 0)
	seqs := []core.Sequence{
		{Prompt: []int32{1, 5}, Response: []int32{7, 2}},
		{Prompt: []int32{1, 5}, Response: []int32{8, 2}},
	}
	r := &core.Rollout{Seqs: seqs}
	lp, _, err := b.ScoreLogProbs(ptrs(r), 1)
	if err != nil {
		t.Fatal(err)
	}
	r.Seqs[0].LogProbs, r.Seqs[1].LogProbs = lp[0], lp[1]
	r.Seqs[0].Advantages = []float64{1, 1}
	r.Seqs[1].Advantages = []float64{-1, -1}
	for range 5 {
		if _, err := b.UpdateActor(r, core.ActorUpdate{Epochs: 1, Minibatches: 1, ClipLow: 0.2, ClipHigh: 0.2, Temperature: 1}); err != nil {
			t.Fatal(err)
		}
	}
	after, _, _ := b.ScoreLogProbs(ptrs(r), 1)
	if !(after[0][0] > lp[0][0] && after[1][0] < lp[1][0]) {
		t.Fatalf("log-probs moved the wrong way: token 7 %v -> %v, token 8 %v -> %v", lp[0][0], after[0][0], lp[1][0], after[1][0])
	}
}

// The critic regresses towards the returns; with a head mask, a masked-out
// head does not move.
func TestCriticUpdateAndHeadMask(t *testing.T) {
	b := tinyBackend(t, 2)
	r := &core.Rollout{Seqs: []core.Sequence{{Prompt: []int32{1, 5}, Response: []int32{7, 2}}}}
	if err := b.ScoreValues(r); err != nil {
		t.Fatal(err)
	}
	before := r.Seqs[0].Values
	headParams := func() []float32 { // value/b and value/w, head 1's column
		ck, err := b.critic.snapshot()
		if err != nil {
			t.Fatal(err)
		}
		w := ck.Vars["/value/w"]
		out := []float32{ck.Vars["/value/b"].Data[1]}
		for i := 1; i < len(w.Data); i += 2 {
			out = append(out, w.Data[i])
		}
		return out
	}
	head1 := headParams()
	r.Seqs[0].Returns = []float64{1, 1}
	r.Seqs[0].HeadMask = []float64{1, 0, 1, 0}
	for range 10 {
		if _, err := b.UpdateCritic(r, core.CriticUpdate{Epochs: 1, Minibatches: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.ScoreValues(r); err != nil {
		t.Fatal(err)
	}
	after := r.Seqs[0].Values
	for t2 := range 2 {
		if math.Abs(after[2*t2]-1) >= math.Abs(before[2*t2]-1) {
			t.Fatalf("head 0 at token %d did not approach the return: %v -> %v", t2, before[2*t2], after[2*t2])
		}
	}
	// The masked head's own parameters get no gradient (the shared trunk
	// still moves, so its values may change).
	for i, v := range headParams() {
		if v != head1[i] {
			t.Fatalf("masked head 1 parameter %d moved: %v -> %v", i, head1[i], v)
		}
	}
}

// Supervised steps fit a tiny copying task: the mean token NLL falls well
// below its starting value (log 12 ~ 2.48 for uniform predictions).
func TestSupervisedStepLearns(t *testing.T) {
	b := tinyBackend(t, 0)
	var seqs []*core.Sequence
	for i := range 16 {
		x := int32(3 + i%8)
		seqs = append(seqs, &core.Sequence{Prompt: []int32{1, x}, Response: []int32{x, x, 2}})
	}
	first, err := b.SupervisedStep(seqs, 1e-2)
	if err != nil {
		t.Fatal(err)
	}
	last := first
	for range 150 {
		if last, err = b.SupervisedStep(seqs, 1e-2); err != nil {
			t.Fatal(err)
		}
	}
	if !(first > 2 && last < 0.3) {
		t.Fatalf("NLL %v -> %v: want > 2 falling below 0.3", first, last)
	}
}

// With entropy coefficient 0 the actor step runs the graph without the
// entropy term's backward (entGrad false); its update and metrics must be
// those of the full graph, bit for bit.
func TestActorStepWithoutEntropyGradient(t *testing.T) {
	step := func(full bool) (map[string]float64, map[string]checkpoint) {
		b := tinyBackend(t, 0)
		if full {
			e, err := b.policy.actorExec(actorKey{loss: core.LossPPO, entGrad: true})
			if err != nil {
				t.Fatal(err)
			}
			b.policy.actor[actorKey{loss: core.LossPPO}] = e // coefficient 0 now runs the full graph
		}
		r := confRollout(t, b, 6)
		m, err := b.UpdateActor(r, core.ActorUpdate{Epochs: 1, Minibatches: 2, ClipLow: 0.2, ClipHigh: 0.28, Temperature: 0.9, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		if full == (b.policy.actor[actorKey{loss: core.LossPPO}] != b.policy.actor[actorKey{loss: core.LossPPO, entGrad: true}]) {
			t.Fatalf("full=%v: the update ran the wrong graph", full)
		}
		return m, snapshots(t, b)
	}
	mFull, wFull := step(true)
	mCut, wCut := step(false)
	checkIdentical(t, "after one step", wFull, wCut)
	for k, v := range mFull {
		if mCut[k] != v {
			t.Errorf("metric %s: %v with the entropy gradient, %v without", k, v, mCut[k])
		}
	}
}
