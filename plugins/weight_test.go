package plugins_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/plugins"
)

// TestEntryWeight: the entry's weight: schedule scales what the plugin
// returns by w_t of the call's step, and Observe reports w_t.
func TestEntryWeight(t *testing.T) {
	// linear from w0 = 3 to w_end = 1: w_t = 3 - 2 f, f = step / total.
	linear := core.WeightSchedule{Kind: "linear", W0: 3, WEnd: 1}
	weighted, _ := mustOpen(t, map[string]any{"mode": "ok", "bonus": 0.25}, func(c *plugins.Config) { c.Weight = linear })
	plain, _ := mustOpen(t, map[string]any{"mode": "ok", "bonus": 0.25}, nil)
	info, r := randomRollout(3)
	for _, tc := range []struct {
		step   int
		weight float64
	}{{5, 2}, {10, 1}, {0, 3}} {
		info.Step, info.TotalSteps = tc.step, 10
		rb, err := core.HooksOf(weighted).RewardBonus(info, r)
		if err != nil {
			t.Fatal(err)
		}
		ab, err := core.HooksOf(weighted).AdvantageBonus(info, r)
		if err != nil {
			t.Fatal(err)
		}
		for i := range r.Seqs {
			if rb[i] != 0.25*tc.weight {
				t.Fatalf("step %d: reward bonus %d = %v, want 0.25 * %v", tc.step, i, rb[i], tc.weight)
			}
			for k, x := range ab[i] {
				if x != 0.125*tc.weight {
					t.Fatalf("step %d: advantage bonus %d/%d = %v, want 0.125 * %v", tc.step, i, k, x, tc.weight)
				}
			}
		}
		m, err := core.HooksOf(weighted).Observe(info, r)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]float64{"explore/testplugin/weight": tc.weight}; !reflect.DeepEqual(m, want) {
			t.Errorf("step %d: Observe = %v, want %v", tc.step, m, want)
		}
		// Without weight: the plugin's own numbers, and no Observe hook.
		rb, err = core.HooksOf(plain).RewardBonus(info, r)
		if err != nil || rb[0] != 0.25 {
			t.Fatalf("unweighted: %v %v", rb, err)
		}
	}
	if core.HooksOf(plain).Observe != nil {
		t.Error("a plugin without Observe and without weight: is an Observer")
	}

	// The entropy coefficient: in-tree entropy with coef 0.01, entry weight 2.
	ent, _ := mustOpen(t, map[string]any{"strategy": "entropy", "params": map[string]any{"coef": 0.01}},
		func(c *plugins.Config) { c.Weight = core.WeightSchedule{Kind: "constant", W0: 2} })
	lt, err := core.HooksOf(ent).LossTerms(core.StepInfo{Step: 1, TotalSteps: 4})
	if err != nil || lt.EntropyCoef != 0.02 {
		t.Errorf("LossTerms = %+v, %v; want entropy coef 0.02", lt, err)
	}
}

// TestObservePrefix: a plugin's metric names land under explore/<name>/,
// kept when already there: ppl's explore/ppl/clip_frac stays as it is,
// outcome_ucb's outcome_ucb/pairs becomes explore/outcome_ucb/outcome_ucb/pairs.
// (A metric named like the host's weight, when the host weights, is an
// error: FuzzCheckOutputs.)
func TestObservePrefix(t *testing.T) {
	info, r := randomRollout(4)
	for _, c := range []struct {
		strategy string
		want     []string
	}{
		{"ppl", []string{"explore/ppl/clip_frac"}},
		{"outcome_ucb", []string{"explore/outcome_ucb/outcome_ucb/pairs"}},
	} {
		s, _ := mustOpen(t, map[string]any{"strategy": c.strategy}, nil)
		m, err := core.HooksOf(s).Observe(info, r)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for k := range m {
			got = append(got, k)
		}
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: metrics %v, want %v", c.strategy, got, c.want)
		}
	}
}
