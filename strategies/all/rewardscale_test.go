package all_test

import (
	"fmt"
	"math"
	"slices"
	"testing"

	_ "github.com/cde-rl/cde/algos/all"
	"github.com/cde-rl/cde/core"
	_ "github.com/cde-rl/cde/strategies/all"
	"github.com/cde-rl/cde/trainer"
)

// The property of issue 43: in a group whose responses are all wrong, the
// verifier rewards are equal, so a bonus is the only thing that differs
// between the responses. A reward bonus enters before the estimator; under
// GRPO's std normalisation ((r~ - mean_g) / (std_g + eps)) its scale
// cancels and only its spread across the group counts: a coefficient 10
// times smaller gives the same advantages (up to eps). Under an estimator
// without a std division (dr_grpo, rloo) the advantages scale with the
// coefficient. An advantage bonus added beside the advantage (outcome_ucb's
// default placement) scales under every estimator. docs/algorithms.md
// states this for each reward-bonus strategy, naming this test.
//
// The coefficient is each strategy's own key (ppl alpha, simhash beta,
// elliptical beta, outcome_ucb beta) and, separately, the entry's weight
// w_t, which the trainer multiplies every bonus by. A registered strategy
// paying a reward bonus that scaleCases does not list gets a derived case
// (cases): its default keys, scaled by the weight alone, so a new strategy
// is measured without editing this file and fails only if the property
// fails; listing it adds its own coefficient and its gates.

// scaleCase is one strategy entry with the key that scales its bonus.
type scaleCase struct {
	name   string         // the test's label
	params map[string]any // the entry's keys, less the coefficient
	key    string         // the coefficient's key
	c      float64        // its larger value; the smaller is c/10
	// zero: the bonus is 0 in an all-wrong group (a gate), so every
	// estimator gives 0 whatever the coefficient.
	zero bool
	// reward: a reward bonus (else an advantage bonus beside the
	// advantage, which scales under every estimator).
	reward bool
	// derived: a case made for a strategy scaleCases does not list (key
	// is then ""): its bonus may be gated or not spread over the group,
	// which the test cannot tell apart, so advantages of 0 at both scales
	// pass.
	derived bool
}

// scaleCases lists the in-tree strategies with a reward bonus, by their
// coefficient keys and gates (and the advantage placement of outcome_ucb,
// for contrast). A reward-bonus strategy missing here is still measured,
// by a derived case (cases).
var scaleCases = []scaleCase{
	// alpha * B_actor stays below the |r|/kappa = 1/3 cap for these log-probs.
	{name: "ppl", params: map[string]any{}, key: "alpha", c: 1, reward: true},
	{name: "simhash", params: map[string]any{"bits": 16}, key: "beta", c: 1, reward: true},
	{name: "simhash/correct_only", params: map[string]any{"correct_only": true}, key: "beta", c: 1, zero: true, reward: true},
	{name: "elliptical/gate_none_correct=false", params: map[string]any{"gate_none_correct": false}, key: "beta", c: 0.1, reward: true},
	{name: "elliptical", params: map[string]any{}, key: "beta", c: 0.1, zero: true, reward: true},
	{name: "outcome_ucb/placement=reward", params: map[string]any{"placement": "reward"}, key: "beta", c: 0.1, reward: true},
	{name: "outcome_ucb/mode=batch,placement=reward", params: map[string]any{"placement": "reward", "mode": "batch"}, key: "beta", c: 0.1, reward: true},
	{name: "outcome_ucb", params: map[string]any{}, key: "beta", c: 0.1},
	{name: "outcome_ucb/mode=batch", params: map[string]any{"mode": "batch"}, key: "beta", c: 0.1},
}

// cases is scaleCases plus a derived case for every registered strategy
// that pays a reward bonus with its default keys under grpo and is not
// listed (rewardStrategies).
func cases(t *testing.T) []scaleCase {
	t.Helper()
	listed := map[string]bool{}
	for _, c := range scaleCases {
		listed[strategyName(c.name)] = true
	}
	out := slices.Clone(scaleCases)
	for _, name := range rewardStrategies(t) {
		if !listed[name] {
			out = append(out, scaleCase{name: name, params: map[string]any{}, c: 1, reward: true, derived: true})
		}
	}
	return out
}

