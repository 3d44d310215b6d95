package gemm

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// The kernel paths. Every path computes every sum in the same order (see
// docs/engine.md, "One summation order"), so they differ in speed only.
const (
	PathAVX512 = "avx512" // AVX-512 gemm tiles and dot tiles, AVX2 elementwise kernels
	PathAVX2   = "avx2"   // AVX2+FMA gemm tiles, dot tiles and elementwise kernels
	PathGo     = "go"     // pure Go, on every CPU and architecture
)

// KernelEnv names the environment variable that forces a kernel path.
const KernelEnv = "CDE_CPU_KERNEL"

// path is the kernel path in use, chosen when the package loads.
var path = choosePath(os.Getenv(KernelEnv))

// Path returns the kernel path in use: "avx512", "avx2" or "go".
func Path() string { return path }

// Paths returns the kernel paths this CPU can run, fastest first; the last
// is always "go".
func Paths() []string { return availablePaths() }

// choosePath returns the path an environment value asks for: the fastest
// this CPU has for "" or "auto", else the named one, which this CPU must
// have. A bad value stops the program at start-up with the variable, the
// value and the choices: a run must never silently take another path
// than the one asked for.
func choosePath(v string) string {
	have := availablePaths()
	v = strings.TrimSpace(strings.ToLower(v))
	if v == "" || v == "auto" {
		setPath(have[0])
		return have[0]
	}
	if !slices.Contains(have, v) {
		all := []string{PathAVX512, PathAVX2, PathGo}
		if slices.Contains(all, v) {
			panic(fmt.Sprintf("%s=%s: this CPU cannot run the %s kernels; it has %s (or auto)", KernelEnv, v, v, strings.Join(have, ", ")))
		}
		panic(fmt.Sprintf("%s=%q: unknown kernel path; use one of %s or auto", KernelEnv, v, strings.Join(all, ", ")))
	}
	setPath(v)
	return v
}
