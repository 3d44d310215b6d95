// Package gemm implements single-precision general matrix multiplication
// (SGEMM) for the CPU engine: cache-blocked and packed, split into one
// independent part per core (by rows or by columns), with AVX-512 and
// AVX2+FMA Go-assembly micro-kernels on amd64 (chosen from the CPU's
// features) and a portable pure-Go micro-kernel everywhere else.
//
// All matrices are row-major. Supported operations (C is always
// overwritten, never accumulated into):
//
//	Sgemm:                C = A·B     (A m×k, B k×n)
//	SgemmT(false, false): C = A·B
//	SgemmT(true,  false): C = Aᵀ·B    (A stored k×m)
//	SgemmT(false, true):  C = A·Bᵀ    (B stored n×k)
//	SgemmT(true,  true):  C = Aᵀ·Bᵀ
//
// Transposition is free: it only changes how panels are packed.
package gemm

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/cde-rl/cde/engines/cpu/internal/workpool"
)

// Blocking parameters (Goto/BLIS scheme). The micro-kernel computes an
// mr×nr tile of C from an mr×kc panel of packed A and a kc×nr panel of
// packed B.
const (
	// blockK is the depth of one packed panel. A kc×nr B micro-panel
	// (256·16·4 = 16 KiB for the AVX2 tile) stays in the 32 KiB L1d while
	// the kernel streams A micro-panels over it, and it is long enough to
	// amortize loading/storing the C tile.
	blockK = 256
	// blockM is the number of rows of A packed at once: 192·256·4 =
	// 192 KiB, well inside the 1 MiB per-core
	// L2, so the packed A block is reused from L2 for every B micro-panel.
	// It is a multiple of every kernel's mr (6, 12, 4).
	blockM = 192
	// blockN is the number of columns of B packed at once: 256·2048·4 =
	// 2 MiB, which lives in L3 (32 MiB, shared by the cores).
	blockN = 2048
	// minParallelFlops: below this many multiply-adds (m·n·k) the problem
	// is done on the calling goroutine; goroutine hand-off costs more than
	// it saves.
	minParallelFlops = 64 * 64 * 64
)

// microKernel computes C[0:mr,0:nr] (+)= Apanel·Bpanel, where a holds kc
// groups of mr values (column p of the A panel) and b holds kc groups of nr
// values (row p of the B panel). If accumulate is false C is overwritten.
type microKernel struct {
	name   string
	mr, nr int
	fn     func(kc int, a, b, c []float32, ldc int, accumulate bool)
}

// kernel is the micro-kernel used by Sgemm; chosen at init from CPU
// features (see kernels_amd64.go), tests may swap it.
var kernel = goKernel

// narrowKernel, if set, is a kernel with a narrower tile used instead of
// kernel when n is not a multiple of kernel's nr but is of its own (or is
// smaller than kernel's nr): e.g. the 6×16 AVX2 tile for attention
// products with 16 or 48 columns, where the 12×32 tile would spend half its
// work on padding.
var narrowKernel *microKernel

func pickKernel(n int) microKernel {
	if k := narrowKernel; k != nil && kernel.nr > k.nr && n%kernel.nr != 0 && (n%k.nr == 0 || n < kernel.nr) {
		return *k
	}
	return kernel
}

// goKernel is the portable fallback: a 4×4 register tile.
var goKernel = microKernel{name: "go4x4", mr: 4, nr: 4, fn: kernelGo4x4}

// Sgemm computes C = A·B for row-major A (m×k, row stride lda),
// B (k×n, row stride ldb) and C (m×n, row stride ldc). C is overwritten.
func Sgemm(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	SgemmT(false, false, m, n, k, a, lda, b, ldb, c, ldc)
}

