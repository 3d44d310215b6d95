package gumbellog

import "golang.org/x/sys/cpu"

// haveVector: AVX-512 F for the arithmetic, DQ for the int64 to float64
// conversion of the exponent.
var haveVector = cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ

// transformVector is Transform on len(dst) values, a multiple of 8.
//
//go:noescape
func transformVector(dst []float32, u []float64)
