//go:build amd64

package gemm

import "golang.org/x/sys/cpu"

//go:noescape
func sgemmKernel6x16AVX2(kc int, a, b, c *float32, ldc int, accumulate bool)

//go:noescape
func sgemmKernel12x32AVX512(kc int, a, b, c *float32, ldc int, accumulate bool)

// avx2Kernel: 6×16 tile, 12 YMM accumulators.
var avx2Kernel = microKernel{name: "avx2-6x16", mr: 6, nr: 16, fn: kernelAVX2}

// avx512Kernel: 12×32 tile, 24 ZMM accumulators.
var avx512Kernel = microKernel{name: "avx512-12x32", mr: 12, nr: 32, fn: kernelAVX512}

func kernelAVX2(kc int, a, b, c []float32, ldc int, accumulate bool) {
	_ = a[6*kc-1]
	_ = b[16*kc-1]
	_ = c[5*ldc+15]
	sgemmKernel6x16AVX2(kc, &a[0], &b[0], &c[0], ldc, accumulate)
}

func kernelAVX512(kc int, a, b, c []float32, ldc int, accumulate bool) {
	_ = a[12*kc-1]
	_ = b[32*kc-1]
	_ = c[11*ldc+31]
	sgemmKernel12x32AVX512(kc, &a[0], &b[0], &c[0], ldc, accumulate)
}

// availableKernels lists the micro-kernels this CPU can run, best first.
func availableKernels() []microKernel {
	var ks []microKernel
	if cpu.X86.HasAVX512F {
		ks = append(ks, avx512Kernel)
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		ks = append(ks, avx2Kernel)
	}
	return append(ks, goKernel)
}

// availablePaths lists the kernel paths this CPU can run, fastest first.
func availablePaths() []string {
	var ps []string
	if cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		ps = append(ps, PathAVX512)
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		ps = append(ps, PathAVX2)
	}
	return append(ps, PathGo)
}

// setPath installs path p's kernels. The AVX-512 path keeps the AVX2 6×16
// tile for products whose columns are a multiple of 16 but not of 32, or
// fewer than 32.
func setPath(p string) {
	narrowKernel = nil
	switch p {
	case PathAVX512:
		kernel = avx512Kernel
		narrowKernel = &avx2Kernel
	case PathAVX2:
		kernel = avx2Kernel
	default:
		kernel = goKernel
	}
	dotTilePath = p
}

// fmaPeakAVX2 and fmaPeakAVX512 run n iterations of 12 independent FMAs
// (YMM / ZMM); used only by benchmarks to measure the core's FMA peak.
//
//go:noescape
func fmaPeakAVX2(n int)

//go:noescape
func fmaPeakAVX512(n int)
