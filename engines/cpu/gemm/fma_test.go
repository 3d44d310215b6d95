package gemm

import (
	"math"
	"math/big"
	"math/rand"
	"testing"
)

// fmaBig is a·b + c rounded once to float32, through math/big's exact
// arithmetic: the reference FMA32 is held to.
func fmaBig(a, b, c float32) float32 {
	if math.IsNaN(float64(a)) || math.IsNaN(float64(b)) || math.IsNaN(float64(c)) ||
		math.IsInf(float64(a), 0) || math.IsInf(float64(b), 0) || math.IsInf(float64(c), 0) {
		return float32(float64(a)*float64(b) + float64(c))
	}
	x := new(big.Float).SetPrec(0).SetMode(big.ToNearestEven)
	pa := new(big.Float).SetPrec(200).SetFloat64(float64(a))
	pb := new(big.Float).SetPrec(200).SetFloat64(float64(b))
	pc := new(big.Float).SetPrec(400).SetFloat64(float64(c))
	prod := new(big.Float).SetPrec(400).Mul(pa, pb)
	x.SetPrec(400).Add(prod, pc)
	if x.Sign() == 0 {
		// IEEE: an exact zero sum is +0 unless both addends are -0.
		p := float64(a) * float64(b)
		return float32(p + float64(c))
	}
	f, _ := x.Float32()
	return f
}

// TestFMA32 holds FMA32 to exact arithmetic on random operands, on
// operands built to make the float64 sum land on a float32 midpoint (the
// double rounding FMA32 must avoid), near cancellation, across the
// subnormal range, at overflow, and on the special values.
func TestFMA32(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	check := func(a, b, c float32) {
		t.Helper()
		got, want := FMA32(a, b, c), fmaBig(a, b, c)
		if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
			t.Fatalf("FMA32(%g, %g, %g) = %g (%#08x), want %g (%#08x)", a, b, c, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
	randF := func(lo, hi int) float32 {
		e := lo + r.Intn(hi-lo+1)
		m := 1 + r.Float64()
		if r.Intn(2) == 0 {
			m = -m
		}
		return float32(math.Ldexp(m, e))
	}
	for range 300000 {
		check(randF(-20, 20), randF(-20, 20), randF(-20, 20))
	}
	// Midpoints: a·b = u/2·(1 - j²·2⁻⁴⁶) for u the spacing of float32
	// at c, so p + c rounds in float64 onto the midpoint c ± u/2 while the
	// exact sum lies just inside it.
	midpoints := 0
	for range 300000 {
		c := randF(-5, 5)
		ulp := math.Abs(float64(math.Nextafter32(c, float32(math.Inf(1)))) - float64(c))
		j := float64(1 + r.Intn(300))
		a := float32(ulp / 2 * (1 + j*math.Ldexp(1, -23)))
		b := float32(1 - j*math.Ldexp(1, -23))
		if r.Intn(2) == 0 {
			a = -a
		}
		p := float64(a) * float64(b)
		if bits := math.Float64bits(p + float64(c)); bits&0x1fffffff == 0x10000000 {
			midpoints++
		}
		check(a, b, c)
	}
	if midpoints < 1000 {
		t.Fatalf("only %d of the midpoint cases land on a float32 midpoint in float64", midpoints)
	}
	// Cancellation, subnormals, overflow.
	for range 200000 {
		a, b := randF(-10, 10), randF(-10, 10)
		c := -float32(float64(a) * float64(b))
		check(a, b, c)
		check(randF(-80, -60), randF(-80, -60), randF(-150, -120))
		check(randF(-75, -60), randF(-75, -60), 0)
		check(randF(60, 64), randF(60, 64), randF(100, 127))
	}
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	for _, v := range [][3]float32{{inf, 0, 1}, {inf, 1, -inf}, {inf, 2, 3}, {nan, 1, 1}, {1, 1, nan},
		{0, 5, 0}, {-0.0, 5, 0}, {float32(math.Copysign(0, -1)), 1, float32(math.Copysign(0, -1))},
		{math.MaxFloat32, 2, 0}, {math.MaxFloat32, 1, math.MaxFloat32}, {1e-45, 0.5, 0}, {1e-45, 1.5, 0}} {
		check(v[0], v[1], v[2])
	}
}

func BenchmarkFMA32(b *testing.B) {
	x, y, s := float32(1.0001), float32(0.9999), float32(0)
	for range b.N {
		s = FMA32(x, y, s)
	}
	sink = s
}

var sink float32