// SgemmT computes C = op(A)·op(B) where op(X) is X or Xᵀ. op(A) is m×k and
// op(B) is k×n; if transA, A is stored k×m (row stride lda), and if transB,
// B is stored n×k (row stride ldb). C (m×n, row stride ldc) is overwritten.
func SgemmT(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	sgemm(false, transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
}

// SgemmTSerial is SgemmT on the calling goroutine only, for callers that
// already run several products in parallel (batched matmuls).
func SgemmTSerial(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	sgemm(true, transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
}

// SgemmTBF16 is SgemmT with B given as bfloat16 values (their bits): B is
// widened to float32 as it is packed, or as it is read by the dot-product
// tiles (which have bfloat16 forms), so no float32 copy of B is ever made,
// and C is exactly SgemmT's for the widened B.
func SgemmTBF16(transA, transB bool, m, n, k int, a []float32, lda int, b []uint16, ldb int, c []float32, ldc int) {
	if !checkAC(transA, m, n, k, a, lda, c, ldc) {
		return
	}
	rows, cols := k, n
	if transB {
		rows, cols = n, k
	}
	if ldb < cols || len(b) < (rows-1)*ldb+cols {
		panic(fmt.Sprintf("gemm: B (bfloat16) is %d values, leading dimension %d, for %d×%d", len(b), ldb, rows, cols))
	}
	g := gemmArgs{transA: transA, transB: transB, m: m, n: n, k: k,
		a: a, lda: lda, b16: b, ldb: ldb, c: c, ldc: ldc, kern: pickKernel(n)}
	g.run()
}

// checkAC checks the dimensions, C and A, and reports whether a product
// is left to compute (false when C is empty, or zeroed for k = 0).
func checkAC(transA bool, m, n, k int, a []float32, lda int, c []float32, ldc int) bool {
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("gemm: negative dimension m=%d n=%d k=%d", m, n, k))
	}
	if m == 0 || n == 0 {
		return false
	}
	checkMatrix("C", c, m, n, ldc)
	if k == 0 {
		for i := 0; i < m; i++ {
			clear(c[i*ldc : i*ldc+n])
		}
		return false
	}
	if transA {
		checkMatrix("A", a, k, m, lda)
	} else {
		checkMatrix("A", a, m, k, lda)
	}
	return true
}

// KernelName names the micro-kernel chosen for this CPU (e.g. "avx512-12x32").
func KernelName() string { return kernel.name }

func sgemm(serial, transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	if !checkAC(transA, m, n, k, a, lda, c, ldc) {
		return
	}
	if transB {
		checkMatrix("B", b, n, k, ldb)
	} else {
		checkMatrix("B", b, k, n, ldb)
	}
	g := gemmArgs{transA: transA, transB: transB, m: m, n: n, k: k,
		a: a, lda: lda, b: b, ldb: ldb, c: c, ldc: ldc, kern: pickKernel(n), serial: serial}
	g.run()
}

func checkMatrix(name string, x []float32, rows, cols, ld int) {
	if ld < cols {
		panic(fmt.Sprintf("gemm: %s leading dimension %d < %d columns", name, ld, cols))
	}
	if rows > 0 && cols > 0 && len(x) < (rows-1)*ld+cols {
		panic(fmt.Sprintf("gemm: %s has %d elements, need %d (%d×%d, ld %d)", name, len(x), (rows-1)*ld+cols, rows, cols, ld))
	}
}

type gemmArgs struct {
	transA, transB bool
	m, n, k        int
	a              []float32
	lda            int
	b              []float32
	b16            []uint16 // B as bfloat16 bits instead of b (SgemmTBF16)
	ldb            int
	c              []float32
	ldc            int
	kern           microKernel
	serial         bool
}

var bufPool sync.Pool

func getBuf(n int) *[]float32 {
	if p, ok := bufPool.Get().(*[]float32); ok && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	s := make([]float32, n)
	return &s
}

func roundUp(x, m int) int { return (x + m - 1) / m * m }

