package gemm

import (
	"fmt"
	"math"
	"runtime"
)

// C = A·Bᵀ for a few rows of A (decode steps: a batch of hidden states
// times a Hugging Face [out, in] weight) as register tiles of dot products
// along k. Both operands are read in place: the packed path would copy
// (transpose) all of B on every call, which at a few rows of A costs as
// much as the arithmetic.
//
// One summation order. Every output C[i,j] = Σ_p A[i,p]·B[j,p] is
// computed in the same order on every kernel path (AVX-512, AVX2, pure
// Go), whatever the tile that computes it and the number of threads, so
// results are bit-identical everywhere. With k16 = k &^ 15 and fma one
// rounding of a·b + c:
//
//	x[0..15] = +0
//	for p in [0, k16) ascending: x[p%16] = fma(A[i,p], B[j,p], x[p%16])
//	y[l] = x[l] + x[l+8]  (l < 8)
//	z[l] = y[l] + y[l+4]  (l < 4)
//	w[l] = z[l] + z[l+2]  (l < 2)
//	s = w[0] + w[1]
//	for p in [k16, k) ascending: s = fma(A[i,p], B[j,p], s)
//	C[i,j] = s
//
// (for k < 16, a plain chain from +0). A bfloat16 B is widened exactly
// (bits << 16) and follows the same order. The assembly kernels compute
// everything up to s (AVX-512: the 16 lanes in one ZMM; AVX2: in two YMM);
// the tail runs in Go with FMA32.

// dotTileFn computes C[i*ldc+j] = s (above) for a tile of rows of A and
// rows of B, k a positive multiple of 16.
type dotTileFn func(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int)

// dotTileBF16Fn is a dotTileFn whose B holds bfloat16 values.
type dotTileBF16Fn func(k int, a *float32, lda int, b *uint16, ldb int, c *float32, ldc int)

// dotTilePlan is one kernel path's tiling: with one row of A, tiles of
// wide rows of B; otherwise tiles of r rows of B times up to c rows of A;
// the rows of B left over, single rows times up to c1 rows of A. f32[r][c]
// and bf16[r][c] are the kernels (nil where none is generated).
type dotTilePlan struct {
	wide, r, c, c1 int
	f32            [9][7]dotTileFn
	bf16           [9][7]dotTileBF16Fn
}

// dotTileMaxA is the largest A (m·k floats, 1 MiB) that takes the
// dot-tile path: every tile of B rows runs over all of A, which must stay
// in the per-core L2. Measured (BenchmarkDecodeABt, d 1024 / ff 3072
// shapes): dot tiles are 1.1-13x faster than packing up to this size, and
// up to 1.3x slower at 256 x 3072 and 512 x 1024.
const dotTileMaxA = 1 << 18

// useDotTiles reports whether g runs as dot-product tiles.
func (g *gemmArgs) useDotTiles() bool { return DotTiles(g.transA, g.transB, g.m, g.k) }

// DotTiles reports whether SgemmT computes op(A)·op(B) with these
// operands as dot-product tiles that read B in place (no packing), in
// their one summation order (above): for C = A·Bᵀ with A (m×k) small
// enough to stay in L2. It depends on the shape only, not on the CPU or
// the kernel path.
func DotTiles(transA, transB bool, m, k int) bool {
	return useDotTilesSwitch && transB && !transA && m*k <= dotTileMaxA
}

// useDotTilesSwitch lets tests and benchmarks compare with the packed path.
var useDotTilesSwitch = true

// runDotTiles splits the rows of B (the columns of C) into blocks handed
// out to workers (run() passes 1 for serial or small products).
func (g *gemmArgs) runDotTiles(workers int) {
	bl := splitDotTileRows(g.n, workers)
	parallelFor(min(workers, bl.count), bl.count, func(_, i int) {
		g.dotTileBlock(bl.rows(i))
	})
}

// Blocks of dotTileRows rows of B: enough work per hand-off (64·k·m
// multiply-adds), and many blocks per worker on the large weights. When
// there are more than 4 blocks per worker, the last 2·workers are cut into
// quarters, so that the workers end a product closer together. In batch-1
// decode of the Qwen3-0.6B shape (products of 4-12 MB) the first worker to
// finish waited 17 µs on average for the other with whole blocks and 9 µs
// with the tail cut, and a product took 209 and 201 µs. Measured with
// temporary timers around each block, the two splits alternated by
// repetition in one hfbench run.
const dotTileRows = 64

