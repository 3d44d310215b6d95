package maxrl

import (
	"math"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12 }

// Worked by hand, with r_inc = -1 and r_cor = 1 unless a case says.
func TestEstimate(t *testing.T) {
	for _, c := range []struct {
		name     string
		rewards  []float64
		groups   [][]int
		inc, cor float64
		want     []float64
	}{
		// u = 1, 0, 0, 0; mean 1/4: A = 0.75/0.250001 and -0.25/0.250001.
		{"one correct of four", []float64{1, -1, -1, -1}, [][]int{{0, 1, 2, 3}}, -1, 1,
			[]float64{0.75 / 0.250001, -0.25 / 0.250001, -0.25 / 0.250001, -0.25 / 0.250001}},
		{"none correct", []float64{-1, -1}, [][]int{{0, 1}}, -1, 1, []float64{0, 0}},
		// u = 1 everywhere: mean 1, A = 0.
		{"all correct", []float64{1, 1, 1}, [][]int{{0, 1, 2}}, -1, 1, []float64{0, 0, 0}},
		// Shaped: u = 2.2/2 = 1.1 and 0.2/2 = 0.1; mean 0.6.
		{"shaped", []float64{1.2, -0.8}, [][]int{{0, 1}}, -1, 1, []float64{0.5 / 0.600001, -0.5 / 0.600001}},
		// Below r_inc: u = -0.25, -0.05, mean -0.15 <= 0: no signal.
		{"negative mean", []float64{-1.5, -1.1}, [][]int{{0, 1}}, -1, 1, []float64{0, 0}},
		// Rewards 0 and 1: u = 1, 0, mean 0.5.
		{"levels 0 and 1", []float64{1, 0}, [][]int{{0, 1}}, 0, 1, []float64{0.5 / 0.500001, -0.5 / 0.500001}},
		// Two groups interleaved, index 4 in none.
		{"groups", []float64{1, 1, -1, -1, 7}, [][]int{{0, 2}, {1, 3}}, -1, 1,
			[]float64{0.5 / 0.500001, 0.5 / 0.500001, -0.5 / 0.500001, -0.5 / 0.500001, 0}},
	} {
		got := Estimate(c.rewards, c.groups, c.inc, c.cor)
		for i := range got {
			if !near(got[i], c.want[i]) {
				t.Errorf("%s: A[%d] = %.15g, want %.15g", c.name, i, got[i], c.want[i])
			}
		}
	}
}

// The task's reward levels replace the defaults; a key set to another
// value is an error naming it; bad keys are errors naming them.
func TestRewardLevels(t *testing.T) {
	a, err := core.NewAlgorithm("maxrl", core.NewParams("algorithm", map[string]any{"name": "maxrl"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.(core.RewardLevelsUser).UseRewardLevels(0, 1); err != nil {
		t.Fatal(err)
	}
	r := &core.Rollout{Seqs: []core.Sequence{{Group: 1, Response: []int32{5, 6}, ShapedReward: 1}, {Group: 1, Response: []int32{5}, ShapedReward: 0}}}
	if err := a.Advantages(r); err != nil {
		t.Fatal(err)
	}
	if w := 0.5 / 0.500001; !near(r.Seqs[0].Advantages[1], w) || !near(r.Seqs[1].Advantages[0], -w) || r.Seqs[0].Returns[0] != r.Seqs[0].Advantages[0] {
		t.Errorf("advantages %v %v", r.Seqs[0].Advantages, r.Seqs[1].Advantages)
	}
	set, err := core.NewAlgorithm("maxrl", core.NewParams("algorithm", map[string]any{"correct_reward": 2.0}))
	if err != nil {
		t.Fatal(err)
	}
	if err := set.(core.RewardLevelsUser).UseRewardLevels(-1, 1); err == nil || !strings.Contains(err.Error(), "algorithm.correct_reward = 2, but the task rewards a correct answer 1") {
		t.Errorf("a key against the task: %v", err)
	}
	for _, c := range []struct {
		m    map[string]any
		want string
	}{
		{map[string]any{"correct_reward": -1.0}, "algorithm.correct_reward: must be greater than incorrect_reward"},
		{map[string]any{"beta": 1.0}, "algorithm.beta"},
	} {
		if _, err := core.NewAlgorithm("maxrl", core.NewParams("algorithm", c.m)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.m, err, c.want)
		}
	}
}
