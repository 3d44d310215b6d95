package outcomeucb

import (
	"math"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/core/strategytest"
)

func build(t *testing.T, m map[string]any) core.Strategy {
	t.Helper()
	s, err := core.NewStrategy("outcome_ucb", core.NewParams("strategies[0]", m), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// inner is the shared state behind either placement.
func inner(s core.Strategy) *OutcomeUCB {
	switch v := s.(type) {
	case *Advantage:
		return v.OutcomeUCB
	case *Reward:
		return v.OutcomeUCB
	}
	return nil
}

// perResponse calls the one hook s implements and returns one number per
// response: the reward bonus, or the advantage bonus, which must be the
// same on every token of a response (0 for a response of no tokens).
func perResponse(t *testing.T, s core.Strategy, info core.StepInfo, r *core.Rollout) []float64 {
	t.Helper()
	switch h := s.(type) {
	case core.RewardHook:
		b, err := h.RewardBonus(info, r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	case core.AdvantageHook:
		rows, err := h.AdvantageBonus(info, r)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]float64, len(rows))
		for i, row := range rows {
			if len(row) != r.Seqs[i].Len() {
				t.Fatalf("row %d: %d entries for %d tokens", i, len(row), r.Seqs[i].Len())
			}
			for k, x := range row {
				if x != row[0] {
					t.Fatalf("row %d token %d: %v, token 0 %v: a response's bonus is one number", i, k, x, row[0])
				}
			}
			if len(row) > 0 {
				out[i] = row[0]
			}
		}
		return out
	}
	t.Fatalf("%T implements neither hook", s)
	return nil
}

// Worked by hand with beta 0.5, weight 1. Step 0: problem p answers 4, 4,
// 5, "" (no answer) and problem q answers 4: N(p,4) = 2, N(p,5) = 1,
// N(q,4) = 1, so bonuses 0.5/sqrt2, 0.5/sqrt2, 0.5, 0, 0.5. Step 1: p
// answers 5 and 6: N(p,5) = 2, N(p,6) = 1: 0.5/sqrt2 and 0.5. The same
// numbers and counts in both placements (one as a reward bonus, one on
// every token of the response); the counts of one placement's checkpoint
// load into the other.
func TestBonusByHand(t *testing.T) {
	for _, placement := range Placements {
		t.Run(placement, func(t *testing.T) {
			s := build(t, map[string]any{"beta": 0.5, "placement": placement})
			seq := func(p, a string, T int) core.Sequence {
				return core.Sequence{ProblemID: p, AnswerKey: a, Response: make([]int32, T)}
			}
			r0 := &core.Rollout{Seqs: []core.Sequence{seq("p", "4", 1), seq("p", "4", 3), seq("p", "5", 2), seq("p", "", 1), seq("q", "4", 1)}}
			got := perResponse(t, s, core.StepInfo{Step: 0, TotalSteps: 10}, r0)
			h := 0.5 / math.Sqrt2
			for i, want := range []float64{h, h, 0.5, 0, 0.5} {
				if math.Abs(got[i]-want) > 1e-15 {
					t.Errorf("step 0 seq %d: %v, want %v", i, got[i], want)
				}
			}
			r1 := &core.Rollout{Seqs: []core.Sequence{seq("p", "5", 1), seq("p", "6", 1)}}
			got = perResponse(t, s, core.StepInfo{Step: 1, TotalSteps: 10}, r1)
			if math.Abs(got[0]-h) > 1e-15 || got[1] != 0.5 {
				t.Errorf("step 1: %v, want [%v 0.5]", got, h)
			}
			m, _ := s.(core.Observer).Observe(core.StepInfo{Step: 1}, r1)
			if m["outcome_ucb/pairs"] != 4 || m["outcome_ucb/answers_per_problem"] != 2 {
				t.Errorf("metrics %v", m)
			}

			// The counts survive a checkpoint, into either placement.
			data, err := s.(core.Stateful).SaveState()
			if err != nil {
				t.Fatal(err)
			}
			for _, to := range Placements {
				s2 := build(t, map[string]any{"beta": 0.5, "placement": to})
				if err := s2.(core.Stateful).LoadState(data); err != nil {
					t.Fatal(err)
				}
				if c := inner(s2); c.Count("p", "4") != 2 || c.Count("p", "5") != 2 || c.Count("p", "6") != 1 || c.Count("q", "4") != 1 {
					t.Errorf("restored into %s: counts %v", to, c.counts)
				}
				for _, bad := range []string{`{"version": 2}`, `{"version": 1, "counts": [{"problem": "p", "answer": "a", "n": 0}]}`,
					`{"version": 1, "counts": [{"problem": "p", "answer": "a", "n": 1}, {"problem": "p", "answer": "a", "n": 2}]}`, `nope`} {
					if err := s2.(core.Stateful).LoadState([]byte(bad)); err == nil {
						t.Errorf("state %s loaded", bad)
					}
				}
			}
		})
	}
}

// Each placement is called through exactly one hook: the default
// (advantage) is an advantage hook called after Finalize, reward a reward
// hook.
func TestPlacementHooks(t *testing.T) {
	for _, c := range []struct {
		m                  map[string]any
		reward, adv, after bool
	}{
		{nil, false, true, true},
		{map[string]any{"placement": "advantage"}, false, true, true},
		{map[string]any{"placement": "reward"}, true, false, false},
	} {
		s := build(t, c.m)
		_, reward := s.(core.RewardHook)
		_, adv := s.(core.AdvantageHook)
		a, ok := s.(core.AfterFinalizer)
		after := ok && a.AfterFinalize()
		if reward != c.reward || adv != c.adv || after != c.after {
			t.Errorf("%v: %T: reward hook %v, advantage hook %v, after Finalize %v; want %v, %v, %v", c.m, s, reward, adv, after, c.reward, c.adv, c.after)
		}
		if _, ok := s.(core.Stateful); !ok {
			t.Errorf("%v: not Stateful", c.m)
		}
	}
}

func TestKeys(t *testing.T) {
	if b := inner(build(t, nil)); b.Beta != 0.1 || b.Placement != "advantage" {
		t.Errorf("default beta %v, placement %q", b.Beta, b.Placement)
	}
	for _, c := range []struct {
		m    map[string]any
		want string
	}{
		{map[string]any{"beta": 0.0}, "strategies[0].beta: must be a finite number > 0"},
		{map[string]any{"mode": "episodic"}, `strategies[0].mode: must be historical or batch, got "episodic"`},
		{map[string]any{"b0": -0.1}, "strategies[0].b0: must be a finite number >= 0"},
		{map[string]any{"mode": "batch", "b0": 0.5}, "strategies[0].b0: applies to mode historical only"},
		{map[string]any{"placement": "token"}, `strategies[0].placement: must be advantage or reward, got "token"`},
		{map[string]any{"placement": 1}, "strategies[0].placement"},
		{map[string]any{"bits": 3}, "strategies[0].bits: unknown key"},
	} {
		if _, err := core.NewStrategy("outcome_ucb", core.NewParams("strategies[0]", c.m), nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.m, err, c.want)
		}
	}
}

