//go:build amd64

package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/compute"

	"github.com/cde-rl/cde/engines/cpu/gemm"
)

// TestVecOrderPortable holds the portable forms of the order-dependent
// vector kernels (sumLanes, maxLanes, exp32, axpyF32's tail) to the
// assembly ones bit for bit: the "go" kernel path must give the same
// results as the others. Lengths 0..300 cover every loop of the kernels;
// values include huge and tiny magnitudes, ±0, ±Inf and NaN.
func TestVecOrderPortable(t *testing.T) {
	if !(gemm.Path() != gemm.PathGo && useAVX2) {
		t.Skipf("kernel path %q: no AVX2 kernels to compare with", gemm.Path())
	}
	rng := rand.New(rand.NewPCG(3, 4))
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), 1e-42, -1e-42, 3e38, -3e38, 88.7, 88.8, -103.9, -87.4, 0.34657359}
	draw := func() float32 {
		switch rng.IntN(10) {
		case 0:
			return special[rng.IntN(len(special))]
		case 1:
			return float32(rng.NormFloat64() * 1e6)
		case 2:
			return float32((rng.Float64() - 0.5) * 220) // exp's whole range and past it
		}
		return float32(rng.NormFloat64())
	}
	same := func(a, b float32) bool {
		return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b
	}
	for n := 0; n <= 300; n++ {
		for rep := range 20 {
			x := make([]float32, n)
			for i := range x {
				x[i] = draw()
			}
			if rep%2 == 0 { // finite, ordinary values too, where sums are exact-sensitive
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
			}
			m := n &^ 7
			if m > 0 {
				if got, want := sumLanes(x[:m]), vecSum(&x[0], m); !same(got, want) {
					t.Fatalf("n=%d: sumLanes %v (%#08x), vecSum %v (%#08x)", m, got, math.Float32bits(got), want, math.Float32bits(want))
				}
				if got, want := maxLanes(x[:m]), vecMax(&x[0], m); !same(got, want) {
					t.Fatalf("n=%d: maxLanes %v, vecMax %v", m, got, want)
				}
				d := make([]float32, m)
				vecExp(&d[0], &x[0], m)
				for i := range d {
					if got := exp32(x[i]); !same(got, d[i]) {
						t.Fatalf("exp32(%v) = %v (%#08x), vecExp %v (%#08x)", x[i], got, math.Float32bits(got), d[i], math.Float32bits(d[i]))
					}
				}
				c1, c2 := make([]float32, m), make([]float32, m)
				for i := range c1 {
					c1[i] = draw()
					c2[i] = c1[i]
				}
				av := draw()
				vecAxpy(&c1[0], &x[0], av, m)
				for i := range c2 {
					c2[i] = gemm.FMA32(av, x[i], c2[i])
				}
				for i := range c1 {
					if !same(c1[i], c2[i]) {
						t.Fatalf("axpy: VFMADD %v, FMA32 %v", c1[i], c2[i])
					}
				}
			}
			// The whole fold, both ways.
			for _, op := range []compute.OpType{compute.OpTypeReduceSum, compute.OpTypeReduceMax} {
				useAVX2 = true
				a := foldF32(op, x)
				useAVX2 = false
				b := foldF32(op, x)
				useAVX2 = true
				if !same(a, b) {
					t.Fatalf("%s n=%d: %v with the kernels, %v without", op, n, a, b)
				}
			}
		}
	}
}
