package all

import (
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/cde-rl/cde/core"
)

// The core strategytest kit checks strategies, not algorithms; this is the
// contract every registered algorithm must keep (core.Algorithm), checked on
// random batches: one advantage and one return per valid token, all finite;
// the inputs untouched; the same batch twice gives the same numbers; and
// reordering the sequences only reorders the results.

func randomRollout(rng *rand.Rand, heads int) *core.Rollout {
	r := &core.Rollout{Step: 1, TotalSteps: 10, ValueHeads: heads}
	for g := range 3 {
		for range 4 + rng.IntN(3) { // 4..6 responses: grpo_passk's default k = 4 fits
			T := rng.IntN(5) // 0..4 tokens: an empty response is possible
			correct := rng.IntN(2) == 0
			s := core.Sequence{Group: 10 * g, Response: make([]int32, T), Correct: correct, Reward: -1}
			if correct {
				s.Reward = 1
			}
			s.RewardBonus = 0.3 * rng.Float64()
			s.ShapedReward = s.Reward + s.RewardBonus
			for range T {
				s.LogProbs = append(s.LogProbs, -3*rng.Float64())
				v := make([]float64, heads)
				for k := range v {
					v[k] = rng.NormFloat64()
				}
				s.Values = append(s.Values, v)
			}
			r.Seqs = append(r.Seqs, s)
		}
	}
	return r
}

func clone(r *core.Rollout) *core.Rollout {
	c := *r
	c.Seqs = make([]core.Sequence, len(r.Seqs))
	for i, s := range r.Seqs {
		s.Response = slices.Clone(s.Response)
		s.LogProbs = slices.Clone(s.LogProbs)
		s.Values = slices.Clone(s.Values)
		for t := range s.Values {
			s.Values[t] = slices.Clone(s.Values[t])
		}
		s.Advantages = slices.Clone(s.Advantages)
		s.Returns = slices.Clone(s.Returns)
		s.AdvantageBonus = slices.Clone(s.AdvantageBonus)
		c.Seqs[i] = s
	}
	return &c
}

// step runs Advantages, zero advantage bonuses and Finalize, as
// Trainer.Shape does with no strategy.
func step(t *testing.T, a core.Algorithm, r *core.Rollout) {
	t.Helper()
	if err := a.Advantages(r); err != nil {
		t.Fatalf("Advantages: %v", err)
	}
	for i := range r.Seqs {
		r.Seqs[i].AdvantageBonus = make([]float64, r.Seqs[i].Len())
	}
	if err := a.Finalize(r); err != nil {
		t.Fatalf("Finalize: %v", err)
	}
}

func TestEveryAlgorithmContract(t *testing.T) {
	names := core.Algorithms()
	for _, want := range []string{"dr_grpo", "grpo", "grpo_passk", "ppo", "reinforce_pp", "reinforce_pp_baseline", "rloo"} {
		if !slices.Contains(names, want) {
			t.Fatalf("algorithm %s is not registered by algos/all (registered: %v)", want, names)
		}
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			a, err := core.NewAlgorithm(name, core.NewParams("algorithm", nil))
			if err != nil {
				t.Fatal(err)
			}
			if a.Name() != name {
				t.Fatalf("Name() = %q, registered as %q", a.Name(), name)
			}
			rng := rand.New(rand.NewPCG(7, uint64(len(name))))
			for trial := range 20 {
				r := randomRollout(rng, 2)
				if !a.NeedsCritic() {
					for i := range r.Seqs {
						r.Seqs[i].Values = nil // a non-critic algorithm must not need them
					}
					r.ValueHeads = 0
				}
				in := clone(r)
				step(t, a, r)
				for i, s := range r.Seqs {
					if len(s.Advantages) != s.Len() || len(s.Returns) != s.Len() {
						t.Fatalf("trial %d seq %d: %d advantages, %d returns for %d tokens", trial, i, len(s.Advantages), len(s.Returns), s.Len())
					}
					for k := range s.Advantages {
						if x, y := s.Advantages[k], s.Returns[k]; math.IsNaN(x) || math.IsInf(x, 0) || math.IsNaN(y) || math.IsInf(y, 0) {
							t.Fatalf("trial %d seq %d tok %d: advantage %v return %v", trial, i, k, x, y)
						}
					}
					was := in.Seqs[i]
					if s.Group != was.Group || s.Reward != was.Reward || s.ShapedReward != was.ShapedReward || s.Correct != was.Correct ||
						!reflect.DeepEqual(s.LogProbs, was.LogProbs) || !reflect.DeepEqual(s.Values, was.Values) {
						t.Fatalf("trial %d seq %d: an input field changed", trial, i)
					}
				}
				// The same batch again: the same numbers, bit for bit.
				again := clone(in)
				step(t, a, again)
				for i := range r.Seqs {
					if !reflect.DeepEqual(again.Seqs[i].Advantages, r.Seqs[i].Advantages) || !reflect.DeepEqual(again.Seqs[i].Returns, r.Seqs[i].Returns) {
						t.Fatalf("trial %d seq %d: a second run differs", trial, i)
					}
				}
				// Sequences in reverse order: the results reversed (up to the
				// rounding of sums taken in another order).
				rev := clone(in)
				slices.Reverse(rev.Seqs)
				step(t, a, rev)
				n := len(r.Seqs)
				for i := range r.Seqs {
					got, want := rev.Seqs[n-1-i], r.Seqs[i]
					for k := range want.Advantages {
						if math.Abs(got.Advantages[k]-want.Advantages[k]) > 1e-12 || math.Abs(got.Returns[k]-want.Returns[k]) > 1e-12 {
							t.Fatalf("trial %d seq %d tok %d: reversed batch gives %v/%v, in order %v/%v", trial, i, k,
								got.Advantages[k], got.Returns[k], want.Advantages[k], want.Returns[k])
						}
					}
				}
			}
		})
	}
}