// UCB-Con by hand: beta 0.5, b0 0.5. Answers 4, 4, 5 to p: N(p,4) = 2
// gives 0.5 * (1/sqrt2 - 0.5) = 0.10355339059327379, N(p,5) = 1 gives
// 0.5 * (1 - 0.5) = 0.25. Three more 4s at the next step: N(p,4) = 5,
// 0.5 * (1/sqrt5 - 0.5) = -0.02639320225002102 (seen more than 4 times:
// negative).
func TestBaselineByHand(t *testing.T) {
	for _, placement := range Placements {
		t.Run(placement, func(t *testing.T) { baselineByHand(t, placement) })
	}
}

func baselineByHand(t *testing.T, placement string) {
	s := build(t, map[string]any{"beta": 0.5, "b0": 0.5, "placement": placement})
	seq := func(a string) core.Sequence {
		return core.Sequence{ProblemID: "p", AnswerKey: a, Response: []int32{1, 2}}
	}
	got := perResponse(t, s, core.StepInfo{}, &core.Rollout{Seqs: []core.Sequence{seq("4"), seq("4"), seq("5")}})
	for i, want := range []float64{0.10355339059327379, 0.10355339059327379, 0.25} {
		if math.Abs(got[i]-want) > 1e-15 {
			t.Errorf("step 0 seq %d: %v, want %v", i, got[i], want)
		}
	}
	got = perResponse(t, s, core.StepInfo{Step: 1}, &core.Rollout{Seqs: []core.Sequence{seq("4"), seq("4"), seq("4")}})
	for i := range got {
		if math.Abs(got[i]-(-0.02639320225002102)) > 1e-15 {
			t.Errorf("step 1 seq %d: %v, want -0.02639320225002102", i, got[i])
		}
	}
}

// The batch form by hand, beta 0.4. Group 0 (n = 5) answers 4, 4, 4, 7
// and nothing: each 4 has two others, -0.4 * 2/5 = -0.16; the 7 has none,
// 0; no answer, 0. Group 1 (n = 2) answers 4, 4: -0.4 * 1/2 = -0.2 (the 4s
// of group 0 do not count: the batch is the prompt's group). Nothing is
// remembered: the same rollout again gets the same penalties.
func TestBatchByHand(t *testing.T) {
	for _, placement := range Placements {
		t.Run(placement, func(t *testing.T) { batchByHand(t, placement) })
	}
}

func batchByHand(t *testing.T, placement string) {
	s := build(t, map[string]any{"beta": 0.4, "mode": "batch", "placement": placement})
	seq := func(g int, a string) core.Sequence {
		return core.Sequence{Group: g, ProblemID: "p", AnswerKey: a, Response: []int32{1}}
	}
	r := &core.Rollout{Seqs: []core.Sequence{seq(0, "4"), seq(1, "4"), seq(0, "4"), seq(0, "7"), seq(0, ""), seq(1, "4"), seq(0, "4")}}
	want := []float64{-0.16, -0.2, -0.16, 0, 0, -0.2, -0.16}
	for step := range 2 {
		got := perResponse(t, s, core.StepInfo{Step: step}, r)
		for i := range want {
			if math.Abs(got[i]-want[i]) > 1e-15 {
				t.Errorf("step %d seq %d: %v, want %v", step, i, got[i], want[i])
			}
		}
	}
	// Distinct answers: group 0 has {4, 7}, group 1 {4}: mean 1.5.
	if m, _ := s.(core.Observer).Observe(core.StepInfo{}, r); m["outcome_ucb/distinct_answers_per_group"] != 1.5 {
		t.Errorf("metrics %v", m)
	}
}

// The strategy contract (core/strategytest), on rollouts with repeating
// answers, in both modes and both placements.
func TestConformance(t *testing.T) {
	for _, placement := range Placements {
		for _, mode := range []string{"historical", "batch"} {
			t.Run(placement+"/"+mode, func(t *testing.T) {
				m := map[string]any{"beta": 0.3, "mode": mode, "placement": placement}
				strategytest.Run(t, func() core.Strategy { return build(t, m) }, strategytest.Options{Seed: 3, Steps: 4})
			})
		}
	}
}
