package bench

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func rngFor(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0)) }

// A constant per-unit improvement is recovered exactly, with an interval of
// width 0: the pairing cancels the units' own spread (an unpaired
// resample of the same data would give a wide interval).
func TestPairedBootstrapShift(t *testing.T) {
	r := rngFor(1)
	var seeds []PairedSeed
	for s := range 3 {
		var a, b [][]float64
		for range 2 {
			var xa, xb []float64
			for range 50 {
				v := r.Float64()
				xb = append(xb, v)
				xa = append(xa, v+0.125)
			}
			a, b = append(a, xa), append(b, xb)
		}
		seeds = append(seeds, PairedSeed{Seed: uint64(s + 1), A: a, B: b})
	}
	iv, err := PairedBootstrap(seeds, 500, 0.95, Crossed, rngFor(2))
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range append([]float64{iv.Delta, iv.Low, iv.High}, iv.PerSeed...) {
		if math.Abs(x-0.125) > 1e-12 {
			t.Fatalf("interval %+v, want 0.125 everywhere", iv)
		}
	}
}

// Worked by hand. One seed, one set of two units with A - B = (1, 0): a
// resample of two units has effect 1, 0.5 or 0 with probabilities 1/4,
// 1/2, 1/4, so with 4000 resamples the 2.5% and 97.5% quantiles are 0 and
// 1. Two seeds of one unit each with effects 1 and 3: the seed resample
// gives 1, 2 or 3 (1/4, 1/2, 1/4), so the interval is [1, 3] around 2.
func TestPairedBootstrapByHand(t *testing.T) {
	for _, c := range []struct {
		name             string
		seeds            []PairedSeed
		delta, low, high float64
		perSeed0         float64
	}{
		{"units", []PairedSeed{{Seed: 1, A: [][]float64{{1, 0}}, B: [][]float64{{0, 0}}}}, 0.5, 0, 1, 0.5},
		{"seeds", []PairedSeed{{Seed: 1, A: [][]float64{{1.5}}, B: [][]float64{{0.5}}}, {Seed: 2, A: [][]float64{{3}}, B: [][]float64{{0}}}}, 2, 1, 3, 1},
	} {
		iv, err := PairedBootstrap(c.seeds, 4000, 0.95, Nested, rngFor(7))
		if err != nil {
			t.Fatal(err)
		}
		if iv.Delta != c.delta || iv.Low != c.low || iv.High != c.high || iv.PerSeed[0] != c.perSeed0 || iv.Reps != 4000 {
			t.Errorf("%s: %+v, want delta %v interval [%v, %v]", c.name, iv, c.delta, c.low, c.high)
		}
	}
}

// With many units the percentile interval of a mean approaches the normal
// one, delta ± 1.96 sd / sqrt(n), sd the units' sample std of A - B,
// computed here by a plain loop.
func TestPairedBootstrapNormal(t *testing.T) {
	r := rngFor(3)
	n := 400
	var a, b []float64
	for range n {
		x := r.NormFloat64()
		b = append(b, x)
		a = append(a, x+0.05+0.2*r.NormFloat64())
	}
	mean, ss := 0.0, 0.0
	for i := range n {
		mean += (a[i] - b[i]) / float64(n)
	}
	for i := range n {
		d := a[i] - b[i] - mean
		ss += d * d
	}
	half := 1.96 * math.Sqrt(ss/float64(n-1)) / math.Sqrt(float64(n))
	iv, err := PairedBootstrap([]PairedSeed{{A: [][]float64{a}, B: [][]float64{b}}}, 4000, 0.95, Nested, rngFor(4))
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(iv.Delta-mean) > 1e-12 {
		t.Fatalf("delta %v, want %v", iv.Delta, mean)
	}
	for _, got := range []float64{mean - iv.Low, iv.High - mean} {
		if math.Abs(got-half)/half > 0.1 {
			t.Errorf("half-width %v, normal approximation %v (interval %+v)", got, half, iv)
		}
	}
	// The same generator state gives the same interval.
	again, _ := PairedBootstrap([]PairedSeed{{A: [][]float64{a}, B: [][]float64{b}}}, 4000, 0.95, Nested, rngFor(4))
	if again.Low != iv.Low || again.High != iv.High {
		t.Errorf("not reproducible: %+v vs %+v", again, iv)
	}
}

