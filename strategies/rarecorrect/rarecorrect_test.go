package rarecorrect

import (
	"math"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/core/strategytest"
)

func build(t *testing.T, m map[string]any) *RareCorrect {
	t.Helper()
	s, err := core.NewStrategy("rare_correct", core.NewParams("strategies[0]", m), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s.(*RareCorrect)
}

// rollout is the batch the hand-worked cases use. Group 0: correct
// responses with solutions a, a, b, a (the last with per-token advantages
// 0.6 and 0.3), an incorrect one, and a correct one without a key (its
// answer key is empty too). Group 1: two correct responses with solution
// a, a cluster of its own (clusters are per group). Every correct
// response's advantage is 0.6 unless said; the incorrect one's -1.
func rollout() *core.Rollout {
	seq := func(g int, correct bool, sol, ans string, adv ...float64) core.Sequence {
		return core.Sequence{Group: g, Correct: correct, SolutionKey: sol, AnswerKey: ans, Response: make([]int32, len(adv)), Advantages: adv}
	}
	return &core.Rollout{Seqs: []core.Sequence{
		seq(0, true, "a", "24", 0.6, 0.6),
		seq(0, true, "a", "24", 0.6, 0.6),
		seq(0, true, "b", "24", 0.6, 0.6),
		seq(0, false, "", "23", -1, -1),
		seq(0, true, "", "", 0.6, 0.6),
		seq(0, true, "a", "24", 0.6, 0.3),
		seq(1, true, "", "a", 0.6), // no solution key: the answer key "a" serves
		seq(1, true, "", "a", 0.6),
	}}
}

// Worked by hand. alpha 1, w 1: in group 0, m(a) = 3, so f = 1/3 and the
// bonus is A (1/3 - 1) = -0.4 a token (-0.2 where A is 0.3); b is alone
// (f = 1, bonus 0); the incorrect and the keyless responses are left
// alone. Group 1: m = 2, f = 1/2, bonus -0.3. alpha 2: f(a, group 0) =
// 1/9, bonus 0.6 * (1/9 - 1) = -8/15 (-4/15 where A is 0.3); group 1: f =
// 1/4, bonus 0.6 * (-3/4) = -0.45. alpha 0: every f is 1, no bonus. (The
// trainer multiplies the bonus by the entry's weight w_t.)
func TestBonusByHand(t *testing.T) {
	for _, c := range []struct {
		name string
		m    map[string]any
		step int
		want [][]float64
	}{
		{"alpha 1", nil, 0, [][]float64{{-0.4, -0.4}, {-0.4, -0.4}, {0, 0}, {0, 0}, {0, 0}, {-0.4, -0.2}, {-0.3}, {-0.3}}},
		{"alpha 2", map[string]any{"alpha": 2.0}, 5,
			[][]float64{{-8.0 / 15, -8.0 / 15}, {-8.0 / 15, -8.0 / 15}, {0, 0}, {0, 0}, {0, 0}, {-8.0 / 15, -4.0 / 15}, {-0.45}, {-0.45}}},
		{"alpha 0", map[string]any{"alpha": 0.0}, 0, [][]float64{{0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {0}, {0}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := build(t, c.m)
			got, err := s.AdvantageBonus(core.StepInfo{Step: c.step, TotalSteps: 10}, rollout())
			if err != nil {
				t.Fatal(err)
			}
			for i := range c.want {
				for j := range c.want[i] {
					if math.Abs(got[i][j]-c.want[i][j]) > 1e-12 {
						t.Errorf("seq %d token %d: %v, want %v", i, j, got[i][j], c.want[i][j])
					}
				}
			}
		})
	}
	// Metrics: group 0 has solutions {a, b}, group 1 {a}: 1.5 a group.
	// Factors at alpha 1 over the six correct keyed responses: 1/3 (three
	// times), 1, 1/2, 1/2: mean 3/6.
	m, err := build(t, nil).Observe(core.StepInfo{}, rollout())
	if err != nil {
		t.Fatal(err)
	}
	if m["rare_correct/solutions_per_group"] != 1.5 || math.Abs(m["rare_correct/factor_mean"]-0.5) > 1e-12 {
		t.Errorf("metrics %v", m)
	}
}

func TestKeys(t *testing.T) {
	if s := build(t, nil); s.Alpha != 1 {
		t.Errorf("default alpha %v", s.Alpha)
	}
	for _, c := range []struct {
		m    map[string]any
		want string
	}{
		{map[string]any{"alpha": -0.5}, "strategies[0].alpha: must be a finite number >= 0"},
		{map[string]any{"beta": 1}, "strategies[0].beta: unknown key"},
	} {
		if _, err := core.NewStrategy("rare_correct", core.NewParams("strategies[0]", c.m), nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.m, err, c.want)
		}
	}
}

// The strategy contract (core/strategytest).
func TestConformance(t *testing.T) {
	strategytest.Run(t, func() core.Strategy { return build(t, map[string]any{"alpha": 1.0}) }, strategytest.Options{Seed: 5, Steps: 3})
}
