package gemm

import "math"

// FMA32 returns a·b + c rounded once to float32 (round to nearest, ties to
// even), the result of the VFMADD instructions the assembly kernels use,
// computed without them: the pure-Go path's every multiply-add goes through
// it, so its sums equal the assembly's bit for bit whatever the compiler
// does with x*y+z (Go may fuse that on arm64, ppc64 and s390x, and does
// not on amd64).
//
// The product of two float32 values is exact in float64 (48 significant
// bits), and so p + c rounded to float64 is one rounding of the exact
// result. Rounding that float64 to float32 is a second rounding, which
// errs only when the float64 falls exactly on a float32 midpoint while the
// exact sum does not; then, and for results in float32's subnormal range,
// the sum is rounded to odd in float64 first (its error found by TwoSum),
// which makes the second rounding exact (53 ≥ 24 + 2 bits). NaN payloads
// are not specified.
func FMA32(a, b, c float32) float32 {
	p := float64(a) * float64(b)
	s := p + float64(c)
	bits := math.Float64bits(s)
	exp := bits >> 52 & 0x7ff
	if exp >= 1023-126 && bits&0x1fffffff != 0x10000000 {
		// A normal float32 result away from a midpoint (Inf and NaN
		// included: their exponent is 0x7ff).
		return float32(s)
	}
	if exp == 0x7ff {
		return float32(s)
	}
	cc := float64(c)
	bb := s - p
	err := (p - (s - bb)) + (cc - bb)
	if err == 0 || bits&1 == 1 {
		return float32(s)
	}
	if (err > 0) == (s > 0) {
		bits++
	} else {
		bits--
	}
	return float32(math.Float64frombits(bits))
}

// FMA32Quick is FMA32's common case, small enough to inline (FMA32 is
// not, and a call per multiply-add halves the speed): the float64 sum
// (one rounding, the product being exact in float64, so fused or not)
// converted to float32, with ok when that is the one rounding of a·b + c:
// a normal float32 magnitude (or Inf or NaN), not on a float32 midpoint.
// Otherwise the caller runs FMA32:
//
//	if v, ok := FMA32Quick(a, b, s); ok {
//		s = v
//	} else {
//		s = FMA32(a, b, s)
//	}
func FMA32Quick(a, b, c float32) (v float32, ok bool) {
	s := float64(a)*float64(b) + float64(c)
	bits := math.Float64bits(s)
	return float32(s), bits>>52&0x7ff >= 1023-126 && bits&0x1fffffff != 0x10000000
}
