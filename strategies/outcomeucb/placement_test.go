package outcomeucb_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	_ "github.com/cde-rl/cde/algos/all"
	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/strategies/outcomeucb"
	"github.com/cde-rl/cde/trainer"
)

// These tests run the trainer's shaping path (trainer.Trainer.Shape, the
// whole of `cde-run shape`: reward hooks, the algorithm's advantages,
// advantage hooks, Finalize, after-Finalize hooks) with outcome_ucb as the
// config's one strategy entry.

// shape runs algo (default keys) with the given outcome_ucb entries (nil:
// no strategy) on r, in place, at step 0 of 10. weight, when not nil, is
// every entry's `weight:` schedule.
func shape(t *testing.T, algo string, entries []map[string]any, weight *core.WeightSchedule, r *core.Rollout) {
	t.Helper()
	a, err := core.NewAlgorithm(algo, core.NewParams("algorithm", nil))
	if err != nil {
		t.Fatal(err)
	}
	tr := &trainer.Trainer{Algo: a}
	for i, m := range entries {
		s, err := core.NewStrategy("outcome_ucb", core.NewParams(fmt.Sprintf("strategies[%d]", i), m), a)
		if err != nil {
			t.Fatal(err)
		}
		tr.Strategies = append(tr.Strategies, s)
		if weight != nil {
			tr.Weights = append(tr.Weights, *weight)
		}
	}
	r.Algorithm = algo
	info := core.StepInfo{Step: 0, TotalSteps: 10, Algorithm: algo}
	if err := tr.Shape(info, r, map[string]float64{}); err != nil {
		t.Fatal(err)
	}
}

// clone copies the fields Shape reads.
func clone(r *core.Rollout) *core.Rollout {
	c := &core.Rollout{Step: r.Step, TotalSteps: r.TotalSteps}
	for _, s := range r.Seqs {
		c.Seqs = append(c.Seqs, core.Sequence{Group: s.Group, ProblemID: s.ProblemID, AnswerKey: s.AnswerKey,
			Reward: s.Reward, Correct: s.Correct, Response: append([]int32(nil), s.Response...),
			LogProbs: append([]float64(nil), s.LogProbs...)})
	}
	return c
}

// randomBatch is 1..4 groups of 1..8 responses of 1..5 tokens; rewards
// +-1 or, in one batch in three, uniform in [-2, 2]; answers from a small
// set or none, so they repeat; two groups in three share problem p0.
func randomBatch(rng *rand.Rand) *core.Rollout {
	r := &core.Rollout{TotalSteps: 10}
	continuous := rng.IntN(3) == 0
	for g := range 1 + rng.IntN(4) {
		problem := "p0"
		if rng.IntN(3) == 0 {
			problem = fmt.Sprintf("p%d", g+1)
		}
		for range 1 + rng.IntN(8) {
			T := 1 + rng.IntN(5)
			q := core.Sequence{Group: g, ProblemID: problem, Response: make([]int32, T), LogProbs: make([]float64, T)}
			q.AnswerKey = []string{"", "3", "4", "5", "6"}[rng.IntN(5)]
			q.Correct = rng.IntN(3) == 0
			q.Reward = -1
			if q.Correct {
				q.Reward = 1
			}
			if continuous {
				q.Reward = 4*rng.Float64() - 2
			}
			r.Seqs = append(r.Seqs, q)
		}
	}
	return r
}

// handBonus is b_i of the historical form at the first step, counted here
// independently: 1/sqrt(N(problem, answer)) - b0 over the batch, 0 without
// an answer.
func handBonus(r *core.Rollout, b0 float64) []float64 {
	n := map[[2]string]int{}
	for _, q := range r.Seqs {
		if q.AnswerKey != "" {
			n[[2]string{q.ProblemID, q.AnswerKey}]++
		}
	}
	out := make([]float64, len(r.Seqs))
	for i, q := range r.Seqs {
		if q.AnswerKey != "" {
			out[i] = 1/math.Sqrt(float64(n[[2]string{q.ProblemID, q.AnswerKey}])) - b0
		}
	}
	return out
}

