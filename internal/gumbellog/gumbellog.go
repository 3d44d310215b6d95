// Package gumbellog computes Gumbel noise -log(-log(u)) from uniforms u,
// bit for bit as float32(-math.Log(-math.Log(u))) does, several values at
// once where the CPU allows.
//
// On amd64 math.Log is an assembly routine (the FreeBSD algorithm: frexp,
// a rational approximation in s = f/(2+f), and the exponent times log 2 in
// two parts). Its operations are IEEE additions, multiplications and one
// division, each rounded once and without fused multiply-adds, so the same
// operations in the same order on 8 lanes of AVX-512 give the same bits.
// The tests compare the two on many millions of inputs and on the inputs
// where the algorithm branches.
package gumbellog

import "math"

// Transform sets dst[i] = float32(-math.Log(-math.Log(u[i]))) for every i
// (len(dst) == len(u)). Every u[i] must be in (0, 1), as uniform draws
// that are redrawn when 0 are: then both logarithms take positive normal
// numbers, the only inputs the vector path handles.
func Transform(dst []float32, u []float64) {
	u = u[:len(dst)]
	n := 0
	if haveVector {
		n = len(dst) &^ 7
		if n > 0 {
			transformVector(dst[:n], u[:n])
		}
	}
	for i := n; i < len(dst); i++ {
		dst[i] = float32(-math.Log(-math.Log(u[i])))
	}
}
