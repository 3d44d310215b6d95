//go:build !amd64

package gemm

const dotTilesAVX512 = false

var dotTileFns [9][7]dotTileFn

var dotTileBF16Fns [9][7]dotTileBF16Fn
