//go:build !amd64

package cpu

import (
	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes/bfloat16"

	"github.com/cde-rl/cde/engines/cpu/gemm"
)

func simdVV(op compute.OpType, d, a, b []float32) int                   { return 0 }
func simdVS(op compute.OpType, d, a []float32, s float32) int           { return 0 }
func simdSV(op compute.OpType, d []float32, s float32, b []float32) int { return 0 }
func simdExp(d, x []float32) int                                        { return 0 }

func simdFold(op compute.OpType, x []float32) (float32, int) { return 0, 0 }

// useAVX2 is false off amd64; tests toggle it on amd64 to run the
// portable paths there too.
var useAVX2 = false

func axpyF32(c []float32, a float32, b []float32) {
	b = b[:len(c)]
	for i := range c {
		if v, ok := gemm.FMA32Quick(a, b[i], c[i]); ok {
			c[i] = v
		} else {
			c[i] = gemm.FMA32(a, b[i], c[i])
		}
	}
}

func simdBF16ToF32(d []float32, x []bfloat16.BFloat16) int { return 0 }
