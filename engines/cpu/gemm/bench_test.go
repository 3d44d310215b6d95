package gemm

import (
	"fmt"
	"math/rand"
	"runtime"
	"testing"
)

// benchKernels runs f for every available micro-kernel.
func benchKernels(b *testing.B, f func(b *testing.B)) {
	saved := kernel
	defer func() { kernel = saved }()
	for _, kern := range availableKernels() {
		kernel = kern
		b.Run(kern.name, f)
	}
}

func benchGemm(b *testing.B, transA, transB bool, m, n, k int) {
	r := rand.New(rand.NewSource(1))
	a, bb := randSlice(r, m*k), randSlice(r, k*n)
	c := make([]float32, m*n)
	lda, ldb := k, n
	if transA {
		lda = m
	}
	if transB {
		ldb = k
	}
	b.ResetTimer()
	for b.Loop() {
		SgemmT(transA, transB, m, n, k, a, lda, bb, ldb, c, n)
	}
	b.ReportMetric(2*float64(m)*float64(n)*float64(k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkSgemm: full Sgemm (packing + parallel blocks) on the model's
// shapes, with GOMAXPROCS workers.
func BenchmarkSgemm(b *testing.B) {
	for _, s := range []struct {
		name           string
		transA, transB bool
		m, n, k        int
	}{
		{"4096x128x512", false, false, 4096, 512, 128},
		{"512x512x512", false, false, 512, 512, 512},
		{"dW_AT_B_128x512x4096", true, false, 128, 512, 4096},
		{"dX_A_BT_4096x128x512", false, true, 4096, 128, 512},
	} {
		b.Run(s.name, func(b *testing.B) {
			benchKernels(b, func(b *testing.B) { benchGemm(b, s.transA, s.transB, s.m, s.n, s.k) })
		})
	}
}

// BenchmarkKernel: single-thread micro-kernel throughput on packed panels
// (no packing), to compare with the core's FMA peak (BenchmarkFMAPeak).
// kc=64 keeps A and B panels in L1; kc=256 is the blocking used by Sgemm
// (B micro-panel in L1, A block in L2).
func BenchmarkKernel(b *testing.B) {
	for _, kc := range []int{64, 256} {
		b.Run(fmt.Sprintf("kc=%d", kc), func(b *testing.B) {
			benchKernels(b, func(b *testing.B) { benchKernel(b, kc) })
		})
	}
}

func benchKernel(b *testing.B, kc int) {
	kern := kernel
	const tilesM, tilesN = 4, 2 // A block mr·4 rows, B block nr·2 columns
	r := rand.New(rand.NewSource(1))
	a := randSlice(r, kern.mr*tilesM*kc)
	bp := randSlice(r, kern.nr*tilesN*kc)
	ldc := kern.nr * tilesN
	c := make([]float32, kern.mr*tilesM*ldc)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for b.Loop() {
		for jr := 0; jr < tilesN; jr++ {
			for ir := 0; ir < tilesM; ir++ {
				kern.fn(kc, a[ir*kern.mr*kc:], bp[jr*kern.nr*kc:], c[ir*kern.mr*ldc+jr*kern.nr:], ldc, true)
			}
		}
	}
	flops := 2 * float64(kern.mr*tilesM) * float64(kern.nr*tilesN) * float64(kc)
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkSgemmSingleThread: whole Sgemm on one core (GOMAXPROCS=1).
func BenchmarkSgemmSingleThread(b *testing.B) {
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	for _, sz := range []int{512} {
		b.Run(fmt.Sprintf("%dx%dx%d", sz, sz, sz), func(b *testing.B) {
			benchKernels(b, func(b *testing.B) { benchGemm(b, false, false, sz, sz, sz) })
		})
	}
}