// Property (placement advantage, the default): on random batches, the
// shaped reward is the verifier's (nothing enters the estimator), every
// advantage is the algorithm's own advantage plus w * beta * b_i, the
// same float sum the trainer makes (so the rest is the algorithm's
// advantage bit for bit), and |A - A_algo| <= w * beta * max(1, b0) (plus
// the sum's rounding, 1e-15 * max(1, |A_algo|)). So
// beta -> 0 gives the algorithm's advantages exactly: at beta 1e-12 they
// agree within 1e-9 (the bound gives 1e-12 here). grpo is the case the
// issue names; dr_grpo and rloo have no std division, reinforce_pp whitens
// the batch in Finalize and the bonus still lands unscaled after it.
// beta = 0 is refused by the key's bounds (> 0; TestKeys).
func TestAdvantagePlacementBetaToZero(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 6))
	for _, algo := range []string{"grpo", "dr_grpo", "rloo", "reinforce_pp"} {
		for trial := range 60 {
			base := randomBatch(rng)
			want := clone(base)
			shape(t, algo, nil, nil, want)
			b0 := []float64{0, 0.5}[trial%2]
			w := []float64{1, 0.25, 3}[trial%3]
			b := handBonus(base, b0)
			for _, beta := range []float64{0.1, 1e-2, 1e-4, 1e-6, 1e-9, 1e-12} {
				r := clone(base)
				shape(t, algo, []map[string]any{{"beta": beta, "b0": b0}}, &core.WeightSchedule{Kind: "constant", W0: w}, r)
				for i := range r.Seqs {
					got, ref := &r.Seqs[i], &want.Seqs[i]
					if got.ShapedReward != ref.ShapedReward {
						t.Fatalf("%s trial %d beta %g seq %d: shaped reward %v, GRPO's %v", algo, trial, beta, i, got.ShapedReward, ref.ShapedReward)
					}
					for k := range got.Advantages {
						bonus := got.AdvantageBonus[k]
						if math.Abs(bonus-w*beta*b[i]) > 1e-15*math.Abs(w*beta*b[i]) {
							t.Fatalf("%s trial %d beta %g seq %d token %d: bonus %v, want w*beta*b = %v", algo, trial, beta, i, k, bonus, w*beta*b[i])
						}
						if got.Advantages[k] != ref.Advantages[k]+bonus {
							t.Fatalf("%s trial %d beta %g seq %d token %d: advantage %v, want %s's %v + bonus %v", algo, trial, beta, i, k, got.Advantages[k], algo, ref.Advantages[k], bonus)
						}
						if d := math.Abs(got.Advantages[k] - ref.Advantages[k]); d > w*beta*max(1, b0)+1e-15*max(1, math.Abs(ref.Advantages[k])) || beta == 1e-12 && d > 1e-9 {
							t.Fatalf("%s trial %d beta %g seq %d token %d: |A - A_%s| = %v", algo, trial, beta, i, k, algo, d)
						}
					}
				}
			}
		}
	}
}

// wrongGroup is one group of 8 wrong answers to problem p (reward -1, two
// tokens each) with the given answer keys.
func wrongGroup(answers ...string) *core.Rollout {
	r := &core.Rollout{TotalSteps: 10}
	for _, a := range answers {
		r.Seqs = append(r.Seqs, core.Sequence{ProblemID: "p", AnswerKey: a, Reward: -1, Response: []int32{1, 2}, LogProbs: []float64{-0.5, -0.5}})
	}
	return r
}

// The issue's group: 8 wrong answers, six 6s, a 7 and a 9 (this group gives
// the issue's +1.6 / -0.54). By hand: GRPO's advantage is 0 (all rewards
// equal: (r - mean)/(std + eps) = 0/1e-6), N(p,6) = 6, N(p,7) = N(p,9) =
// 1, so with placement advantage the advantage is w * beta * b_i:
// beta/sqrt(6) for a 6 (0.1/sqrt(6) = 0.040824829046386304,
// 0.001/sqrt(6) = 0.0004082482904638631) and beta for the 7 and the 9.
// Linear in beta: 0.1 and 0.001 differ by a factor 100, and weight 0.5
// halves them. A second group, five 6s, a 7, a 9 and a response with no
// answer: 0.1/sqrt(5) = 0.044721359549995794 for a 6, 0.1 for the 7 and
// the 9, 0 for the one without an answer.
func TestAllWrongGroupAdvantage(t *testing.T) {
	issue := []string{"6", "6", "6", "6", "6", "6", "7", "9"}
	for _, c := range []struct {
		answers []string
		beta, w float64
		want    []float64
	}{
		{issue, 0.1, 1, []float64{0.040824829046386304, 0.040824829046386304, 0.040824829046386304, 0.040824829046386304, 0.040824829046386304, 0.040824829046386304, 0.1, 0.1}},
		{issue, 0.001, 1, []float64{0.0004082482904638631, 0.0004082482904638631, 0.0004082482904638631, 0.0004082482904638631, 0.0004082482904638631, 0.0004082482904638631, 0.001, 0.001}},
		{issue, 0.1, 0.5, []float64{0.020412414523193152, 0.020412414523193152, 0.020412414523193152, 0.020412414523193152, 0.020412414523193152, 0.020412414523193152, 0.05, 0.05}},
		{[]string{"6", "6", "6", "6", "6", "7", "9", ""}, 0.1, 1, []float64{0.044721359549995794, 0.044721359549995794, 0.044721359549995794, 0.044721359549995794, 0.044721359549995794, 0.1, 0.1, 0}},
	} {
		r := wrongGroup(c.answers...)
		shape(t, "grpo", []map[string]any{{"beta": c.beta}}, &core.WeightSchedule{Kind: "constant", W0: c.w}, r)
		for i, q := range r.Seqs {
			for k, a := range q.Advantages {
				if math.Abs(a-c.want[i]) > 1e-15*c.want[i] {
					t.Errorf("%v beta %v w %v: seq %d token %d: advantage %v, want %v", c.answers, c.beta, c.w, i, k, a, c.want[i])
				}
			}
		}
	}
	// The factor 100, through the pipeline.
	hi, lo := wrongGroup(issue...), wrongGroup(issue...)
	shape(t, "grpo", []map[string]any{{"beta": 0.1}}, nil, hi)
	shape(t, "grpo", []map[string]any{{"beta": 0.001}}, nil, lo)
	for i := range hi.Seqs {
		if ratio := hi.Seqs[i].Advantages[0] / lo.Seqs[i].Advantages[0]; math.Abs(ratio-100) > 1e-12 {
			t.Errorf("seq %d: advantage ratio beta 0.1 / beta 0.001 = %v, want 100", i, ratio)
		}
	}
}

