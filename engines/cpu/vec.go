package cpu

import (
	"math"

	"github.com/cde-rl/cde/engines/cpu/gemm"
)

// The portable forms of the vector kernels whose results depend on an
// order of operations: each does exactly the operations of its assembly
// kernel (vec_amd64.s), in the same order and with the same roundings, so
// that the "go" kernel path gives the same bits as the others
// (docs/engine.md, "One summation order").

// sumLanes is Σ x (len(x) a multiple of 8) in vecSum's order: four 8-lane
// accumulators over blocks of 32, combined as (a0+a1)+(a2+a3), then the
// remaining blocks of 8 into that, then the lanes folded as l+4, l+2, l+1.
func sumLanes(x []float32) float32 {
	var a0, a1, a2, a3 [8]float32
	i := 0
	for ; i+32 <= len(x); i += 32 {
		b := x[i : i+32 : i+32]
		for l := range 8 {
			a0[l] += b[l]
			a1[l] += b[8+l]
			a2[l] += b[16+l]
			a3[l] += b[24+l]
		}
	}
	var s [8]float32
	for l := range 8 {
		s[l] = (a0[l] + a1[l]) + (a2[l] + a3[l])
	}
	for ; i+8 <= len(x); i += 8 {
		for l := range 8 {
			s[l] += x[i+l]
		}
	}
	return foldLanes(s, func(a, b float32) float32 { return a + b })
}

// maxLanes is vecMax's order for max (len(x) a positive multiple of 8):
// VMAXPS keeps the first operand only when it is greater (so the second
// when they are equal, or either is NaN).
func maxLanes(x []float32) float32 {
	mx := func(a, b float32) float32 {
		if a > b {
			return a
		}
		return b
	}
	var a [4][8]float32
	for q := range a {
		copy(a[q][:], x[:8])
	}
	i := 0
	for ; i+32 <= len(x); i += 32 {
		for q := range 4 {
			for l := range 8 {
				a[q][l] = mx(a[q][l], x[i+8*q+l])
			}
		}
	}
	var s [8]float32
	for l := range 8 {
		s[l] = mx(mx(a[0][l], a[1][l]), mx(a[2][l], a[3][l]))
	}
	for ; i+8 <= len(x); i += 8 {
		for l := range 8 {
			s[l] = mx(s[l], x[i+l])
		}
	}
	return foldLanes(s, mx)
}

// foldLanes folds 8 lanes as HFOLD does: lane l with l+4, then with l+2
// (of the four), then lane 0 with lane 1.
func foldLanes(s [8]float32, op func(a, b float32) float32) float32 {
	var t [4]float32
	for l := range 4 {
		t[l] = op(s[l], s[l+4])
	}
	u0, u1 := op(t[0], t[2]), op(t[1], t[3])
	return op(u0, u1)
}

// The constants of vecExp (their float32 bits).
var (
	expLo    = math.Float32frombits(0xc2d00000) // -104
	expHi    = math.Float32frombits(0x42b20000) // 89
	expLog2e = math.Float32frombits(0x3fb8aa3b)
	expC1    = math.Float32frombits(0x3f318000) // ln 2, high part
	expC2    = math.Float32frombits(0xb95e8083) // ln 2, low part
	expP     = [6]float32{
		math.Float32frombits(0x39506967), math.Float32frombits(0x3ab743ce),
		math.Float32frombits(0x3c088908), math.Float32frombits(0x3d2aa9c1),
		math.Float32frombits(0x3e2aaaaa), math.Float32frombits(0x3f000000),
	}
)

// exp32 is vecExp for one value: clamp to [-104, 89], n = x·log2 e
// rounded to nearest even, r = x - n·ln 2 in two FMAs, e^r = 1 + r +
// r²·P(r) by Horner in FMAs, times 2^n in two halves. Every product that
// the kernel fuses is gemm.FMA32; every other operation is one float32
// operation, rounded (the conversions keep Go from fusing them).
func exp32(x float32) float32 {
	if expLo > x {
		x = expLo
	}
	if expHi < x {
		x = expHi
	}
	t := float32(x * expLog2e)
	var ni int32
	if t != t {
		ni = math.MinInt32 // VCVTPS2DQ's answer for NaN
	} else {
		ni = int32(math.RoundToEven(float64(t)))
	}
	n := float32(ni)
	r := fma(-n, expC1, x)
	r = fma(-n, expC2, r)
	p := expP[0]
	for _, c := range expP[1:] {
		p = fma(r, p, c)
	}
	r2 := float32(r * r)
	p = fma(r2, p, r)
	p = float32(p + 1)
	h := ni >> 1
	g := ni - h
	s1 := math.Float32frombits(uint32(h+127) << 23)
	s2 := math.Float32frombits(uint32(g+127) << 23)
	return float32(float32(p*s1) * s2)
}

// fma is gemm.FMA32 with its common case inlined.
func fma(a, b, c float32) float32 {
	if v, ok := gemm.FMA32Quick(a, b, c); ok {
		return v
	}
	return gemm.FMA32(a, b, c)
}
