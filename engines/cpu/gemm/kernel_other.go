//go:build !amd64

package gemm

func availableKernels() []microKernel { return []microKernel{goKernel} }
