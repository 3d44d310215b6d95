package bench

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

func closeTo(a, b, tol float64) bool { return math.Abs(a-b) <= tol*max(1, math.Abs(b)) }

// Student's t with 2 degrees of freedom has closed forms: P(T > x) =
// (1 - x/sqrt(x^2+2))/2 and the q-quantile (2q-1)/sqrt(2q(1-q)).
func t2Survival(x float64) float64 { return (1 - x/math.Sqrt(x*x+2)) / 2 }
func t2Quantile(q float64) float64 { return (2*q - 1) / math.Sqrt(2*q*(1-q)) }

// Three seeds with one value each, effects 1, 2, 3: mean 2, sample
// variance 1, SE sqrt(1/3); the 95% half-width is t(0.975, 2) SE and the
// two-sided p of 0 is 2 P(T2 > 2 sqrt(3)), both by the closed forms.
func TestPairedIntervalSeedsByHand(t *testing.T) {
	var seeds []PairedSeed
	for i, d := range []float64{1, 2, 3} {
		seeds = append(seeds, PairedSeed{Seed: uint64(i + 1), A: [][]float64{{d + 0.5}}, B: [][]float64{{0.5}}})
	}
	iv, err := PairedInterval(seeds, 0.95, Nested)
	if err != nil {
		t.Fatal(err)
	}
	h := t2Quantile(0.975) * math.Sqrt(1.0/3)
	if !closeTo(iv.Delta, 2, 1e-12) || !closeTo(iv.SE, math.Sqrt(1.0/3), 1e-12) || iv.DFSeeds != 2 || iv.VarProblems != 0 ||
		!closeTo(iv.Low, 2-h, 1e-9) || !closeTo(iv.High, 2+h, 1e-9) {
		t.Errorf("interval %+v, want 2 -/+ %v", iv, h)
	}
	p := Tests(iv, 0)
	if want := 2 * t2Survival(2*math.Sqrt(3)); !closeTo(p.Two, want, 1e-9) || p.Equiv != 1 {
		t.Errorf("p %+v, want two-sided %v (0.0742) and no equivalence test", p, want)
	}
	// A margin of 5: the interval [-0.48, 4.48] lies inside (-5, 5); the
	// doubled TOST p is the 1-conf at which the half-width reaches 5 - 2.
	p = Tests(iv, 5)
	if want := 2 * t2Survival(3/math.Sqrt(1.0/3)); !closeTo(p.Equiv, want, 1e-9) {
		t.Errorf("equivalence p %v, want %v", p.Equiv, want)
	}
}

// Two seeds x two problems of one set, differences [[1, 3], [2, 6]],
// worked by hand: seed effects 2 and 4 (Delta 3, VarSeeds var(2, 4)/2 =
// 1); problem means 1.5 and 4.5 (MS_P = 2 * 4.5 = 9); interaction
// residuals +-0.5 (MS_R = 1 on 1 df); VarProblems = (9 - 1)/(1 * 2 * 2) =
// 2 on MS_P's P-1 = 1 df; the half-width takes each part's own t quantile
// (reference quantiles here from gonum directly).
func TestPairedIntervalCrossedByHand(t *testing.T) {
	seeds := []PairedSeed{
		{Seed: 1, A: [][]float64{{1, 3}}, B: [][]float64{{0, 0}}},
		{Seed: 2, A: [][]float64{{2.5, 6.5}}, B: [][]float64{{0.5, 0.5}}},
	}
	iv, err := PairedInterval(seeds, 0.95, Crossed)
	if err != nil {
		t.Fatal(err)
	}
	df := 1.0
	tq := func(df float64) float64 { return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(0.975) }
	h := math.Sqrt(tq(1)*tq(1)*1 + tq(df)*tq(df)*2)
	if !closeTo(iv.Delta, 3, 1e-12) || !closeTo(iv.VarSeeds, 1, 1e-12) || !closeTo(iv.VarProblems, 2, 1e-12) || !closeTo(iv.DFProblems, df, 1e-12) ||
		!closeTo(iv.SE, math.Sqrt(3), 1e-12) || !closeTo(iv.High-iv.Delta, h, 1e-9) || !closeTo(iv.Delta-iv.Low, h, 1e-9) {
		t.Errorf("interval %+v, want 3 -/+ %v, var 1 + 2, df %v", iv, h, df)
	}
	// Nested, the same numbers are the per-seed t interval: 3 -/+ t(1) * 1.
	iv, _ = PairedInterval(seeds, 0.95, Nested)
	if !closeTo(iv.High-iv.Delta, tq(1), 1e-9) || iv.VarProblems != 0 {
		t.Errorf("nested %+v, want half-width %v", iv, tq(1))
	}
	// Problems less spread than the interaction: the part is floored at 0
	// and the interval is the seeds' t interval.
	flat := []PairedSeed{{Seed: 1, A: [][]float64{{1, 0}}, B: [][]float64{{0, 0}}}, {Seed: 2, A: [][]float64{{0, 1}}, B: [][]float64{{0, 0}}}}
	if iv, _ := PairedInterval(flat, 0.95, Crossed); iv.VarProblems != 0 || iv.DFProblems != 0 || iv.SE != 0 {
		t.Errorf("flat problems: %+v, want no problem part and SE 0 (both seeds' effects 0.5)", iv)
	}
}

