package elliptical

import (
	"math"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/core/strategytest"
)

// Worked by hand. One dimension, states 2 and 0: centred +-1, A = 0.01 + 1
// + 1 = 2.01, leverage 1/2.01 each. Two dimensions, lambda 1, states
// (1,0), (0,1), (0,0): mean (1/3, 1/3); centred x1 = (2/3, -1/3), x2 =
// (-1/3, 2/3), x3 = (-1/3, -1/3); sum x x^T = [[2/3, -1/3], [-1/3, 2/3]];
// A = [[5/3, -1/3], [-1/3, 5/3]], det 8/3, A^-1 = [[5/8, 1/8], [1/8, 5/8]];
// x1^T A^-1 x1 = (2/3)(9/24) + (-1/3)(-3/24) = 7/24, likewise x2, and
// x3^T A^-1 x3 = 2 (1/3)(6/24) = 1/6.
func TestBonusesByHand(t *testing.T) {
	for _, c := range []struct {
		name     string
		phis     [][]float64
		lambda   float64
		leverage bool
		want     []float64
	}{
		{"1-d leverage", [][]float64{{2}, {0}}, 0.01, true, []float64{1 / 2.01, 1 / 2.01}},
		{"1-d sqrt", [][]float64{{2}, {0}}, 0.01, false, []float64{math.Sqrt(1 / 2.01), math.Sqrt(1 / 2.01)}},
		{"2-d leverage", [][]float64{{1, 0}, {0, 1}, {0, 0}}, 1, true, []float64{7.0 / 24, 7.0 / 24, 1.0 / 6}},
		{"one response", [][]float64{{3, 4}}, 1, true, []float64{0}},
	} {
		got := Bonuses(c.phis, c.lambda, c.leverage)
		for i := range got {
			if math.Abs(got[i]-c.want[i]) > 1e-12 {
				t.Errorf("%s: B[%d] = %.15g, want %.15g", c.name, i, got[i], c.want[i])
			}
		}
	}
}

// RewardBonus: w_t * beta * B per group, 0 for a group with no correct
// response (unless gate_none_correct is off), with the identity as
// projection so the numbers are the hand-worked ones above.
func TestRewardBonus(t *testing.T) {
	build := func(m map[string]any) *Elliptical {
		s, err := core.NewStrategy("elliptical", core.NewParams("strategies[0]", m), nil)
		if err != nil {
			t.Fatal(err)
		}
		e := s.(*Elliptical)
		e.fixedProjection = [][]float64{{1}}
		return e
	}
	r := &core.Rollout{Seqs: []core.Sequence{
		{Group: 0, Embedding: []float64{2}, Correct: true}, {Group: 0, Embedding: []float64{0}},
		{Group: 1, Embedding: []float64{5}}, {Group: 1, Embedding: []float64{1}},
	}}
	e := build(map[string]any{"beta": 0.5, "form": "leverage"})
	got, err := e.RewardBonus(core.StepInfo{Step: 0, TotalSteps: 4}, r)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []float64{0.5 / 2.01, 0.5 / 2.01, 0, 0} {
		if math.Abs(got[i]-want) > 1e-15 {
			t.Errorf("seq %d: %v, want %v", i, got[i], want)
		}
	}
	m, _ := e.Observe(core.StepInfo{}, r)
	if math.Abs(m["elliptical/bonus_raw_mean"]-1/2.01) > 1e-15 {
		t.Errorf("metrics %v", m)
	}
	// Without the gate, group 1 (states 5 and 1, centred +-2; A = 0.01 + 8)
	// gets 4/8.01 each.
	open := build(map[string]any{"beta": 0.5, "form": "leverage", "gate_none_correct": false})
	got, _ = open.RewardBonus(core.StepInfo{Step: 0, TotalSteps: 4}, r)
	if math.Abs(got[2]-0.5*4/8.01) > 1e-12 {
		t.Errorf("ungated: %v", got)
	}
	if _, err := e.RewardBonus(core.StepInfo{}, &core.Rollout{Seqs: []core.Sequence{{Embedding: []float64{1}}, {Embedding: nil}}}); err == nil ||
		!strings.Contains(err.Error(), "sequence 1: embedding of length 0") {
		t.Errorf("a missing embedding: %v", err)
	}
}

// The projection: scikit-learn's "auto" density s = 1/sqrt(d), entries
// +-sqrt(1/(s k)) or 0; fixed by (seed, step), new at another step.
func TestProjection(t *testing.T) {
	k, d := 8, 400
	p := Projection(1, 3, k, d)
	v := math.Sqrt(1 / (0.05 * float64(k)))
	nonzero := 0
	for _, row := range p {
		for _, x := range row {
			switch {
			case x == 0:
			case math.Abs(math.Abs(x)-v) < 1e-12:
				nonzero++
			default:
				t.Fatalf("entry %v, want 0 or +-%v", x, v)
			}
		}
	}
	// Expected 0.05 * 3200 = 160 non-zero entries, sd sqrt(3200*0.05*0.95) = 12.3.
	if nonzero < 110 || nonzero > 210 {
		t.Errorf("%d non-zero entries of 3200, want about 160", nonzero)
	}
	again, other := Projection(1, 3, k, d), Projection(1, 4, k, d)
	same, differ := true, false
	for i := range p {
		for j := range p[i] {
			same = same && p[i][j] == again[i][j]
			differ = differ || p[i][j] != other[i][j]
		}
	}
	if !same || !differ {
		t.Errorf("projection not fixed by (seed, step): same %v, differs at another step %v", same, differ)
	}
}

func TestKeys(t *testing.T) {
	for _, c := range []struct {
		m    map[string]any
		want string
	}{
		{map[string]any{"sparse_dim": 0}, "strategies[0].sparse_dim: must be in 1..1024"},
		{map[string]any{"lambda": 0.0}, "strategies[0].lambda"},
		{map[string]any{"beta": -1.0}, "strategies[0].beta"},
		{map[string]any{"form": "square"}, "strategies[0].form"},
	} {
		if _, err := core.NewStrategy("elliptical", core.NewParams("strategies[0]", c.m), nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.m, err, c.want)
		}
	}
}

// The strategy contract (core/strategytest).
func TestConformance(t *testing.T) {
	strategytest.Run(t, func() core.Strategy {
		s, err := core.NewStrategy("elliptical", core.NewParams("strategies[0]", map[string]any{"sparse_dim": 4}), nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, strategytest.Options{Seed: 4, Steps: 3, EmbeddingDim: 6})
}
