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
	iv, err := PairedBootstrap(seeds, 500, 0.95, rngFor(2))
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
		iv, err := PairedBootstrap(c.seeds, 4000, 0.95, rngFor(7))
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
	iv, err := PairedBootstrap([]PairedSeed{{A: [][]float64{a}, B: [][]float64{b}}}, 4000, 0.95, rngFor(4))
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
	again, _ := PairedBootstrap([]PairedSeed{{A: [][]float64{a}, B: [][]float64{b}}}, 4000, 0.95, rngFor(4))
	if again.Low != iv.Low || again.High != iv.High {
		t.Errorf("not reproducible: %+v vs %+v", again, iv)
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
		seeds []PairedSeed
		want  string
	}{
		{nil, "no seeds"},
		{[]PairedSeed{{Seed: 2, A: [][]float64{{1}}, B: [][]float64{{1}, {2}}}}, "seed 2: 1 sets for A, 2 for B"},
		{[]PairedSeed{{Seed: 3, A: [][]float64{{1, 2}}, B: [][]float64{{1}}}}, "seed 3 set 0: 2 units for A, 1 for B"},
		{[]PairedSeed{{Seed: 4, A: [][]float64{{}}, B: [][]float64{{}}}}, "seed 4 set 0: 0 units"},
	} {
		if _, err := PairedBootstrap(c.seeds, 10, 0.95, rngFor(1)); err == nil || !strings.Contains(err.Error(), c.want) {
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
