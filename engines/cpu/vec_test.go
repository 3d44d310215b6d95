package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/compute"
)

// TestVecBinaryKernels checks the vector kernels (assembly on amd64) against
// a scalar loop that spells each op out, for every length 0..70 so that
// the 32-wide, 8-wide and scalar tail paths all run.
func TestVecBinaryKernels(t *testing.T) { bothPaths(t, vecBinaryKernels) }

func vecBinaryKernels(t *testing.T) {
	ref := map[compute.OpType]func(a, b float32) float32{
		compute.OpTypeAdd: func(a, b float32) float32 { return a + b },
		compute.OpTypeSub: func(a, b float32) float32 { return a - b },
		compute.OpTypeMul: func(a, b float32) float32 { return a * b },
		compute.OpTypeDiv: func(a, b float32) float32 { return a / b },
		compute.OpTypeMax: func(a, b float32) float32 {
			if a > b {
				return a
			}
			return b
		},
		compute.OpTypeMin: func(a, b float32) float32 {
			if a < b {
				return a
			}
			return b
		},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for op, f := range ref {
		for n := 0; n <= 70; n++ {
			a, b, d := make([]float32, n), make([]float32, n), make([]float32, n)
			for i := range a {
				a[i] = float32(rng.NormFloat64())
				b[i] = float32(rng.NormFloat64()) + 3
			}
			s := b[0:min(1, n)]
			binVVF32(op, d, a, b)
			for i := range d {
				if want := f(a[i], b[i]); d[i] != want {
					t.Fatalf("%s VV n=%d i=%d: got %v want %v", op, n, i, d[i], want)
				}
			}
			if n == 0 {
				continue
			}
			binVSF32(op, d, a, s[0])
			for i := range d {
				if want := f(a[i], s[0]); d[i] != want {
					t.Fatalf("%s VS n=%d i=%d: got %v want %v", op, n, i, d[i], want)
				}
			}
			binSVF32(op, d, s[0], a)
			for i := range d {
				if want := f(s[0], a[i]); d[i] != want {
					t.Fatalf("%s SV n=%d i=%d: got %v want %v", op, n, i, d[i], want)
				}
			}
			// In place, as the executor does.
			c := append([]float32(nil), a...)
			binVVF32(op, c, c, b)
			for i := range c {
				if want := f(a[i], b[i]); c[i] != want {
					t.Fatalf("%s in place n=%d i=%d: got %v want %v", op, n, i, c[i], want)
				}
			}
		}
	}
}

// TestExpF32Accuracy compares expF32 with float64 math.Exp rounded to
// float32, in ulps, over a dense sweep and the edge cases.
func TestExpF32Accuracy(t *testing.T) { bothPaths(t, expF32Accuracy) }

func expF32Accuracy(t *testing.T) {
	var xs []float32
	for x := -110.0; x <= 95; x += 0.00731 {
		xs = append(xs, float32(x))
	}
	xs = append(xs, 0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		-87.33655, -88.72283, 88.72283, 88.7229, -103.97, -104.5, 1e-8, -1e-8)
	d := make([]float32, len(xs))
	expF32(d, xs)
	worst := 0.0
	for i, x := range xs {
		want := float32(math.Exp(float64(x)))
		got := d[i]
		switch {
		case math.IsInf(float64(want), 1):
			if !math.IsInf(float64(got), 1) {
				t.Fatalf("exp(%v) = %v, want +Inf", x, got)
			}
			continue
		case want == 0 || want < math.SmallestNonzeroFloat32*1e6:
			// Deep in the denormals only absolute error matters.
			if math.Abs(float64(got-want)) > 1e-39 {
				t.Fatalf("exp(%v) = %v, want %v", x, got, want)
			}
			continue
		}
		ulp := float64(math.Nextafter32(want, float32(math.Inf(1))) - want)
		e := math.Abs(float64(got-want)) / ulp
		worst = max(worst, e)
		if e > 2 {
			t.Fatalf("exp(%v) = %v, want %v (%.1f ulp)", x, got, want, e)
		}
	}
	t.Logf("%d points, worst error %.2f ulp", len(xs), worst)
	nan := []float32{float32(math.NaN()), 1, 2, 3, 4, 5, 6, 7}
	expF32(nan, nan)
	if !math.IsNaN(float64(nan[0])) {
		t.Fatalf("exp(NaN) = %v", nan[0])
	}
}

func TestSignF32(t *testing.T) {
	nan := float32(math.NaN())
	negZero := float32(math.Copysign(0, -1))
	in := []float32{3, -2, 0, negZero, nan, float32(math.Inf(1)), float32(math.Inf(-1)), 1e-45, -1e-45}
	want := []float32{1, -1, 0, negZero, nan, 1, -1, 1, -1}
	got := make([]float32, len(in))
	signF32(got, in)
	for i := range in {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(math.IsNaN(float64(got[i])) && math.IsNaN(float64(want[i]))) {
			t.Errorf("sign(%v) = %v, want %v", in[i], got[i], want[i])
		}
	}
}

// TestFoldF32 checks the vector sum against a float64 loop and the vector
// max exactly, for every length 0..70, with NaN propagation for max.
func TestFoldF32(t *testing.T) { bothPaths(t, checkFoldF32) }

func checkFoldF32(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for n := 0; n <= 70; n++ {
		x := make([]float32, n)
		var sum float64
		best := float32(math.Inf(-1))
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 10)
			sum += float64(x[i])
			best = max(best, x[i])
		}
		if got := foldF32(compute.OpTypeReduceSum, x); math.Abs(float64(got)-sum) > 1e-5*float64(n+1)*10 {
			t.Errorf("sum n=%d: got %v want %v", n, got, sum)
		}
		if got := foldF32(compute.OpTypeReduceMax, x); got != best {
			t.Errorf("max n=%d: got %v want %v", n, got, best)
		}
		if n > 0 {
			x[rng.IntN(n)] = float32(math.NaN())
			if got := foldF32(compute.OpTypeReduceMax, x); !math.IsNaN(float64(got)) {
				t.Errorf("max with NaN n=%d: got %v", n, got)
			}
		}
	}
}

// bothPaths runs f with the vector kernels (where this CPU has them) and
// with the portable Go loops.
func bothPaths(t *testing.T, f func(t *testing.T)) {
	saved := useAVX2
	defer func() { useAVX2 = saved }()
	t.Run("detected", f)
	useAVX2 = false
	t.Run("portable", f)
}

func TestAxpyF32(t *testing.T) { bothPaths(t, checkAxpy) }

// checkAxpy checks axpyF32 against float64 loops for every length 0..70.
func checkAxpy(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for n := 0; n <= 70; n++ {
		a, b, c := make([]float32, n), make([]float32, n), make([]float32, n)
		for i := range a {
			a[i], b[i], c[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64()), float32(rng.NormFloat64())
		}
		c0 := append([]float32(nil), c...)
		axpyF32(c, 0.75, b)
		for i := range c {
			if w := float64(c0[i]) + 0.75*float64(b[i]); math.Abs(float64(c[i])-w) > 1e-6*(1+math.Abs(w)) {
				t.Fatalf("axpy n=%d i=%d: got %v want %v", n, i, c[i], w)
			}
		}
	}
}
