//go:build amd64

package gemm

import (
	"runtime"
	"testing"

	"golang.org/x/sys/cpu"
)

// BenchmarkFMAPeak measures one core's FMA peak (register-only FMAs), the
// reference for BenchmarkKernel's % of peak.
func BenchmarkFMAPeak(b *testing.B) {
	const iters = 1 << 16
	run := func(b *testing.B, f func(int), floats int) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for b.Loop() {
			f(iters)
		}
		flops := float64(iters) * 12 * float64(floats) * 2
		b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		b.Run("avx2", func(b *testing.B) { run(b, fmaPeakAVX2, 8) })
	}
	if cpu.X86.HasAVX512F {
		b.Run("avx512", func(b *testing.B) { run(b, fmaPeakAVX512, 16) })
	}
}