func TestPairedIntervalErrors(t *testing.T) {
	one := PairedSeed{Seed: 1, A: [][]float64{{1}}, B: [][]float64{{0}}}
	for name, c := range map[string]struct {
		seeds  []PairedSeed
		design Design
	}{
		"one seed":              {[]PairedSeed{one}, Nested},
		"sets differ":           {[]PairedSeed{one, {Seed: 2, A: [][]float64{{1}, {2}}, B: [][]float64{{0}}}}, Nested},
		"units differ":          {[]PairedSeed{one, {Seed: 2, A: [][]float64{{1, 2}}, B: [][]float64{{0}}}}, Nested},
		"empty set":             {[]PairedSeed{one, {Seed: 2, A: [][]float64{{}}, B: [][]float64{{}}}}, Nested},
		"crossed, seeds differ": {[]PairedSeed{one, {Seed: 2, A: [][]float64{{1, 2}}, B: [][]float64{{0, 0}}}}, Crossed},
	} {
		if _, err := PairedInterval(c.seeds, 0.95, c.design); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// tQuantile's shortcuts (remembered integer df; Cornish-Fisher from 100)
// agree with the exact quantile, and with the closed form at 2 df.
func TestTQuantile(t *testing.T) {
	for _, q := range []float64{0.6, 0.8, 0.975, 0.995} {
		if got := tQuantile(q, 2); !closeTo(got, t2Quantile(q), 1e-9) {
			t.Errorf("t(%v, 2) = %v, want %v", q, got, t2Quantile(q))
		}
		for _, df := range []float64{3, 4.5, 50, 63.7, 100, 137.2, 1e4, 1e7} {
			want := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(q)
			if got := tQuantile(q, df); !closeTo(got, want, 1e-8) {
				t.Errorf("t(%v, %v) = %v, want %v", q, df, got, want)
			}
		}
	}
}

// The p values agree with the interval: below 0.05 exactly when the 95%
// interval excludes 0 (Two) or lies inside the margin (Equiv), on random
// crossed experiments with and without a problem part.
func TestTestsAgreeWithInterval(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	checked := 0
	for range 300 {
		S, P := 3+rng.IntN(4), 2+rng.IntN(6)
		shift, spread := rng.NormFloat64(), rng.Float64()*2
		var seeds []PairedSeed
		prob := make([]float64, P)
		for p := range prob {
			prob[p] = spread * rng.NormFloat64()
		}
		for s := range S {
			a := make([]float64, P)
			for p := range a {
				a[p] = shift + prob[p] + rng.NormFloat64()
			}
			seeds = append(seeds, PairedSeed{Seed: uint64(s), A: [][]float64{a}, B: [][]float64{make([]float64, P)}})
		}
		iv, err := PairedInterval(seeds, 0.95, Crossed)
		if err != nil {
			t.Fatal(err)
		}
		margin := 0.5 + 2*rng.Float64()
		p := Tests(iv, margin)
		if math.Abs(iv.Low) > 1e-6 && math.Abs(iv.High) > 1e-6 {
			if (p.Two < 0.05) != (iv.Low > 0 || iv.High < 0) {
				t.Errorf("interval [%v, %v], two-sided p %v", iv.Low, iv.High, p.Two)
			}
			checked++
		}
		if math.Abs(iv.Low+margin) > 1e-6 && math.Abs(iv.High-margin) > 1e-6 {
			if (p.Equiv < 0.05) != (iv.Low > -margin && iv.High < margin) {
				t.Errorf("interval [%v, %v], margin %v: equivalence p %v", iv.Low, iv.High, margin, p.Equiv)
			}
		}
	}
	if checked < 250 {
		t.Errorf("only %d of 300 intervals away from 0", checked)
	}
}

func TestVerdictRule(t *testing.T) {
	for _, c := range []struct {
		low, high, margin float64
		want              string
	}{
		{0.1, 0.3, 0, "held"},
		{0.1, 0.3, 1, "held"}, // better, if by less than the margin
		{-0.3, 0, 0, "not held"},
		{0, 0, 0, "inconclusive"},     // a point interval (no spread) measures no error
		{0.2, 0.2, 0, "inconclusive"}, // whatever its sign
		{-0.2, -0.2, 0.5, "inconclusive"},
		{-0.1, 0.1, 0, "inconclusive"},
		{-0.1, 0.1, 0.2, "equivalent"},
		{-0.1, 0.2, 0.2, "inconclusive"}, // an end on the margin
		{-0.3, 0.1, 0.2, "inconclusive"},
	} {
		if got := Verdict(c.low, c.high, c.margin); got != c.want {
			t.Errorf("Verdict(%v, %v, margin %v) = %s, want %s", c.low, c.high, c.margin, got, c.want)
		}
	}
}

// Holm by hand: p 0.01, 0.04, 0.03 of 3 sort to 0.01 (x3 = 0.03), 0.03
// (x2 = 0.06), 0.04 (x1 = 0.04, raised to the 0.06 before it).
func TestHolm(t *testing.T) {
	got := holm([]float64{0.01, 0.04, 0.03})
	for i, want := range []float64{0.03, 0.06, 0.06} {
		if !closeTo(got[i], want, 1e-12) {
			t.Errorf("holm = %v, want [0.03 0.06 0.06]", got)
		}
	}
	if got := holm([]float64{0.5, 0.9}); got[0] != 1 || got[1] != 1 {
		t.Errorf("holm caps at 1: %v", got)
	}
}

// Families: Holm runs within each; an exploratory claim or one with too
// few seeds takes no part and keeps its verdict; a margin claim that
// survives its family's equivalence correction is equivalent after Holm.
func TestAdjustFamilies(t *testing.T) {
	f := func(x float64) *float64 { return &x }
	seeds := []uint64{1, 2, 3}
	vs := []ClaimVerdict{
		{Family: "m", Seeds: seeds, DeltaMean: f(0.1), P: f(0.01), Verdict: "held"},
		{Family: "m", Seeds: seeds, DeltaMean: f(-0.1), P: f(0.03), Verdict: "not held"},
		{Family: "m", Seeds: seeds, DeltaMean: f(0.1), P: f(0.04), Verdict: "held"},
		{Family: "m", Seeds: seeds, DeltaMean: f(0.1), P: f(0.001), Verdict: "exploratory"},
		{Family: "n", Seeds: seeds, DeltaMean: f(-0.1), P: f(0.04), Verdict: "not held"},
		{Family: "n", Seeds: seeds[:2], DeltaMean: f(0.1), P: f(0.0), Verdict: "inconclusive"},
		{Family: "e", Seeds: seeds, DeltaMean: f(0.01), P: f(0.6), Verdict: "equivalent", Margin: 0.1, PEquiv: f(0.02)},
		{Family: "e", Seeds: seeds, DeltaMean: f(0.01), P: f(0.7), Verdict: "equivalent", Margin: 0.1, PEquiv: f(0.03)},
	}
	adjustFamilies(vs)
	for i, want := range []struct {
		verdict string
		p       float64
		size    int
	}{
		{"held", 0.03, 3}, {"inconclusive", 0.06, 3}, {"inconclusive", 0.06, 3}, {"exploratory", -1, 0},
		{"not held", 0.04, 1}, {"inconclusive", -1, 0}, {"equivalent", 1, 2}, {"equivalent", 1, 2},
	} {
		v := vs[i]
		if v.VerdictHolm != want.verdict || v.FamilySize != want.size || (want.p < 0) != (v.PHolm == nil) || (v.PHolm != nil && !closeTo(*v.PHolm, want.p, 1e-12)) {
			t.Errorf("claim %d: %s, p_holm %v, family %d; want %s, %v, %d", i, v.VerdictHolm, v.PHolm, v.FamilySize, want.verdict, want.p, want.size)
		}
	}
	// Equivalence p 0.02 and 0.03 of 2: 0.04 and 0.04, both below 0.05.
	if !closeTo(*vs[6].PEquivHolm, 0.04, 1e-12) || !closeTo(*vs[7].PEquivHolm, 0.04, 1e-12) {
		t.Errorf("equivalence p after Holm: %v %v, want 0.04 0.04", *vs[6].PEquivHolm, *vs[7].PEquivHolm)
	}
}