func (g *gemmArgs) run() {
	workers := runtime.GOMAXPROCS(0)
	if g.serial || int64(g.m)*int64(g.n)*int64(g.k) < minParallelFlops {
		workers = 1
	}
	if g.useDotTiles() {
		g.runDotTiles(workers)
		return
	}
	if workers == 1 {
		g.runSerial()
		return
	}
	// Split C into one independent product per core, along whichever of
	// m and n has more micro-tiles. Each part then runs serially with its
	// own packing: a single fork/join per call, where a shared packed B
	// would need two barriers per depth block (too costly when m is small
	// and k large, e.g. weight gradients).
	mr, nr := g.kern.mr, g.kern.nr
	tilesM, tilesN := (g.m+mr-1)/mr, (g.n+nr-1)/nr
	byRows := tilesM >= tilesN
	tiles := tilesN
	if byRows {
		tiles = tilesM
	}
	workers = min(workers, tiles)
	if workers <= 1 {
		g.runSerial()
		return
	}
	per := (tiles + workers - 1) / workers
	parallelFor(workers, workers, func(_, w int) {
		sub := *g
		lo := w * per
		if byRows {
			i0, i1 := lo*mr, min(g.m, (lo+per)*mr)
			if i0 >= i1 {
				return
			}
			sub.m = i1 - i0
			if g.transA {
				sub.a = g.a[i0:]
			} else {
				sub.a = g.a[i0*g.lda:]
			}
			sub.c = g.c[i0*g.ldc:]
		} else {
			j0, j1 := lo*nr, min(g.n, (lo+per)*nr)
			if j0 >= j1 {
				return
			}
			sub.n = j1 - j0
			switch {
			case g.b16 != nil && g.transB:
				sub.b16 = g.b16[j0*g.ldb:]
			case g.b16 != nil:
				sub.b16 = g.b16[j0:]
			case g.transB:
				sub.b = g.b[j0*g.ldb:]
			default:
				sub.b = g.b[j0:]
			}
			sub.c = g.c[j0:]
		}
		sub.runSerial()
	})
}

// runSerial computes the whole product on the calling goroutine. One
// pooled scratch buffer holds the packed B block, the packed A block and
// the edge tile, so small products (attention heads) allocate nothing.
func (g *gemmArgs) runSerial() {
	mr, nr := g.kern.mr, g.kern.nr
	mc := min(blockM, roundUp(g.m, mr))
	ncMax := min(blockN, roundUp(g.n, nr))
	kcMax := min(blockK, g.k)
	sizeB, sizeA := kcMax*ncMax, kcMax*mc
	buf := getBuf(sizeB + sizeA + mr*nr)
	defer bufPool.Put(buf)
	packedB := (*buf)[:sizeB]
	packedA := (*buf)[sizeB : sizeB+sizeA]
	edge := (*buf)[sizeB+sizeA:]
	for jc := 0; jc < g.n; jc += blockN {
		nc := min(blockN, g.n-jc)
		for pc := 0; pc < g.k; pc += blockK {
			kc := min(blockK, g.k-pc)
			g.packB(packedB, jc, nc, pc, kc, nr)
			accumulate := pc > 0
			for ic := 0; ic < g.m; ic += mc {
				g.block(packedA, packedB, edge, ic, min(mc, g.m-ic), jc, nc, pc, kc, accumulate)
			}
		}
	}
}

// parallelFor calls f(worker, item) for every item in [0, items) on
// `workers` goroutines (inline if workers <= 1); items are handed out
// dynamically, and worker is in [0, workers).
func parallelFor(workers, items int, f func(worker, item int)) {
	if workers <= 1 {
		for i := 0; i < items; i++ {
			f(0, i)
		}
		return
	}
	var next atomic.Int64
	workpool.Run(workers, func(w int) {
		for {
			i := int(next.Add(1) - 1)
			if i >= items {
				return
			}
			f(w, i)
		}
	})
}