// The two designs' resampling distributions, worked by hand and compared
// with the frequencies of 200,000 draws (a probability's standard error is
// at most 0.0011, the tolerance 0.006).
//
// "same": two seeds with the same per-problem effects (1, 0). Crossed:
// whatever seeds are drawn, one draw of two problem indices serves both,
// so the effect is 1, 0.5, 0 with probabilities 1/4, 1/2, 1/4. Nested:
// each drawn seed draws its own problems, the effect is the mean of two
// independent such values, Bin(4, 1/2)/4: 0, .25, .5, .75, 1 with
// probabilities 1, 4, 6, 4, 1 sixteenths.
//
// "one": seed 1 has effects (2, 0), seed 2 has (0, 0). Let m be the number
// of times seed 1 is drawn (0, 1, 2 with 1/4, 1/2, 1/4) and Y the mean of
// seed 1 on a draw of problems (2, 1, 0 with 1/4, 1/2, 1/4). Crossed: the
// effect is m*Y/2: 0 with 1/4 + 3/4*1/4 = 7/16; 0.5 (m=1, Y=1) 4/16; 1
// (m=1, Y=2 or m=2, Y=1) 1/8 + 1/8 = 4/16; 2 (m=2, Y=2) 1/16. Nested: with
// m=2 the two draws of seed 1 have their own Y1, Y2 and the effect is
// (Y1+Y2)/2, Bin(4, 1/2)/2; so 0: 1/4 + 1/8 + 1/64 = 25/64; 0.5: 1/4 +
// 1/16 = 20/64; 1: 1/8 + 6/64 = 14/64; 1.5: 4/64; 2: 1/64.
func TestResampledEffectByHand(t *testing.T) {
	same := []PairedSeed{{Seed: 1, A: [][]float64{{1, 0}}, B: [][]float64{{0, 0}}}, {Seed: 2, A: [][]float64{{3, 2}}, B: [][]float64{{2, 2}}}}
	one := []PairedSeed{{Seed: 1, A: [][]float64{{2, 0}}, B: [][]float64{{0, 0}}}, {Seed: 2, A: [][]float64{{5, 1}}, B: [][]float64{{5, 1}}}}
	for _, c := range []struct {
		name   string
		seeds  []PairedSeed
		design Design
		want   map[float64]float64
	}{
		{"same/crossed", same, Crossed, map[float64]float64{0: 1. / 4, 0.5: 1. / 2, 1: 1. / 4}},
		{"same/nested", same, Nested, map[float64]float64{0: 1. / 16, 0.25: 4. / 16, 0.5: 6. / 16, 0.75: 4. / 16, 1: 1. / 16}},
		{"one/crossed", one, Crossed, map[float64]float64{0: 7. / 16, 0.5: 4. / 16, 1: 4. / 16, 2: 1. / 16}},
		{"one/nested", one, Nested, map[float64]float64{0: 25. / 64, 0.5: 20. / 64, 1: 14. / 64, 1.5: 4. / 64, 2: 1. / 64}},
	} {
		const n = 200000
		rng := rngFor(11)
		got := map[float64]float64{}
		for range n {
			got[resampledEffect(c.seeds, c.design, rng)] += 1. / n
		}
		for v, p := range got {
			if _, ok := c.want[v]; !ok {
				t.Errorf("%s: effect %v drawn with frequency %.4f, impossible by hand", c.name, v, p)
			}
		}
		for v, p := range c.want {
			if math.Abs(got[v]-p) > 0.006 {
				t.Errorf("%s: effect %v: frequency %.4f, want %.4f", c.name, v, got[v], p)
			}
		}
	}
}

