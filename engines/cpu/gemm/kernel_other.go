//go:build !amd64

package gemm

func availableKernels() []microKernel { return []microKernel{goKernel} }

// availablePaths: only the pure-Go path off amd64.
func availablePaths() []string { return []string{PathGo} }

func setPath(p string) {
	kernel = goKernel
	dotTilePath = p
}