// block packs rows [ic, ic+mc) × depth [pc, pc+kc) of op(A) and multiplies
// it by the packed B block (columns [jc, jc+nc)) into C.
func (g *gemmArgs) block(packedA, packedB, edge []float32, ic, mc, jc, nc, pc, kc int, accumulate bool) {
	mr, nr := g.kern.mr, g.kern.nr
	g.packA(packedA, ic, mc, pc, kc, mr)
	fn := g.kern.fn
	for jr := 0; jr < nc; jr += nr {
		nn := min(nr, nc-jr)
		bPanel := packedB[jr*kc : (jr+nr)*kc]
		for ir := 0; ir < mc; ir += mr {
			mm := min(mr, mc-ir)
			aPanel := packedA[ir*kc : (ir+mr)*kc]
			cOff := (ic+ir)*g.ldc + jc + jr
			if mm == mr && nn == nr {
				fn(kc, aPanel, bPanel, g.c[cOff:], g.ldc, accumulate)
				continue
			}
			// An edge tile runs in a full-size scratch tile, which starts
			// from C's values when accumulating, so its elements follow
			// the same chain as a full tile's.
			if accumulate {
				for i := 0; i < mm; i++ {
					copy(edge[i*nr:i*nr+nn], g.c[cOff+i*g.ldc:cOff+i*g.ldc+nn])
				}
			}
			fn(kc, aPanel, bPanel, edge, nr, accumulate)
			for i := 0; i < mm; i++ {
				copy(g.c[cOff+i*g.ldc:cOff+i*g.ldc+nn], edge[i*nr:i*nr+nn])
			}
		}
	}
}

// packA writes op(A)[ic:ic+mc, pc:pc+kc] as consecutive mr-row panels; in
// each panel, column p is mr consecutive values. Rows past mc are zero.
func (g *gemmArgs) packA(dst []float32, ic, mc, pc, kc, mr int) {
	a, lda := g.a, g.lda
	for ir := 0; ir < mc; ir += mr {
		mm := min(mr, mc-ir)
		panel := dst[ir*kc : (ir+mr)*kc]
		if g.transA {
			// op(A)[i][p] = A[p][i]: each column of the panel is contiguous.
			off := pc*lda + ic + ir
			switch {
			case mm == 6 && mr == 6:
				for p := 0; p < kc; p++ {
					*(*[6]float32)(panel[p*6:]) = *(*[6]float32)(a[off+p*lda:])
				}
			case mm == 12 && mr == 12:
				for p := 0; p < kc; p++ {
					*(*[12]float32)(panel[p*12:]) = *(*[12]float32)(a[off+p*lda:])
				}
			default:
				for p := 0; p < kc; p++ {
					d := panel[p*mr : p*mr+mr]
					copy(d, a[off+p*lda:off+p*lda+mm])
					clear(d[mm:])
				}
			}
			continue
		}
		switch {
		case mm == 6 && mr == 6:
			packRows6(panel, a, (ic+ir)*lda+pc, lda, kc)
			continue
		case mm == 12 && mr == 12:
			packRows12(panel, a, (ic+ir)*lda+pc, lda, kc)
			continue
		}
		for r := 0; r < mm; r++ {
			src := a[(ic+ir+r)*lda+pc : (ic+ir+r)*lda+pc+kc]
			for p, v := range src {
				panel[p*mr+r] = v
			}
		}
		for r := mm; r < mr; r++ {
			for p := 0; p < kc; p++ {
				panel[p*mr+r] = 0
			}
		}
	}
}

// packRows6 interleaves 6 rows of kc values starting at a[off] (row stride
// lda) into dst: dst[6p+r] = row r, element p.
func packRows6(dst, a []float32, off, lda, kc int) {
	r0 := a[off : off+kc]
	r1 := a[off+1*lda:][:kc]
	r2 := a[off+2*lda:][:kc]
	r3 := a[off+3*lda:][:kc]
	r4 := a[off+4*lda:][:kc]
	r5 := a[off+5*lda:][:kc]
	dst = dst[:6*kc]
	for p := range r0 {
		d := (*[6]float32)(dst[6*p:])
		d[0] = r0[p]
		d[1] = r1[p]
		d[2] = r2[p]
		d[3] = r3[p]
		d[4] = r4[p]
		d[5] = r5[p]
	}
}

