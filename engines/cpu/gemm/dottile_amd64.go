//go:build amd64

package gemm

//go:generate go run gen_dottile.go

// The AVX-512 dot-tile kernels (dottile_amd64.s, gen_dottile.go).

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

// The AVX2+FMA dot-tile kernels: the same sums as the AVX-512 ones, the
// 16 lanes held in two YMM registers.

//go:noescape
func dotTileAVX2R4C1(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int)

//go:noescape
func dotTileAVX2R2C1(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int)

//go:noescape
func dotTileAVX2R2C2(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int)

//go:noescape
func dotTileAVX2R2C3(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int)

//go:noescape
func dotTileAVX2R1C1(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int)

//go:noescape
func dotTileAVX2R1C2(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int)

//go:noescape
func dotTileAVX2R1C3(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int)

//go:noescape
func dotTileAVX2R1C4(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int)

//go:noescape
func dotTileAVX2R1C5(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int)

//go:noescape
func dotTileAVX2R1C6(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int)

//go:noescape
func dotTileAVX2BF16R4C1(k int, a *float32, lda int, b *uint16, ldb int, c *float32, ldc int)

//go:noescape
func dotTileAVX2BF16R2C1(k int, a *float32, lda int, b *uint16, ldb int, c *float32, ldc int)

//go:noescape
func dotTileAVX2BF16R2C2(k int, a *float32, lda int, b *uint16, ldb int, c *float32, ldc int)

//go:noescape
func dotTileAVX2BF16R2C3(k int, a *float32, lda int, b *uint16, ldb int, c *float32, ldc int)

//go:noescape
func dotTileAVX2BF16R1C1(k int, a *float32, lda int, b *uint16, ldb int, c *float32, ldc int)

//go:noescape
func dotTileAVX2BF16R1C2(k int, a *float32, lda int, b *uint16, ldb int, c *float32, ldc int)

//go:noescape
func dotTileAVX2BF16R1C3(k int, a *float32, lda int, b *uint16, ldb int, c *float32, ldc int)

//go:noescape
func dotTileAVX2BF16R1C4(k int, a *float32, lda int, b *uint16, ldb int, c *float32, ldc int)

//go:noescape
func dotTileAVX2BF16R1C5(k int, a *float32, lda int, b *uint16, ldb int, c *float32, ldc int)

//go:noescape
func dotTileAVX2BF16R1C6(k int, a *float32, lda int, b *uint16, ldb int, c *float32, ldc int)

// dotTilesAVX512: the AVX-512 path's tiles. With one row of A, 8 rows of B
// a tile; otherwise 4 rows of B times up to 6 of A.
var dotTilesAVX512 = dotTilePlan{
	wide: 8, r: 4, c: 6, c1: 6,
	f32: [9][7]dotTileFn{
		1: {1: dotTileR1C1, 2: dotTileR1C2, 3: dotTileR1C3, 4: dotTileR1C4, 5: dotTileR1C5, 6: dotTileR1C6},
		4: {1: dotTileR4C1, 2: dotTileR4C2, 3: dotTileR4C3, 4: dotTileR4C4, 5: dotTileR4C5, 6: dotTileR4C6},
		8: {1: dotTileR8C1},
	},
	bf16: [9][7]dotTileBF16Fn{
		1: {1: dotTileBF16R1C1, 2: dotTileBF16R1C2, 3: dotTileBF16R1C3, 4: dotTileBF16R1C4, 5: dotTileBF16R1C5, 6: dotTileBF16R1C6},
		4: {1: dotTileBF16R4C1, 2: dotTileBF16R4C2, 3: dotTileBF16R4C3, 4: dotTileBF16R4C4, 5: dotTileBF16R4C5, 6: dotTileBF16R4C6},
		8: {1: dotTileBF16R8C1},
	},
}

// dotTilesAVX2: the AVX2 path's tiles. With one row of A, 4 rows of B a
// tile; otherwise 2 rows of B times up to 3 of A (12 of the 16 YMM
// registers accumulate).
var dotTilesAVX2 = dotTilePlan{
	wide: 4, r: 2, c: 3, c1: 6,
	f32: [9][7]dotTileFn{
		1: {1: dotTileAVX2R1C1, 2: dotTileAVX2R1C2, 3: dotTileAVX2R1C3, 4: dotTileAVX2R1C4, 5: dotTileAVX2R1C5, 6: dotTileAVX2R1C6},
		2: {1: dotTileAVX2R2C1, 2: dotTileAVX2R2C2, 3: dotTileAVX2R2C3},
		4: {1: dotTileAVX2R4C1},
	},
	bf16: [9][7]dotTileBF16Fn{
		1: {1: dotTileAVX2BF16R1C1, 2: dotTileAVX2BF16R1C2, 3: dotTileAVX2BF16R1C3, 4: dotTileAVX2BF16R1C4, 5: dotTileAVX2BF16R1C5, 6: dotTileAVX2BF16R1C6},
		2: {1: dotTileAVX2BF16R2C1, 2: dotTileAVX2BF16R2C2, 3: dotTileAVX2BF16R2C3},
		4: {1: dotTileAVX2BF16R4C1},
	},
}

// dotTilePlanFor returns the tiles of kernel path p, nil for the pure-Go
// path.
func dotTilePlanFor(p string) *dotTilePlan {
	switch p {
	case PathAVX512:
		return &dotTilesAVX512
	case PathAVX2:
		return &dotTilesAVX2
	}
	return nil
}
