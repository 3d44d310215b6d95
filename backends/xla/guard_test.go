package xla

import (
	"errors"
	"math"
	"testing"

	"github.com/cde-rl/cde/core"
)

// paddedRollout has responses of different lengths, so the actor batch has
// padded positions, with log-probs scored at temperature temp.
func paddedRollout(t *testing.T, b *Backend, temp float64) *core.Rollout {
	t.Helper()
	r := &core.Rollout{Seqs: []core.Sequence{
		{Prompt: []int32{1, 5}, Response: []int32{7, 2}},
		{Prompt: []int32{1, 5, 6, 9}, Response: []int32{8, 3, 4, 10, 11, 2}},
		{Prompt: []int32{1}, Response: []int32{9}},
		{Prompt: []int32{1, 4}, Response: []int32{6, 6, 2}},
	}}
	lp, _, err := b.ScoreLogProbs(ptrs(r), temp)
	if err != nil {
		t.Fatal(err)
	}
	for i := range r.Seqs {
		r.Seqs[i].LogProbs = lp[i]
		r.Seqs[i].Advantages = make([]float64, len(lp[i]))
		for j := range lp[i] {
			r.Seqs[i].Advantages[j] = float64(1 - 2*(i%2))
		}
	}
	return r
}

// At a low temperature the padded positions' targets have log-probs far
// below -88, where exp overflows float32; the actor loss and its gradient
// must stay finite (before the fix: grad norm NaN from the first step, then
// every weight NaN). The tiny random model's logits are close together, so
// it takes temperatures down to 1e-3 to get there; a trained model's
// logits got there at 0.1.
func TestLowTemperatureActorUpdateIsFinite(t *testing.T) {
	for _, temp := range []float64{1, 0.1, 0.01, 1e-3, 1e-4} {
		b := tinyBackend(t, 0)
		r := paddedRollout(t, b, temp)
		for step := range 3 {
			m, err := b.UpdateActor(r, core.ActorUpdate{Epochs: 1, Minibatches: 1, ClipLow: 0.2, ClipHigh: 0.2, Temperature: temp})
			if err != nil {
				t.Fatalf("temperature %v step %d: %v", temp, step, err)
			}
			for k, v := range m {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("temperature %v step %d: %s = %v", temp, step, k, v)
				}
			}
		}
		lp, _, err := b.ScoreLogProbs(ptrs(r), temp)
		if err != nil {
			t.Fatal(err)
		}
		for i := range lp {
			for j, v := range lp[i] {
				if math.IsNaN(v) || v > 0 {
					t.Fatalf("temperature %v: log-prob %v at sequence %d token %d after training", temp, v, i, j)
				}
			}
		}
	}
}

// A non-finite loss or an update that would make weights non-finite is
// refused: UpdateActor returns a NonFiniteError naming the quantity and the
// model is exactly as before.
func TestNonFiniteUpdateIsNotApplied(t *testing.T) {
	cases := []struct {
		name     string
		lr       float64
		poison   bool // a NaN advantage
		quantity string
	}{
		{"nan advantage", 1e-2, true, "actor/loss"},
		{"overflowing step size", 1e39, false, "weights (an updated weight or Adam moment)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := tinyBackend(t, 0)
			b.opts.ActorLR = c.lr
			r := paddedRollout(t, b, 1)
			if c.poison {
				r.Seqs[1].Advantages[2] = math.NaN()
			}
			before, err := b.policy.snapshot()
			if err != nil {
				t.Fatal(err)
			}
			_, err = b.UpdateActor(r, core.ActorUpdate{Epochs: 1, Minibatches: 1, ClipLow: 0.2, ClipHigh: 0.2, Temperature: 1})
			var nf *core.NonFiniteError
			if !errors.As(err, &nf) || nf.Quantity != c.quantity {
				t.Fatalf("got error %v, want a NonFiniteError naming %q", err, c.quantity)
			}
			after, err := b.policy.snapshot()
			if err != nil {
				t.Fatal(err)
			}
			for name, v := range before.Vars {
				w := after.Vars[name]
				for i := range v.Data {
					if math.Float32bits(v.Data[i]) != math.Float32bits(w.Data[i]) {
						t.Fatalf("%s[%d] changed %v -> %v although the update was refused", name, i, v.Data[i], w.Data[i])
					}
				}
			}
		})
	}
}

// The critic's and the supervised step's updates are guarded the same way.
func TestNonFiniteCriticAndSupervisedSteps(t *testing.T) {
	b := tinyBackend(t, 2)
	r := &core.Rollout{Seqs: []core.Sequence{{Prompt: []int32{1, 5}, Response: []int32{7, 2}}}}
	r.Seqs[0].Returns = []float64{1, math.Inf(1)}
	_, err := b.UpdateCritic(r, core.CriticUpdate{Epochs: 1, Minibatches: 1})
	var nf *core.NonFiniteError
	if !errors.As(err, &nf) || nf.Quantity != "critic/vf_loss" {
		t.Fatalf("critic: got %v, want a NonFiniteError naming critic/vf_loss", err)
	}
	_, err = b.SupervisedStep([]*core.Sequence{{Prompt: []int32{1, 5}, Response: []int32{7, 2}}}, 1e39)
	if !errors.As(err, &nf) || nf.Quantity != "weights (an updated weight or Adam moment)" {
		t.Fatalf("supervised: got %v, want a NonFiniteError naming the weights", err)
	}
}

// MaxPromptTokens is exactly the longest prompt Generate accepts.
func TestMaxPromptTokensMatchesGenerate(t *testing.T) {
	b := tinyBackend(t, 0) // MaxLen 32
	for _, resp := range []int{1, 5, 8, 13} {
		n := b.MaxPromptTokens(resp)
		prompt := func(k int) [][]int32 {
			p := make([]int32, k)
			for i := range p {
				p[i] = 3
			}
			return [][]int32{p}
		}
		if _, err := b.Generate(core.GenerateRequest{Prompts: prompt(n), Temperature: 1, MaxTokens: resp, Seed: 1}); err != nil {
			t.Fatalf("max_response %d: a prompt of MaxPromptTokens = %d failed: %v", resp, n, err)
		}
		if _, err := b.Generate(core.GenerateRequest{Prompts: prompt(n + 1), Temperature: 1, MaxTokens: resp, Seed: 1}); err == nil {
			t.Fatalf("max_response %d: a prompt of %d tokens (MaxPromptTokens+1) was accepted", resp, n+1)
		}
	}
}