// dotTileTailRows is the size of the blocks the tail is cut into.
const dotTileTailRows = dotTileRows / 4

// dotTileSplit is a division of n rows of B into count blocks: big blocks
// of dotTileRows, then small ones of dotTileTailRows.
type dotTileSplit struct {
	n, big, count int
}

func splitDotTileRows(n, workers int) dotTileSplit {
	big := (n + dotTileRows - 1) / dotTileRows
	if workers <= 1 || big <= 4*workers {
		return dotTileSplit{n: n, big: big, count: big}
	}
	big -= 2 * workers
	return dotTileSplit{n: n, big: big, count: big + (n-big*dotTileRows+dotTileTailRows-1)/dotTileTailRows}
}

// rows returns block i's rows [j0, j1).
func (s dotTileSplit) rows(i int) (j0, j1 int) {
	if i < s.big {
		j0, j1 = i*dotTileRows, (i+1)*dotTileRows
	} else {
		j0 = s.big*dotTileRows + (i-s.big)*dotTileTailRows
		j1 = j0 + dotTileTailRows
	}
	return j0, min(j1, s.n)
}

// dotTileBlock computes columns [j0, j1) of C with the tiles of the
// kernel path in use (dotTilePath); any tiling gives the same bits, since
// every tile computes each output in the one order.
func (g *gemmArgs) dotTileBlock(j0, j1 int) {
	pl := dotTilePlanFor(dotTilePath)
	if pl == nil {
		g.dotTileBlockGo(j0, j1)
		return
	}
	kk := g.k &^ 15
	j := j0
	if g.m == 1 {
		for ; j+pl.wide <= j1; j += pl.wide {
			g.dotTile(pl, pl.wide, 1, 0, j, kk)
		}
	}
	for ; j+pl.r <= j1; j += pl.r {
		for i := 0; i < g.m; i += pl.c {
			g.dotTile(pl, pl.r, min(pl.c, g.m-i), i, j, kk)
		}
	}
	for ; j < j1; j++ {
		for i := 0; i < g.m; i += pl.c1 {
			g.dotTile(pl, 1, min(pl.c1, g.m-i), i, j, kk)
		}
	}
}

// dotTile computes the r×c tile of C at row i, column j: the kernel over
// the first kk values of k (none when kk = 0), then the k%16 tail here. A
// bfloat16 B runs the kernel's bfloat16 form: the same sums in the same
// order, each value of B widened as it is read.
func (g *gemmArgs) dotTile(pl *dotTilePlan, r, c, i, j, kk int) {
	a := g.a[i*g.lda:]
	// Bounds the kernel relies on.
	_ = a[(c-1)*g.lda+g.k-1]
	_ = g.c[(i+c-1)*g.ldc+j+r-1]
	if g.b16 != nil {
		b := g.b16[j*g.ldb:]
		_ = b[(r-1)*g.ldb+g.k-1]
		if kk > 0 {
			pl.bf16[r][c](kk, &a[0], g.lda, &b[0], g.ldb, &g.c[i*g.ldc+j], g.ldc)
		}
		dotTileTail(g, r, c, i, j, kk, a, b, bf16ToFloat32)
		return
	}
	b := g.b[j*g.ldb:]
	_ = b[(r-1)*g.ldb+g.k-1]
	if kk > 0 {
		pl.f32[r][c](kk, &a[0], g.lda, &b[0], g.ldb, &g.c[i*g.ldc+j], g.ldc)
	}
	dotTileTail(g, r, c, i, j, kk, a, b, func(v float32) float32 { return v })
}

// bf16ToFloat32 widens a bfloat16 value (its bits) to float32, exactly.
func bf16ToFloat32(v uint16) float32 { return math.Float32frombits(uint32(v) << 16) }

// dotTileTail continues each output's chain of the r×c tile of C at row
// i, column j over k in [kk, g.k) with FMA32 (FMA32Quick's inline case
// first): from the s the kernel stored, or from +0 when no kernel ran
// (kk = 0); at reads a value of B as float32.
func dotTileTail[T float32 | uint16](g *gemmArgs, r, c, i, j, kk int, a []float32, b []T, at func(T) float32) {
	if kk == g.k {
		return
	}
	for ii := range c {
		ar := a[ii*g.lda+kk : ii*g.lda+g.k]
		for jj := range r {
			br := b[jj*g.ldb+kk : jj*g.ldb+g.k]
			br = br[:len(ar)]
			cp := &g.c[(i+ii)*g.ldc+j+jj]
			var s float32
			if kk > 0 {
				s = *cp
			}
			for p, v := range ar {
				bv := at(br[p])
				if f, ok := FMA32Quick(v, bv, s); ok {
					s = f
				} else {
					s = FMA32(v, bv, s)
				}
			}
			*cp = s
		}
	}
}

