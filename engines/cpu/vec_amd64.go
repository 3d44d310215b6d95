//go:build amd64

package cpu

import (
	"unsafe"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes/bfloat16"
	"golang.org/x/sys/cpu"

	"github.com/cde-rl/cde/engines/cpu/gemm"
)

// useAVX2 selects the assembly kernels of vec_amd64.s: on the avx512 and
// avx2 kernel paths (gemm.Path; CDE_CPU_KERNEL forces one). The "go" path
// runs the portable loops, which compute the same bits.
var useAVX2 = gemm.Path() != gemm.PathGo && cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func vecAddVV(d, a, b *float32, n int)

//go:noescape
func vecSubVV(d, a, b *float32, n int)

//go:noescape
func vecMulVV(d, a, b *float32, n int)

//go:noescape
func vecDivVV(d, a, b *float32, n int)

//go:noescape
func vecMaxVV(d, a, b *float32, n int)

//go:noescape
func vecMinVV(d, a, b *float32, n int)

//go:noescape
func vecAddVS(d, a *float32, s float32, n int)

//go:noescape
func vecSubVS(d, a *float32, s float32, n int)

//go:noescape
func vecMulVS(d, a *float32, s float32, n int)

//go:noescape
func vecDivVS(d, a *float32, s float32, n int)

//go:noescape
func vecMaxVS(d, a *float32, s float32, n int)

//go:noescape
func vecMinVS(d, a *float32, s float32, n int)

//go:noescape
func vecSubSV(d, b *float32, s float32, n int)

//go:noescape
func vecDivSV(d, b *float32, s float32, n int)

//go:noescape
func vecExp(d, x *float32, n int)

// simdVV runs d = a op b on the vector part of d and returns how many
// elements it did (0 if op has no kernel or AVX2 is missing).
func simdVV(op compute.OpType, d, a, b []float32) int {
	n := len(d) &^ 7
	if !useAVX2 || n == 0 {
		return 0
	}
	_, _ = a[n-1], b[n-1]
	switch op {
	case compute.OpTypeAdd:
		vecAddVV(&d[0], &a[0], &b[0], n)
	case compute.OpTypeSub:
		vecSubVV(&d[0], &a[0], &b[0], n)
	case compute.OpTypeMul:
		vecMulVV(&d[0], &a[0], &b[0], n)
	case compute.OpTypeDiv:
		vecDivVV(&d[0], &a[0], &b[0], n)
	case compute.OpTypeMax:
		vecMaxVV(&d[0], &a[0], &b[0], n)
	case compute.OpTypeMin:
		vecMinVV(&d[0], &a[0], &b[0], n)
	default:
		return 0
	}
	return n
}

func simdVS(op compute.OpType, d, a []float32, s float32) int {
	n := len(d) &^ 7
	if !useAVX2 || n == 0 {
		return 0
	}
	_ = a[n-1]
	switch op {
	case compute.OpTypeAdd:
		vecAddVS(&d[0], &a[0], s, n)
	case compute.OpTypeSub:
		vecSubVS(&d[0], &a[0], s, n)
	case compute.OpTypeMul:
		vecMulVS(&d[0], &a[0], s, n)
	case compute.OpTypeDiv:
		vecDivVS(&d[0], &a[0], s, n)
	case compute.OpTypeMax:
		vecMaxVS(&d[0], &a[0], s, n)
	case compute.OpTypeMin:
		vecMinVS(&d[0], &a[0], s, n)
	default:
		return 0
	}
	return n
}

func simdSV(op compute.OpType, d []float32, s float32, b []float32) int {
	n := len(d) &^ 7
	if !useAVX2 || n == 0 {
		return 0
	}
	_ = b[n-1]
	switch op {
	case compute.OpTypeAdd:
		vecAddVS(&d[0], &b[0], s, n)
	case compute.OpTypeSub:
		vecSubSV(&d[0], &b[0], s, n)
	case compute.OpTypeMul:
		vecMulVS(&d[0], &b[0], s, n)
	case compute.OpTypeDiv:
		vecDivSV(&d[0], &b[0], s, n)
	case compute.OpTypeMax:
		vecMaxVS(&d[0], &b[0], s, n)
	case compute.OpTypeMin:
		vecMinVS(&d[0], &b[0], s, n)
	default:
		return 0
	}
	return n
}

func simdExp(d, x []float32) int { // exp32's order (vec.go), 8 lanes at a time
	n := len(d) &^ 7
	if !useAVX2 || n == 0 {
		return 0
	}
	_ = x[n-1]
	vecExp(&d[0], &x[0], n)
	return n
}

//go:noescape
func vecSum(x *float32, n int) float32

//go:noescape
func vecMax(x *float32, n int) float32

// simdFold reduces the vector part of x (sum or max) and returns the
// partial result and how many elements it covered. Max does not
// propagate NaN; callers check for NaN separately.
func simdFold(op compute.OpType, x []float32) (float32, int) {
	n := len(x) &^ 7
	if !useAVX2 || n == 0 {
		return 0, 0
	}
	switch op {
	case compute.OpTypeReduceSum:
		return vecSum(&x[0], n), n
	case compute.OpTypeReduceMax:
		return vecMax(&x[0], n), n
	}
	return 0, 0
}

//go:noescape
func vecAxpy(c, b *float32, a float32, n int)

// axpyF32 does c[i] = fma(a, b[i], c[i]): one rounding each, in the
// assembly (VFMADD) and in the tail (gemm.FMA32) alike.
func axpyF32(c []float32, a float32, b []float32) {
	k := 0
	if n := len(c) &^ 7; useAVX2 && n > 0 {
		_ = b[n-1]
		vecAxpy(&c[0], &b[0], a, n)
		k = n
	}
	b = b[:len(c)]
	for i := k; i < len(c); i++ {
		if v, ok := gemm.FMA32Quick(a, b[i], c[i]); ok {
			c[i] = v
		} else {
			c[i] = gemm.FMA32(a, b[i], c[i])
		}
	}
}

//go:noescape
func vecBF16ToF32(d *float32, x *uint16, n int)

// simdBF16ToF32 widens the vector part of x into d and returns how many
// elements it did (0 without AVX2).
func simdBF16ToF32(d []float32, x []bfloat16.BFloat16) int {
	n := min(len(d), len(x)) &^ 7
	if !useAVX2 || n == 0 {
		return 0
	}
	vecBF16ToF32(&d[0], (*uint16)(unsafe.Pointer(&x[0])), n)
	return n
}