// packRows12 interleaves 12 rows of kc values starting at a[off] (row stride
// lda) into dst: dst[12p+r] = row r, element p.
func packRows12(dst, a []float32, off, lda, kc int) {
	r0 := a[off : off+kc]
	r1 := a[off+1*lda:][:kc]
	r2 := a[off+2*lda:][:kc]
	r3 := a[off+3*lda:][:kc]
	r4 := a[off+4*lda:][:kc]
	r5 := a[off+5*lda:][:kc]
	r6 := a[off+6*lda:][:kc]
	r7 := a[off+7*lda:][:kc]
	r8 := a[off+8*lda:][:kc]
	r9 := a[off+9*lda:][:kc]
	r10 := a[off+10*lda:][:kc]
	r11 := a[off+11*lda:][:kc]
	dst = dst[:12*kc]
	for p := range r0 {
		d := (*[12]float32)(dst[12*p:])
		d[0] = r0[p]
		d[1] = r1[p]
		d[2] = r2[p]
		d[3] = r3[p]
		d[4] = r4[p]
		d[5] = r5[p]
		d[6] = r6[p]
		d[7] = r7[p]
		d[8] = r8[p]
		d[9] = r9[p]
		d[10] = r10[p]
		d[11] = r11[p]
	}
}

// packB writes op(B)[pc:pc+kc, jc:jc+nc] as consecutive nr-column panels;
// in each panel, row p is nr consecutive values. Columns past nc are zero.
func (g *gemmArgs) packB(dst []float32, jc, nc, pc, kc, nr int) {
	if g.b16 != nil {
		g.packB16(dst, jc, nc, pc, kc, nr)
		return
	}
	b, ldb := g.b, g.ldb
	if !g.transB {
		// Walk B row by row (sequential reads, prefetch-friendly); each
		// row is scattered into every panel of the block.
		full := nc / nr * nr
		for p := 0; p < kc; p++ {
			src := b[(pc+p)*ldb+jc : (pc+p)*ldb+jc+nc]
			jr := 0
			switch nr {
			case 16:
				for ; jr < full; jr += 16 {
					*(*[16]float32)(dst[jr*kc+p*16:]) = *(*[16]float32)(src[jr:])
				}
			case 32:
				for ; jr < full; jr += 32 {
					*(*[32]float32)(dst[jr*kc+p*32:]) = *(*[32]float32)(src[jr:])
				}
			}
			for ; jr < nc; jr += nr {
				nn := min(nr, nc-jr)
				d := dst[jr*kc+p*nr : jr*kc+p*nr+nr]
				copy(d, src[jr:jr+nn])
				clear(d[nn:])
			}
		}
		return
	}
	for jr := 0; jr < nc; jr += nr {
		nn := min(nr, nc-jr)
		panel := dst[jr*kc : (jr+nr)*kc]
		// op(B)[p][j] = B[j][p]: each source row is one panel column.
		for cc := 0; cc < nn; cc++ {
			src := b[(jc+jr+cc)*ldb+pc : (jc+jr+cc)*ldb+pc+kc]
			for p, v := range src {
				panel[p*nr+cc] = v
			}
		}
		zeroPanelColumns(panel, nn, nr, kc)
	}
}

// zeroPanelColumns zeroes columns [nn, nr) of a kc×nr packed panel (the
// padding past B's last column).
func zeroPanelColumns(panel []float32, nn, nr, kc int) {
	for cc := nn; cc < nr; cc++ {
		for p := 0; p < kc; p++ {
			panel[p*nr+cc] = 0
		}
	}
}