// Product is one C = A·Bᵀ of SgemmTMany: B is n×k (row-major, [out, in]
// like a Hugging Face weight) and C is m×n, both contiguous.
type Product struct {
	N    int
	B, C []float32
}

// SgemmTMany computes C_i = A·B_iᵀ for products that share A (m×k,
// contiguous): the query, key and value projections of one hidden state,
// or the gate and up projections. With dot-product tiles (DotTiles(false,
// true, m, k)) all their blocks go to the cores in one hand-off, ending
// together only once, at the last product's cut tail; otherwise each runs
// as SgemmT. Results equal separate SgemmT calls bit for bit: each column
// of C is the same tile kernel over the same data.
func SgemmTMany(m, k int, a []float32, ps []Product) {
	if !DotTiles(false, true, m, k) || len(ps) < 2 {
		for _, p := range ps {
			SgemmT(false, true, m, p.N, k, a, k, p.B, k, p.C, p.N)
		}
		return
	}
	checkMatrix("A", a, m, k, k)
	var gs [4]gemmArgs
	args := gs[:0]
	if len(ps) > len(gs) {
		args = make([]gemmArgs, 0, len(ps))
	}
	flops := int64(0)
	for _, p := range ps {
		checkMatrix("B", p.B, p.N, k, k)
		checkMatrix("C", p.C, m, p.N, p.N)
		args = append(args, gemmArgs{transB: true, m: m, n: p.N, k: k, a: a, lda: k, b: p.B, ldb: k, c: p.C, ldc: p.N})
		flops += int64(m) * int64(p.N) * int64(k)
	}
	workers := runtime.GOMAXPROCS(0)
	if flops < minParallelFlops {
		workers = 1
	}
	if workers == 1 {
		for i := range args {
			args[i].runDotTiles(1)
		}
		return
	}
	// Whole blocks for every product but the last, whose tail is cut so
	// that the cores finish together (splitDotTileRows).
	m0 := manyDotTiles{args: args}
	for i := range args {
		w := 1
		if i == len(args)-1 {
			w = workers
		}
		m0.splits = append(m0.splits, splitDotTileRows(args[i].n, w))
		m0.count += m0.splits[i].count
	}
	parallelFor(min(workers, m0.count), m0.count, func(_, i int) { m0.block(i) })
}

// manyDotTiles numbers the blocks of several products in a row.
type manyDotTiles struct {
	args   []gemmArgs
	splits []dotTileSplit
	count  int
}

// block computes block i of the concatenation.
func (t *manyDotTiles) block(i int) {
	p := 0
	for i >= t.splits[p].count {
		i -= t.splits[p].count
		p++
	}
	t.args[p].dotTileBlock(t.splits[p].rows(i))
}

// dotTilePath is the kernel path whose dot-product tiles run (setPath).
var dotTilePath = PathGo

// SgemmTDotSerial computes C = A·Bᵀ (A m×k, B stored n×k) on the calling
// goroutine as dot-product tiles, allocating nothing: for the many small
// products of attention (one per sequence and head), which SgemmT would
// hand a heap-allocated closure. The shape must take the dot tiles
// (DotTiles(false, true, m, k)); the result is SgemmT's, bit for bit.
func SgemmTDotSerial(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	if !DotTiles(false, true, m, k) {
		panic(fmt.Sprintf("gemm: SgemmTDotSerial of %d×%d·(%d×%d)ᵀ, a shape the dot tiles do not take", m, k, n, k))
	}
	if !checkAC(false, m, n, k, a, lda, c, ldc) {
		return
	}
	checkMatrix("B", b, n, k, ldb)
	g := gemmArgs{transB: true, m: m, n: n, k: k, a: a, lda: lda, b: b, ldb: ldb, c: c, ldc: ldc}
	g.dotTileBlock(0, n)
}

// MinParallelFlops is the product size (m·n·k multiply-adds) below which
// SgemmT runs on the calling goroutine alone.
const MinParallelFlops = minParallelFlops
