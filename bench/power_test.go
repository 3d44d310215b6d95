package bench

import (
	"math"
	"strings"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// refMDE is the claim rule's MDE spelled out with gonum's t quantiles:
// the 95% half-width plus the 60% one, each sqrt(t(q, S-1)^2 Vs + t(q,
// P-1)^2 Vp), Vs = (seed + resid/P)/S and Vp = problem/P.
func refMDE(seed, problem, resid float64, S, P int) float64 {
	t := func(q float64, df int) float64 { return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(df)}.Quantile(q) }
	vs := (seed + resid/float64(P)) / float64(S)
	vp := problem / float64(P)
	h := func(q float64) float64 { return math.Sqrt(t(q, S-1)*t(q, S-1)*vs + t(q, P-1)*t(q, P-1)*vp) }
	return h(0.975) + h(0.8)
}

// Worked by hand. Crossed differences d = [[1, 2], [3, 6]] (2 seeds x 2
// problems): grand mean 3, seed means 1.5 and 4.5, problem means 2 and 4;
// MS_seed = 2*(2.25+2.25)/1 = 9, MS_problem = 2*(1+1)/1 = 4, residuals
// +-0.5 so MS_resid = 1. Components: interaction 1, seed (9-1)/2 = 4,
// problem (4-1)/2 = 1.5. Var at S = P = 2: 4/2 + 1.5/2 + 1/4 = 3 (= (9 + 4
// - 1)/4, the textbook variance of a two-way grand mean). At 2 seeds and 2
// problems both parts have 1 df: MDE = (t(0.975, 1) + t(0.8, 1)) sqrt(3)
// = (12.7062 + 1.3764) sqrt(3) = 24.392. At 101 problems the seeds for an
// effect of 3 are the first S whose MDE (refMDE) is at most 3; an effect
// below the problems' floor (2.8 sqrt(1.5/101) = 0.34 with infinitely
// many seeds) is not reachable.
func TestFitPowerCrossed(t *testing.T) {
	seeds := []PairedSeed{{A: [][]float64{{1, 2}}, B: [][]float64{{0, 0}}}, {A: [][]float64{{3, 6}}, B: [][]float64{{0, 0}}}}
	m, ok := fitPower(seeds, true)
	if !ok || math.Abs(m.Resid-1) > 1e-12 || math.Abs(m.Seed-4) > 1e-12 || math.Abs(m.Problem-1.5) > 1e-12 || m.Seeds != 2 || m.Problems != 2 {
		t.Fatalf("model %+v", m)
	}
	if se := m.se(2, 2); math.Abs(se-math.Sqrt(3)) > 1e-12 {
		t.Errorf("SE %v, want sqrt(3)", se)
	}
	if mde := m.mde(2, 2); math.Abs(mde-(12.706204736174698+1.3763819204711736)*math.Sqrt(3)) > 1e-8 {
		t.Errorf("MDE %v, want 24.392", mde)
	}
	want := 0
	for S := 3; S < 1000 && want == 0; S++ {
		if refMDE(4, 1.5, 1, S, 101) <= 3 {
			want = S
		}
	}
	if n, ok := m.seedsFor(3, 101); !ok || n != want || want == 0 {
		t.Errorf("seeds for 3 at 101 problems: %d %v, want %d", n, ok, want)
	}
	if _, ok := m.seedsFor(0.3, 101); ok {
		t.Error("an effect of 0.3 at 101 problems reachable by seeds")
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
// effect, and a claim with one seed. The model has 5 seeds and 101
// problems; its MDE is refMDE's.
func TestPowerSection(t *testing.T) {
	m := powerModel{Seed: 0.0004, Problem: 0.005, Resid: 0.01, Seeds: 5, Problems: 101, Crossed: true}
	mde := refMDE(m.Seed, m.Problem, m.Resid, 5, 101)
	big, small := 2*mde, 0.9*mde
	var b strings.Builder
	if n, ok := m.seedsFor(100, 101); !ok || n != 3 {
		t.Errorf("a huge effect needs %d seeds, want the rule's 3", n)
	}
	if n, ok := (powerModel{Seed: 1, Seeds: 5}).seedsFor(100, 0); !ok || n != 3 {
		t.Errorf("seed level: %d, want the rule's 3", n)
	}
	// Seed level by hand: 5 seeds of variance 1, MDE (t(0.975, 4) +
	// t(0.8, 4)) / sqrt(5) = (2.7764 + 0.9410) / 2.2361 = 1.6625.
	if got := (powerModel{Seed: 1, Seeds: 5}).mde(5, 0); math.Abs(got-(2.7764451051977987+0.9409645772351812)/math.Sqrt(5)) > 1e-8 {
		t.Errorf("seed-level MDE %v, want 1.6625", got)
	}
	writePowerSection(&b, []powerRow{
		{claim: "big", units: "seeds x problems (crossed)", m: m, ok: true, observed: 1, paper: &big},
		{claim: "small", units: "seeds x problems (crossed)", m: m, ok: true, observed: 1, paper: &small},
		{claim: "one", units: "seeds", m: powerModel{Seeds: 1}, observed: 0.5},
	})
	se := fmtNum(math.Sqrt(m.Seed/5 + m.Problem/101 + m.Resid/505))
	for _, want := range []string{"| big | seeds x problems (crossed) | 5 | 101 | " + se + " | " + fmtNum(mde) + " | 1 | " + fmtNum(big) + " | yes | ",
		"| small | seeds x problems (crossed) | 5 | 101 | " + se + " | " + fmtNum(mde) + " | 1 | " + fmtNum(small) + " | **no** | ",
		"| one | seeds | 1 | - | - | - | 0.5 | - | - | - | - |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("section lacks %q:\n%s", want, b.String())
		}
	}
}
