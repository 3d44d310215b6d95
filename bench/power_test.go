package bench

import (
	"math"
	"strings"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// refMDE is the claim rule's MDE spelled out with gonum's t quantiles:
// the 95% half-width plus the 60% one, each sqrt(t(q, S-1)^2 seed/S +
// t(q, dfp)^2 problems).
func refMDE(seed, problems, dfp float64, S int) float64 {
	t := func(q, df float64) float64 { return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(q) }
	h := func(q float64) float64 {
		v := t(q, float64(S-1)) * t(q, float64(S-1)) * seed / float64(S)
		if problems > 0 {
			v += t(q, dfp) * t(q, dfp) * problems
		}
		return math.Sqrt(v)
	}
	return h(0.975) + h(0.8)
}

// Worked by hand, two eval sets of unequal size (where the power table's
// SE used to differ from the claim's: it pooled the sets' problems into
// one table). Differences over 3 seeds, set 1 with 2 problems: [1, 2],
// [3, 6], [2, 4]; set 2 with 1 problem: 0, 1, -1. A seed's effect is the
// mean over sets of the set's mean: 0.75, 2.75, 1; mean 1.5, squared
// deviations 0.5625 + 1.5625 + 0.25 = 2.375, sample variance 1.1875, so
// the seeds' part is 1.1875/3. Set 1's table: problem means 2 and 4
// around 3, MS_P = 3 (1 + 1)/1 = 6; residuals +-0.5 (seeds 1 and 2) and 0
// (seed 3), MS_R = 1/2 = 0.5; its part (6 - 0.5)/(J^2 P S) = 5.5/24 on
// P-1 = 1 df (set 2's single problem adds none). SE^2 = 1.1875/3 +
// 5.5/24 = 0.625.
func TestFitPowerSEIsTheClaims(t *testing.T) {
	seeds := []PairedSeed{
		{Seed: 1, A: [][]float64{{1, 2}, {0}}, B: [][]float64{{0, 0}, {0}}},
		{Seed: 2, A: [][]float64{{3, 6}, {1}}, B: [][]float64{{0, 0}, {0}}},
		{Seed: 3, A: [][]float64{{2, 4}, {-1}}, B: [][]float64{{0, 0}, {0}}},
	}
	m, ok := fitPower(seeds, true)
	if !ok || math.Abs(m.Seed-1.1875) > 1e-12 || math.Abs(m.Problems-5.5/24) > 1e-12 || math.Abs(m.DFProblems-1) > 1e-12 || m.Seeds != 3 || m.Units != 3 {
		t.Fatalf("model %+v", m)
	}
	if se := m.se(3); math.Abs(se-math.Sqrt(0.625)) > 1e-12 {
		t.Errorf("SE %v, want sqrt(0.625) = 0.7906", se)
	}
	iv, err := PairedInterval(seeds, claimLevel, Crossed)
	if err != nil || m.se(3) != iv.SE {
		t.Errorf("power SE %v, the claim's %v (%v)", m.se(3), iv.SE, err)
	}
	if mde, want := m.mde(3), refMDE(1.1875, 5.5/24, 1, 3); math.Abs(mde-want) > 1e-8 {
		t.Errorf("MDE %v, want %v", mde, want)
	}
	// More seeds shrink only the seeds' part: at 30 seeds Var = 1.1875/30 + 5.5/24.
	if se := m.se(30); math.Abs(se-math.Sqrt(1.1875/30+5.5/24)) > 1e-12 {
		t.Errorf("SE at 30 seeds %v", se)
	}
	// The problems' part alone keeps the MDE above (t(0.975, 1) + t(0.8,
	// 1)) sqrt(5.5/24) = 6.74: an effect of 5 is not reachable, one of 20
	// is, at the first S whose refMDE is at most 20.
	if _, ok := m.seedsFor(5); ok {
		t.Error("an effect of 5 reachable by seeds")
	}
	want := 0
	for S := 3; S < 1000 && want == 0; S++ {
		if refMDE(1.1875, 5.5/24, 1, S) <= 20 {
			want = S
		}
	}
	if n, ok := m.seedsFor(20); !ok || n != want || want == 0 {
		t.Errorf("seeds for 20: %d %v, want %d", n, ok, want)
	}
}

// A seed's spread smaller than the interaction's (MS_seed < MS_resid) is
// where a floored seed component made the power SE larger than the
// claim's. Crossed d = [[1, 2], [2, 1], [1, 2]]: every seed's effect is
// 1.5, so the seeds' part is 0; problem means 4/3 and 5/3 around 1.5,
// MS_P = 3 (1/36 + 1/36) = 1/6; residuals +-1/6 (seeds 1, 3) and +-1/3
// (seed 2), SS_R = 4/36 + 4/9 = 5/9, MS_R = 5/18 > MS_P: no problems'
// part. SE 0, as the claim has it.
func TestFitPowerNoFloorInflation(t *testing.T) {
	seeds := []PairedSeed{{A: [][]float64{{1, 2}}, B: [][]float64{{0, 0}}}, {A: [][]float64{{2, 1}}, B: [][]float64{{0, 0}}}, {A: [][]float64{{1, 2}}, B: [][]float64{{0, 0}}}}
	m, ok := fitPower(seeds, true)
	if !ok || m.se(3) != 0 || m.Problems != 0 {
		t.Errorf("model %+v, SE %v: want 0", m, m.se(3))
	}
}

// Nested (other problems per seed) d = [[1, 3], [4, 8]]: seed effects 2
// and 6, sample variance 8, SE sqrt(8/2) = 2 and no problems' part. Seed
// level [0.1, 0.3, 0.2]: variance 0.01 of the seeds' effects.
func TestFitPowerNestedAndSeeds(t *testing.T) {
	m, ok := fitPower([]PairedSeed{{A: [][]float64{{1, 3}}, B: [][]float64{{0, 0}}}, {A: [][]float64{{4, 8}}, B: [][]float64{{0, 0}}}}, false)
	if !ok || math.Abs(m.Seed-8) > 1e-12 || m.Problems != 0 || m.Crossed || math.Abs(m.se(2)-2) > 1e-12 || m.Units != 2 {
		t.Errorf("nested %+v", m)
	}
	s, ok := fitPower([]PairedSeed{{A: [][]float64{{0.1}}, B: [][]float64{{0}}}, {A: [][]float64{{0.3}}, B: [][]float64{{0}}}, {A: [][]float64{{0.2}}, B: [][]float64{{0}}}}, true)
	if !ok || math.Abs(s.Seed-0.01) > 1e-15 || s.Units != 0 || math.Abs(s.se(3)-0.1/math.Sqrt(3)) > 1e-15 {
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
	m := powerModel{Seed: 0.0004 + 0.01/101, Problems: 0.005 / 101, DFProblems: 100, Seeds: 5, Units: 101, Crossed: true}
	mde := refMDE(m.Seed, m.Problems, 100, 5)
	big, small := 2*mde, 0.9*mde
	var b strings.Builder
	if n, ok := m.seedsFor(100); !ok || n != 3 {
		t.Errorf("a huge effect needs %d seeds, want the rule's 3", n)
	}
	if n, ok := (powerModel{Seed: 1, Seeds: 5}).seedsFor(100); !ok || n != 3 {
		t.Errorf("seed level: %d, want the rule's 3", n)
	}
	// Seed level by hand: 5 seeds of variance 1, MDE (t(0.975, 4) +
	// t(0.8, 4)) / sqrt(5) = (2.7764 + 0.9410) / 2.2361 = 1.6625.
	if got := (powerModel{Seed: 1, Seeds: 5}).mde(5); math.Abs(got-(2.7764451051977987+0.9409645772351812)/math.Sqrt(5)) > 1e-8 {
		t.Errorf("seed-level MDE %v, want 1.6625", got)
	}
	writePowerSection(&b, []powerRow{
		{claim: "big", units: "seeds x problems (crossed)", m: m, ok: true, observed: 1, paper: &big},
		{claim: "small", units: "seeds x problems (crossed)", m: m, ok: true, observed: 1, paper: &small},
		{claim: "one", units: "seeds", m: powerModel{Seeds: 1}, observed: 0.5},
	})
	se := fmtNum(math.Sqrt(m.Seed/5 + m.Problems))
	for _, want := range []string{"| big | seeds x problems (crossed) | 5 | 101 | " + se + " | " + fmtNum(mde) + " | 1 | " + fmtNum(big) + " | yes | ",
		"| small | seeds x problems (crossed) | 5 | 101 | " + se + " | " + fmtNum(mde) + " | 1 | " + fmtNum(small) + " | **no** | ",
		"| one | seeds | 1 | - | - | - | 0.5 | - | - | - | - |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("section lacks %q:\n%s", want, b.String())
		}
	}
}