// rewardStrategies lists the registered strategies that pay a reward bonus
// when built from their default keys under grpo (else ppo); one that
// builds under neither is an error.
func rewardStrategies(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, name := range core.Strategies() {
		var s core.Strategy
		var err error
		for _, algo := range []string{"grpo", "ppo"} {
			a, aerr := core.NewAlgorithm(algo, core.NewParams("algorithm", nil))
			if aerr != nil {
				t.Fatal(aerr)
			}
			if s, err = core.NewStrategy(name, core.NewParams("strategies[0]", nil), a); err == nil {
				break
			}
		}
		if err != nil {
			t.Errorf("%s: does not build with its defaults under grpo or ppo: %v", name, err)
			continue
		}
		if core.HooksOf(s).RewardBonus != nil {
			out = append(out, name)
		}
		if err := core.CloseAll([]core.Strategy{s}); err != nil {
			t.Errorf("%s: close: %v", name, err)
		}
	}
	return out
}

// strategyName is the registry name of a case ("simhash/correct_only" is
// simhash).
func strategyName(label string) string {
	for i, ch := range label {
		if ch == '/' {
			return label[:i]
		}
	}
	return label
}

// allWrong is one group of 8 wrong responses (reward -1) to problem p,
// answers six 6s, a 7 and a 9 (the group); the first six share an
// embedding and the last two differ, so count-based and representation
// bonuses spread too; log-probs differ per response (mean NLL 0.05 to
// 0.26), so the perplexity bonus spreads; lengths of 2 to 4 tokens (below
// maxResponseTokens) and entropies differ too, for a new strategy's
// derived case.
func allWrong() *core.Rollout {
	r := &core.Rollout{TotalSteps: 10}
	answers := []string{"6", "6", "6", "6", "6", "6", "7", "9"}
	for i, a := range answers {
		emb := []float64{1, -0.5, 0.25, 2, -1, 0.5, 0.75, -2}
		if i >= 6 {
			for j := range emb {
				emb[j] = float64((i*7+j*3)%5) - 2 + 0.1*float64(j)
			}
		}
		lp := -0.05 - 0.03*float64(i)
		T := 2 + i%3
		s := core.Sequence{Group: 0, ProblemID: "p", AnswerKey: a, Reward: -1, Embedding: emb,
			Text: fmt.Sprintf("the answer is %s", a), Response: make([]int32, T), LogProbs: make([]float64, T), Entropies: make([]float64, T)}
		for k := range T {
			s.Response[k], s.LogProbs[k], s.Entropies[k] = int32(1+k), lp, 0.5+0.1*float64(i)
		}
		r.Seqs = append(r.Seqs, s)
	}
	return r
}

// maxResponseTokens is StepInfo.MaxResponseTokens of the shaping step.
const maxResponseTokens = 8

// advantages shapes allWrong with algo and one entry of c (coefficient
// coef under key, weight w), through the trainer's shaping path, and
// returns each response's first-token advantage (outcome estimators copy
// one number to every token).
func advantages(t *testing.T, algo string, c scaleCase, coef, w float64) []float64 {
	t.Helper()
	a, err := core.NewAlgorithm(algo, core.NewParams("algorithm", nil))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]any{}
	if c.key != "" {
		m[c.key] = coef
	}
	for k, v := range c.params {
		m[k] = v
	}
	s, err := core.NewStrategy(strategyName(c.name), core.NewParams("strategies[0]", m), a)
	if err != nil {
		t.Fatal(err)
	}
	if ok := core.HooksOf(s).RewardBonus != nil; ok != c.reward {
		t.Fatalf("%s: reward hook %v, the case says %v", c.name, ok, c.reward)
	}
	tr := &trainer.Trainer{Algo: a, Strategies: []core.Strategy{s}, Weights: []core.Schedule{core.WeightSchedule{Kind: "constant", W0: w}}}
	r := allWrong()
	r.Algorithm = algo
	defer core.CloseAll([]core.Strategy{s})
	info := core.StepInfo{Step: 0, TotalSteps: 10, Algorithm: algo, Seed: 1, MaxResponseTokens: maxResponseTokens}
	if err := tr.Shape(info, r, map[string]float64{}); err != nil {
		t.Fatal(err)
	}
	out := make([]float64, len(r.Seqs))
	for i := range r.Seqs {
		out[i] = r.Seqs[i].Advantages[0]
	}
	return out
}