// packB16 is packB for bfloat16 B, widening each value as it is placed.
func (g *gemmArgs) packB16(dst []float32, jc, nc, pc, kc, nr int) {
	b, ldb := g.b16, g.ldb
	if !g.transB {
		for p := 0; p < kc; p++ {
			src := b[(pc+p)*ldb+jc : (pc+p)*ldb+jc+nc]
			for jr := 0; jr < nc; jr += nr {
				nn := min(nr, nc-jr)
				d := dst[jr*kc+p*nr : jr*kc+p*nr+nr]
				for j, v := range src[jr : jr+nn] {
					d[j] = math.Float32frombits(uint32(v) << 16)
				}
				clear(d[nn:])
			}
		}
		return
	}
	for jr := 0; jr < nc; jr += nr {
		nn := min(nr, nc-jr)
		panel := dst[jr*kc : (jr+nr)*kc]
		for cc := 0; cc < nn; cc++ {
			src := b[(jc+jr+cc)*ldb+pc : (jc+jr+cc)*ldb+pc+kc]
			for p, v := range src {
				panel[p*nr+cc] = math.Float32frombits(uint32(v) << 16)
			}
		}
		zeroPanelColumns(panel, nn, nr, kc)
	}
}

// kernelGo4x4 is the portable micro-kernel: 16 scalar accumulators, each
// a chain of FMA32 (the assembly kernels' VFMADD, one rounding), starting
// from C's tile when accumulating and from +0 otherwise.
func kernelGo4x4(kc int, a, b, c []float32, ldc int, accumulate bool) {
	var c00, c01, c02, c03 float32
	var c10, c11, c12, c13 float32
	var c20, c21, c22, c23 float32
	var c30, c31, c32, c33 float32
	r0 := c[0:4:4]
	r1 := c[ldc : ldc+4 : ldc+4]
	r2 := c[2*ldc : 2*ldc+4 : 2*ldc+4]
	r3 := c[3*ldc : 3*ldc+4 : 3*ldc+4]
	if accumulate {
		c00, c01, c02, c03 = r0[0], r0[1], r0[2], r0[3]
		c10, c11, c12, c13 = r1[0], r1[1], r1[2], r1[3]
		c20, c21, c22, c23 = r2[0], r2[1], r2[2], r2[3]
		c30, c31, c32, c33 = r3[0], r3[1], r3[2], r3[3]
	}
	a = a[:kc*4]
	b = b[:kc*4]
	for p := 0; p < kc; p++ {
		ap := a[p*4 : p*4+4 : p*4+4]
		bp := b[p*4 : p*4+4 : p*4+4]
		b0, b1, b2, b3 := bp[0], bp[1], bp[2], bp[3]
		a0 := ap[0]
		c00 = FMA32(a0, b0, c00)
		c01 = FMA32(a0, b1, c01)
		c02 = FMA32(a0, b2, c02)
		c03 = FMA32(a0, b3, c03)
		a1 := ap[1]
		c10 = FMA32(a1, b0, c10)
		c11 = FMA32(a1, b1, c11)
		c12 = FMA32(a1, b2, c12)
		c13 = FMA32(a1, b3, c13)
		a2 := ap[2]
		c20 = FMA32(a2, b0, c20)
		c21 = FMA32(a2, b1, c21)
		c22 = FMA32(a2, b2, c22)
		c23 = FMA32(a2, b3, c23)
		a3 := ap[3]
		c30 = FMA32(a3, b0, c30)
		c31 = FMA32(a3, b1, c31)
		c32 = FMA32(a3, b2, c32)
		c33 = FMA32(a3, b3, c33)
	}
	r0[0], r0[1], r0[2], r0[3] = c00, c01, c02, c03
	r1[0], r1[1], r1[2], r1[3] = c10, c11, c12, c13
	r2[0], r2[1], r2[2], r2[3] = c20, c21, c22, c23
	r3[0], r3[1], r3[2], r3[3] = c30, c31, c32, c33
}