// placement reward keeps the old form: the bonus enters the reward and
// GRPO's std normalisation takes out its scale. By hand, u = 1/sqrt(6),
// bonuses beta*u (six) and beta (two) on reward -1: mean = -1 +
// beta(6u+2)/8, deviations beta(u-1)/4 (a 6) and 3beta(1-u)/4 (the 7, the
// 9), sample variance beta^2 (1-u)^2 * 3/14, so with eps = 1e-6
//
//	A_rare   =  3beta(1-u)/4 / (beta(1-u) sqrt(3/14) + 1e-6)
//	A_common = - beta(1-u)/4 / (beta(1-u) sqrt(3/14) + 1e-6)
//
// beta 0.1: 1.6201260303328846 and -0.5400420101109614; beta 0.001:
// 1.614292045221298 and -0.5380973484070993; both tend to sqrt(42)/4 =
// 1.620185174601965 and -sqrt(14/3)/4 = -0.5400617248673217, whatever
// beta: the issue's +1.6 / -0.54, the advantage of a correct answer in a
// mixed group.
func TestRewardPlacementKeepsOldNumbers(t *testing.T) {
	for _, c := range []struct {
		beta, rare, common float64
	}{
		{0.1, 1.6201260303328846, -0.5400420101109614},
		{0.001, 1.614292045221298, -0.5380973484070993},
	} {
		r := wrongGroup("6", "6", "6", "6", "6", "6", "7", "9")
		shape(t, "grpo", []map[string]any{{"beta": c.beta, "placement": "reward"}}, nil, r)
		for i, q := range r.Seqs {
			want := c.common
			if i >= 6 {
				want = c.rare
			}
			for k, a := range q.Advantages {
				if math.Abs(a-want) > 1e-9 {
					t.Errorf("beta %v seq %d token %d: advantage %v, want %v", c.beta, i, k, a, want)
				}
			}
			if q.AdvantageBonus[0] != 0 {
				t.Errorf("beta %v seq %d: advantage bonus %v, want 0 (a reward bonus)", c.beta, i, q.AdvantageBonus[0])
			}
		}
	}
}

// The counts are the same in both placements: three steps of random
// batches through the pipeline leave identical checkpoints and metrics.
func TestPlacementsCountAlike(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var states [2][]byte
	var metrics [2]map[string]float64
	batches := []*core.Rollout{randomBatch(rng), randomBatch(rng), randomBatch(rng)}
	for j, placement := range outcomeucb.Placements {
		a, _ := core.NewAlgorithm("grpo", core.NewParams("algorithm", nil))
		s, err := core.NewStrategy("outcome_ucb", core.NewParams("strategies[0]", map[string]any{"placement": placement}), a)
		if err != nil {
			t.Fatal(err)
		}
		tr := &trainer.Trainer{Algo: a, Strategies: []core.Strategy{s}}
		for step, b := range batches {
			r := clone(b)
			r.Algorithm = "grpo"
			info := core.StepInfo{Step: step, TotalSteps: 10, Algorithm: "grpo"}
			if err := tr.Shape(info, r, map[string]float64{}); err != nil {
				t.Fatal(err)
			}
			if metrics[j], err = s.(core.Observer).Observe(info, r); err != nil {
				t.Fatal(err)
			}
		}
		if states[j], err = s.(core.Stateful).SaveState(); err != nil {
			t.Fatal(err)
		}
	}
	if string(states[0]) != string(states[1]) {
		t.Errorf("states differ:\nadvantage %s\nreward    %s", states[0], states[1])
	}
	if fmt.Sprint(metrics[0]) != fmt.Sprint(metrics[1]) || metrics[0]["outcome_ucb/pairs"] == 0 {
		t.Errorf("metrics: advantage %v, reward %v", metrics[0], metrics[1])
	}
}