// Four seeds with the same per-problem effects (1, 0). Crossed: as in
// "same" above the effect is 0, 0.5, 1 (1/4, 1/2, 1/4), so the 95%
// interval is [0, 1]. Nested: the mean of four independent seed draws,
// Bin(8, 1/2)/8; P(0) = 1/256 and P(<= 1/8) = 9/256 bracket 2.5%, so the
// interval is [0.125, 0.875]. Nesting averages the problems' spread over
// the seeds as if each seed had had its own problems, which is what made
// the committed intervals too narrow.
func TestCrossedWiderThanNested(t *testing.T) {
	var same []PairedSeed
	for s := range 4 {
		same = append(same, PairedSeed{Seed: uint64(s + 1), A: [][]float64{{1, 0}}, B: [][]float64{{0, 0}}})
	}
	cr, err := PairedBootstrap(same, 4000, 0.95, Crossed, rngFor(3))
	if err != nil {
		t.Fatal(err)
	}
	ne, err := PairedBootstrap(same, 4000, 0.95, Nested, rngFor(3))
	if err != nil {
		t.Fatal(err)
	}
	if cr.Low != 0 || cr.High != 1 || cr.Delta != 0.5 {
		t.Errorf("crossed: %+v, want [0, 1] around 0.5", cr)
	}
	if ne.Low != 0.125 || ne.High != 0.875 || ne.Delta != 0.5 {
		t.Errorf("nested: %+v, want [0.125, 0.875] around 0.5", ne)
	}
}

func TestQuantileType7(t *testing.T) {
	xs := []float64{1, 2, 3, 4}
	for _, c := range []struct{ q, want float64 }{{0, 1}, {1, 4}, {0.5, 2.5}, {0.025, 1.075}, {0.975, 3.925}} {
		if got := quantile(xs, c.q); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
}

func TestPairedBootstrapErrors(t *testing.T) {
	for _, c := range []struct {
		seeds  []PairedSeed
		design Design
		want   string
	}{
		{nil, Nested, "no seeds"},
		{[]PairedSeed{{Seed: 2, A: [][]float64{{1}}, B: [][]float64{{1}, {2}}}}, Nested, "seed 2: 1 sets for A, 2 for B"},
		{[]PairedSeed{{Seed: 3, A: [][]float64{{1, 2}}, B: [][]float64{{1}}}}, Nested, "seed 3 set 0: 2 units for A, 1 for B"},
		{[]PairedSeed{{Seed: 4, A: [][]float64{{}}, B: [][]float64{{}}}}, Nested, "seed 4 set 0: 0 units"},
		{[]PairedSeed{{Seed: 5, A: [][]float64{{1}}, B: [][]float64{{1}}}, {Seed: 6, A: [][]float64{{1}, {2}}, B: [][]float64{{1}, {2}}}}, Crossed,
			"crossed design: seed 6 has 2 sets, seed 5 has 1"},
		{[]PairedSeed{{Seed: 5, A: [][]float64{{1}}, B: [][]float64{{1}}}, {Seed: 6, A: [][]float64{{1, 2}}, B: [][]float64{{1, 2}}}}, Crossed,
			"crossed design: set 0 has 2 units in seed 6, 1 in seed 5"},
	} {
		if _, err := PairedBootstrap(c.seeds, 10, 0.95, c.design, rngFor(1)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}

func TestVerdict(t *testing.T) {
	for _, c := range []struct {
		low, high float64
		want      string
	}{{0.01, 0.2, "held"}, {-0.2, -0.01, "not held"}, {-0.2, 0, "not held"}, {-0.1, 0.1, "inconclusive"}, {0, 0.1, "inconclusive"}} {
		if got := Verdict(c.low, c.high); got != c.want {
			t.Errorf("Verdict(%v, %v) = %q, want %q", c.low, c.high, got, c.want)
		}
	}
}
