package bench

import (
	"math"
	"strings"
	"testing"
)

// Worked by hand. Crossed differences d = [[1, 2], [3, 6]] (2 seeds x 2
// problems): grand mean 3, seed means 1.5 and 4.5, problem means 2 and 4;
// MS_seed = 2*(2.25+2.25)/1 = 9, MS_problem = 2*(1+1)/1 = 4, residuals
// +-0.5 so MS_resid = 1. Components: interaction 1, seed (9-1)/2 = 4,
// problem (4-1)/2 = 1.5. Var at S = P = 2: 4/2 + 1.5/2 + 1/4 = 3 (= (9 + 4
// - 1)/4, the textbook variance of a two-way grand mean); MDE = 2.8016 *
// sqrt(3) = 4.8525. Seeds for an effect of 3 at P = 2: 4.5/S + 0.75 <=
// (3/2.8016)^2 = 1.14666 needs S >= 11.34, so 12; an effect of 2 needs
// 4.5/S <= 0.5096 - 0.75 < 0: not reachable.
func TestFitPowerCrossed(t *testing.T) {
	seeds := []PairedSeed{{A: [][]float64{{1, 2}}, B: [][]float64{{0, 0}}}, {A: [][]float64{{3, 6}}, B: [][]float64{{0, 0}}}}
	m, ok := fitPower(seeds, true)
	if !ok || math.Abs(m.Resid-1) > 1e-12 || math.Abs(m.Seed-4) > 1e-12 || math.Abs(m.Problem-1.5) > 1e-12 || m.Seeds != 2 || m.Problems != 2 {
		t.Fatalf("model %+v", m)
	}
	if se := m.se(2, 2); math.Abs(se-math.Sqrt(3)) > 1e-12 {
		t.Errorf("SE %v, want sqrt(3)", se)
	}
	if mde := m.mde(2, 2); math.Abs(mde-2.801585218*math.Sqrt(3)) > 1e-8 {
		t.Errorf("MDE %v", mde)
	}
	if n, ok := m.seedsFor(3, 2); !ok || n != 12 {
		t.Errorf("seeds for 3: %d %v, want 12", n, ok)
	}
	if _, ok := m.seedsFor(2, 2); ok {
		t.Error("an effect of 2 at 2 problems reachable by seeds")
	}
	// Split into two sets of one problem each: the same concatenation.
	split := []PairedSeed{{A: [][]float64{{1}, {2}}, B: [][]float64{{0}, {0}}}, {A: [][]float64{{3}, {6}}, B: [][]float64{{0}, {0}}}}
	if m2, _ := fitPower(split, true); m2 != m {
		t.Errorf("split sets %+v, want %+v", m2, m)
	}
}

// Nested (other problems per seed) d = [[1, 3], [4, 8]]: seed means 2 and
// 6, grand 4; MS_between = 2*(4+4)/1 = 16; MS_within = (1+1+4+4)/2 = 5;
// seed component (16-5)/2 = 5.5, residual 5, no problem component. Seed
// level [0.1, 0.3, 0.2]: variance 0.01 of the seeds' effects.
func TestFitPowerNestedAndSeeds(t *testing.T) {
	m, ok := fitPower([]PairedSeed{{A: [][]float64{{1, 3}}, B: [][]float64{{0, 0}}}, {A: [][]float64{{4, 8}}, B: [][]float64{{0, 0}}}}, false)
	if !ok || math.Abs(m.Seed-5.5) > 1e-12 || math.Abs(m.Resid-5) > 1e-12 || m.Problem != 0 || m.Crossed {
		t.Errorf("nested %+v", m)
	}
	s, ok := fitPower([]PairedSeed{{A: [][]float64{{0.1}}, B: [][]float64{{0}}}, {A: [][]float64{{0.3}}, B: [][]float64{{0}}}, {A: [][]float64{{0.2}}, B: [][]float64{{0}}}}, true)
	if !ok || math.Abs(s.Seed-0.01) > 1e-15 || s.Problems != 0 || math.Abs(s.se(3, 0)-0.1/math.Sqrt(3)) > 1e-15 {
		t.Errorf("seed level %+v", s)
	}
	if _, ok := fitPower([]PairedSeed{{A: [][]float64{{1}}, B: [][]float64{{0}}}}, true); ok {
		t.Error("one seed fitted")
	}
}

// The section: a powered and an unpowered claim against the paper's
// effect, and a claim with one seed.
func TestPowerSection(t *testing.T) {
	m := powerModel{Seed: 4, Problem: 1.5, Resid: 1, Seeds: 2, Problems: 2, Crossed: true}
	big, small := 5.0, 3.0
	var b strings.Builder
	if n, ok := m.seedsFor(100, 2); !ok || n != 3 {
		t.Errorf("a huge effect needs %d seeds, want the rule's 3", n)
	}
	if n, ok := (powerModel{Seed: 1, Seeds: 5}).seedsFor(100, 0); !ok || n != 5 {
		t.Errorf("seed level: %d, want the rule's 5", n)
	}
	writePowerSection(&b, []powerRow{
		{claim: "big", units: "seeds x problems (crossed)", m: m, ok: true, observed: 1, paper: &big},
		{claim: "small", units: "seeds x problems (crossed)", m: m, ok: true, observed: 1, paper: &small},
		{claim: "one", units: "seeds", m: powerModel{Seeds: 1}, observed: 0.5},
	})
	for _, want := range []string{"| big | seeds x problems (crossed) | 2 | 2 | 1.732 | 4.852 | 1 | 5 | yes | 3 | not reachable |",
		"| small | seeds x problems (crossed) | 2 | 2 | 1.732 | 4.852 | 1 | 3 | **no** | 12 | not reachable |",
		"| one | seeds | 1 | - | - | - | 0.5 | - | - | - | - |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("section lacks %q:\n%s", want, b.String())
		}
	}
}
