package gumbellog

import (
	"math"
	"math/rand/v2"
	"testing"
)

func ref(u float64) float32 { return float32(-math.Log(-math.Log(u))) }

func check(t *testing.T, label string, u []float64) {
	t.Helper()
	dst := make([]float32, len(u))
	Transform(dst, u)
	for i, x := range u {
		if want := ref(x); math.Float32bits(dst[i]) != math.Float32bits(want) {
			t.Fatalf("%s: u[%d] = %v (%#x): got %v, want %v", label, i, x, math.Float64bits(x), dst[i], want)
		}
	}
}

// Uniform draws as the sampler makes them, every length's tail included.
func TestTransformMatchesMathLog(t *testing.T) {
	if !haveVector {
		t.Log("no AVX-512 here: the scalar path alone is checked")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	n := 1 << 22
	if testing.Short() {
		n = 1 << 18
	}
	u := make([]float64, n)
	for i := range u {
		for u[i] == 0 {
			u[i] = rng.Float64()
		}
	}
	check(t, "uniform", u)
	for k := range 17 {
		check(t, "short", u[:k])
	}
}

// Inputs where the algorithm branches or ends: f1 exactly sqrt(2)/2 and
// its neighbours (the k -= 1, f1 *= 2 branch, at both logarithms), the
// smallest and largest uniforms, u whose -log(u) is tiny, and powers of 2.
func TestTransformEdges(t *testing.T) {
	h := math.Sqrt2 / 2
	var u []float64
	for e := -53; e <= 0; e++ {
		for _, m := range []float64{h, math.Nextafter(h, 0), math.Nextafter(h, 1), 0.5, 1 - 0x1p-53} {
			if x := math.Ldexp(m, e+1); x > 0 && x < 1 {
				u = append(u, x)
			}
		}
	}
	// u = exp(-v) for v with f1 near sqrt(2)/2, so the second logarithm
	// meets the branch.
	for e := -40; e <= 5; e++ {
		for _, m := range []float64{h, math.Nextafter(h, 0), math.Nextafter(h, 1)} {
			if x := math.Exp(-math.Ldexp(m, e+1)); x > 0 && x < 1 {
				u = append(u, x)
			}
		}
	}
	u = append(u, 0x1p-53, 0x1p-1074*0x1p1022, math.SmallestNonzeroFloat64*0x1p52, 1-0x1p-53, 1-0x1p-52, 0.5, 0.25)
	for len(u)%8 != 0 {
		u = append(u, 0.5)
	}
	check(t, "edges", u)
}

func BenchmarkTransform(b *testing.B) {
	u := make([]float64, 151936)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range u {
		for u[i] == 0 {
			u[i] = rng.Float64()
		}
	}
	dst := make([]float32, len(u))
	b.Run("vector", func(b *testing.B) {
		for range b.N {
			Transform(dst, u)
		}
	})
	b.Run("math.Log", func(b *testing.B) {
		for range b.N {
			for i, x := range u {
				dst[i] = ref(x)
			}
		}
	})
}