func maxAbs(x []float64) float64 {
	m := 0.0
	for _, v := range x {
		m = max(m, math.Abs(v))
	}
	return m
}

// TestRewardBonusScaleInAllWrongGroups measures the advantages of the
// all-wrong group at a coefficient c and at c/10 (the strategy's key, and
// the entry's weight 1 and 0.1), and asserts what docs/algorithms.md says:
// under grpo a reward bonus's scale cancels (the two agree within 1% of the
// advantages, the gap GRPO's eps = 1e-6 leaves, where scaling would give a
// factor 10); under dr_grpo and rloo it scales (factor 10 within 1e-9); an
// advantage bonus beside the advantage scales under all three; a gated
// bonus (0 in an all-wrong group) gives 0. A derived case (a strategy not
// in scaleCases) is measured by its weight only.
func TestRewardBonusScaleInAllWrongGroups(t *testing.T) {
	for _, c := range cases(t) {
		for _, algo := range []string{"grpo", "dr_grpo", "rloo"} {
			for _, by := range []string{c.key, "weight"} {
				if by == "" {
					continue // a derived case: no coefficient key known
				}
				t.Run(fmt.Sprintf("%s/%s/%s", c.name, algo, by), func(t *testing.T) {
					var hi, lo []float64
					if by == "weight" {
						hi, lo = advantages(t, algo, c, c.c, 1), advantages(t, algo, c, c.c, 0.1)
					} else {
						hi, lo = advantages(t, algo, c, c.c, 1), advantages(t, algo, c, c.c/10, 1)
					}
					size := maxAbs(hi)
					switch {
					case c.zero:
						if size != 0 || maxAbs(lo) != 0 {
							t.Fatalf("gated bonus: advantages %v and %v, want 0", hi, lo)
						}
						return
					case c.derived && size == 0 && maxAbs(lo) == 0:
						return // gated, or equal over the group: nothing to scale
					case size < 1e-6:
						t.Fatalf("advantages %v: the bonus does not spread over the group, nothing measured", hi)
					}
					cancels := c.reward && algo == "grpo"
					for i := range hi {
						if cancels && math.Abs(hi[i]-lo[i]) > 0.01*size {
							t.Errorf("seq %d: advantage %v at %s %v, %v at a tenth: want the same (the scale cancels under grpo)", i, hi[i], by, c.c, lo[i])
						}
						if !cancels && math.Abs(hi[i]-10*lo[i]) > 1e-9*size {
							t.Errorf("seq %d: advantage %v at %s %v, %v at a tenth: want a factor 10", i, hi[i], by, c.c, lo[i])
						}
					}
				})
			}
		}
	}
}

// TestRewardBonusesListed: every registered strategy that pays a reward
// bonus with its default keys is measured (a listed case, or a derived one
// scaled by its weight), and every listed case names a registered
// strategy, outcome_ucb's reward placement among them.
func TestRewardBonusesListed(t *testing.T) {
	measured := map[string]bool{}
	for _, c := range cases(t) {
		if c.reward {
			measured[strategyName(c.name)] = true
		}
	}
	for _, name := range rewardStrategies(t) {
		if !measured[name] {
			t.Errorf("%s pays a reward bonus and is not measured", name)
		}
	}
	for _, c := range scaleCases {
		if !slices.Contains(core.Strategies(), strategyName(c.name)) {
			t.Errorf("scaleCases: %s is not a registered strategy", c.name)
		}
	}
	if !slices.Contains(core.Strategies(), "outcome_ucb") || !measured["outcome_ucb"] {
		t.Error("outcome_ucb's reward placement is not listed")
	}
}
