//go:build amd64

package gemm

import "golang.org/x/sys/cpu"

//go:generate go run gen_dottile.go

// dotTilesAVX512: the dot-product tile kernels of dottile_amd64.s need AVX-512F.
var dotTilesAVX512 = cpu.X86.HasAVX512F

//go:noescape
func dotTileR4C1(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int)

//go:noescape
func dotTileR4C2(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int)

//go:noescape
func dotTileR4C3(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int)

//go:noescape
func dotTileR4C4(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int)

//go:noescape
func dotTileR4C5(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int)

//go:noescape
func dotTileR4C6(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int)

//go:noescape
func dotTileR1C1(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int)

//go:noescape
func dotTileR1C2(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int)

//go:noescape
func dotTileR1C3(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int)

//go:noescape
func dotTileR1C4(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int)

//go:noescape
func dotTileR1C5(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int)

//go:noescape
func dotTileR1C6(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int)

//go:noescape
func dotTileR8C1(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int)

//go:noescape
func dotTileBF16R4C1(k int, a *float32, lda int, b *uint16, ldb int, c *float32, ldc int)

//go:noescape
func dotTileBF16R4C2(k int, a *float32, lda int, b *uint16, ldb int, c *float32, ldc int)

//go:noescape
func dotTileBF16R4C3(k int, a *float32, lda int, b *uint16, ldb int, c *float32, ldc int)

//go:noescape
func dotTileBF16R4C4(k int, a *float32, lda int, b *uint16, ldb int, c *float32, ldc int)

//go:noescape
func dotTileBF16R4C5(k int, a *float32, lda int, b *uint16, ldb int, c *float32, ldc int)

//go:noescape
func dotTileBF16R4C6(k int, a *float32, lda int, b *uint16, ldb int, c *float32, ldc int)

//go:noescape
func dotTileBF16R1C1(k int, a *float32, lda int, b *uint16, ldb int, c *float32, ldc int)

//go:noescape
func dotTileBF16R1C2(k int, a *float32, lda int, b *uint16, ldb int, c *float32, ldc int)

//go:noescape
func dotTileBF16R1C3(k int, a *float32, lda int, b *uint16, ldb int, c *float32, ldc int)

//go:noescape
func dotTileBF16R1C4(k int, a *float32, lda int, b *uint16, ldb int, c *float32, ldc int)

//go:noescape
func dotTileBF16R1C5(k int, a *float32, lda int, b *uint16, ldb int, c *float32, ldc int)

//go:noescape
func dotTileBF16R1C6(k int, a *float32, lda int, b *uint16, ldb int, c *float32, ldc int)

//go:noescape
func dotTileBF16R8C1(k int, a *float32, lda int, b *uint16, ldb int, c *float32, ldc int)

// dotTileFns[r][c] is the kernel for r rows of B and c rows of A (nil where none is generated).
var dotTileFns = [9][7]dotTileFn{
	1: {1: dotTileR1C1, 2: dotTileR1C2, 3: dotTileR1C3, 4: dotTileR1C4, 5: dotTileR1C5, 6: dotTileR1C6},
	4: {1: dotTileR4C1, 2: dotTileR4C2, 3: dotTileR4C3, 4: dotTileR4C4, 5: dotTileR4C5, 6: dotTileR4C6},
	8: {1: dotTileR8C1},
}

// dotTileBF16Fns[r][c] is dotTileFns[r][c] for a bfloat16 B.
var dotTileBF16Fns = [9][7]dotTileBF16Fn{
	1: {1: dotTileBF16R1C1, 2: dotTileBF16R1C2, 3: dotTileBF16R1C3, 4: dotTileBF16R1C4, 5: dotTileBF16R1C5, 6: dotTileBF16R1C6},
	4: {1: dotTileBF16R4C1, 2: dotTileBF16R4C2, 3: dotTileBF16R4C3, 4: dotTileBF16R4C4, 5: dotTileBF16R4C5, 6: dotTileBF16R4C6},
	8: {1: dotTileBF16R8C1},
}
