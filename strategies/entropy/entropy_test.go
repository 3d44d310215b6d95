package entropy

import (
	"math"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/core/strategytest"
)

func build(t *testing.T, m map[string]any) *Entropy {
	t.Helper()
	s, err := core.NewStrategy("entropy", core.NewParams("strategies[0]", m), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s.(*Entropy)
}

func TestCoefTimesSchedule(t *testing.T) {
	tests := []struct {
		m           map[string]any
		step, total int
		want        float64
	}{
		// default coef 0.001, at any step (the trainer applies the entry's
		// weight w_t).
		{nil, 3, 10, 0.001},
		{map[string]any{"coef": 0.05}, 6, 10, 0.05},
		// coef 0 is allowed.
		{map[string]any{"coef": 0}, 0, 10, 0},
	}
	for _, tc := range tests {
		s := build(t, tc.m)
		lt, err := s.LossTerms(core.StepInfo{Step: tc.step, TotalSteps: tc.total})
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(lt.EntropyCoef-tc.want) > 1e-15 {
			t.Errorf("%v at %d/%d: coef %v, want %v", tc.m, tc.step, tc.total, lt.EntropyCoef, tc.want)
		}
	}
	if s := build(t, nil); s.Needs() != (core.Needs{Entropies: true}) {
		t.Errorf("needs %+v", s.Needs())
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		m    map[string]any
		want string
	}{
		{map[string]any{"coef": -0.1}, "config: strategies[0].coef: must be >= 0"},
		{map[string]any{"coeff": 0.1}, "config: strategies[0].coeff: unknown key"},
		{map[string]any{"weight": map[string]any{"w0": 2}}, "config: strategies[0].weight: unknown key"},
	}
	for _, tc := range tests {
		_, err := core.NewStrategy("entropy", core.NewParams("strategies[0]", tc.m), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want %q", tc.m, err, tc.want)
		}
	}
}

func TestConformance(t *testing.T) {
	strategytest.Run(t, func() core.Strategy {
		return build(t, map[string]any{"coef": 0.01})
	}, strategytest.Options{Seed: 2})
}
