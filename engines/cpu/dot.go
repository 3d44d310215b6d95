package cpu

import (
	"runtime"
	"unsafe"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/dtypes/bfloat16"
	"github.com/pkg/errors"

	"github.com/cde-rl/cde/engines/cpu/gemm"
)

// DotGeneral runs as `batch` row-major matrix products through gemm. An
// operand already laid out as [batch, rows, contracting] or [batch,
// contracting, rows] is used in place (the second as a transposed
// matrix); any other layout is first transposed into a pooled scratch
// buffer.

// operandLayout reports how an operand with the given batch, free and
// contracting axes can be read as `batch` matrices: ok=false if it must be
// transposed first; trans=true if stored contracting-major.
func operandLayout(batch, free, contract []int) (ok, trans bool) {
	for i, a := range batch {
		if a != i {
			return false, false
		}
	}
	seq := func(axes []int, from int) bool {
		for i, a := range axes {
			if a != from+i {
				return false
			}
		}
		return true
	}
	nb := len(batch)
	if seq(free, nb) && seq(contract, nb+len(free)) {
		return true, false
	}
	if seq(contract, nb) && seq(free, nb+len(contract)) {
		return true, true
	}
	return false, false
}

// canonical transposes x (dims) to [batch..., free..., contract...] when
// needed; it returns the data to use and whether it is contracting-major.
func (st *execState) canonical(x any, dims, batch, free, contract []int) (data any, trans bool, scratch any) {
	if ok, tr := operandLayout(batch, free, contract); ok {
		return x, tr, nil
	}
	perm := append(append(append([]int(nil), batch...), free...), contract...)
	dt, n, _ := flatInfo(x)
	t := st.pool.get(dt, n)
	transposeAny(t, x, dims, perm)
	return t, false, t
}

func dotGeneral(st *execState, n *node, d, lhs, rhs any) error {
	p := n.params.(*dotParams)
	if x, ok := lhs.([]bfloat16.BFloat16); ok { // a folded conversion: widen all of it
		f := st.pool.get(dtypes.Float32, len(x)).([]float32)
		defer st.pool.put(f)
		bf16ToF32(f, x)
		lhs = f
	}
	if x, ok := rhs.([]bfloat16.BFloat16); ok {
		if dd, ok := d.([]float32); ok && p.batch == 1 {
			if ok, trans := operandLayout(p.rhsBatch, p.rhsFree, p.rhsContract); ok {
				return st.dotBF16(n, dd, lhs.([]float32), x, !trans)
			}
		}
		f := st.pool.get(dtypes.Float32, len(x)).([]float32)
		defer st.pool.put(f)
		bf16ToF32(f, x)
		rhs = f
	}
	ld, rd := n.inputs[0].shape.Dimensions, n.inputs[1].shape.Dimensions
	a, transA, sa := st.canonical(lhs, ld, p.lhsBatch, p.lhsFree, p.lhsContract)
	// For rhs the natural layout is [batch, contract, free]: canonical()
	// reports trans relative to [batch, free, contract], so flip it.
	b, transBT, sb := st.canonical(rhs, rd, p.rhsBatch, p.rhsFree, p.rhsContract)
	transB := !transBT
	defer func() {
		if sa != nil {
			st.pool.put(sa)
		}
		if sb != nil {
			st.pool.put(sb)
		}
	}()
	switch d := d.(type) {
	case []float32:
		matmulF32(d, a.([]float32), b.([]float32), p.batch, p.m, p.n, p.k, transA, transB)
	case []float64:
		dotNaive(d, a.([]float64), b.([]float64), p.batch, p.m, p.n, p.k, transA, transB)
	case []int32:
		dotNaive(d, a.([]int32), b.([]int32), p.batch, p.m, p.n, p.k, transA, transB)
	case []int64:
		dotNaive(d, a.([]int64), b.([]int64), p.batch, p.m, p.n, p.k, transA, transB)
	case []int8:
		dotNaive(d, a.([]int8), b.([]int8), p.batch, p.m, p.n, p.k, transA, transB)
	case []int16:
		dotNaive(d, a.([]int16), b.([]int16), p.batch, p.m, p.n, p.k, transA, transB)
	case []uint8:
		dotNaive(d, a.([]uint8), b.([]uint8), p.batch, p.m, p.n, p.k, transA, transB)
	case []uint16:
		dotNaive(d, a.([]uint16), b.([]uint16), p.batch, p.m, p.n, p.k, transA, transB)
	case []uint32:
		dotNaive(d, a.([]uint32), b.([]uint32), p.batch, p.m, p.n, p.k, transA, transB)
	case []uint64:
		dotNaive(d, a.([]uint64), b.([]uint64), p.batch, p.m, p.n, p.k, transA, transB)
	default:
		return errors.Errorf("DotGeneral: unsupported dtype %T", d)
	}
	return nil
}

// dotBatchParallelFlops: batched products smaller than this (m·n·k) run
// one per core, each single-threaded, instead of one at a time on all
// cores.
const dotBatchParallelFlops = 1 << 21

func matmulF32(c, a, b []float32, batch, m, n, k int, transA, transB bool) {
	if batch > 1 && m*n*k < dotBatchParallelFlops && runtime.GOMAXPROCS(0) > 1 {
		// At least elemGrain multiply-adds per core: tiny products (RoPE's
		// rotation of one decode token, 16 products of 256) are not worth
		// a hand-off to the other cores.
		grain := max(1, elemGrain/max(1, m*n*k))
		if !parallelWorth(batch, grain) {
			for i := range batch {
				matmulOne(c, a, b, i, m, n, k, transA, transB, true)
			}
			return
		}
		parallelRange(batch, grain, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				matmulOne(c, a, b, i, m, n, k, transA, transB, true)
			}
		})
		return
	}
	for i := 0; i < batch; i++ {
		matmulOne(c, a, b, i, m, n, k, transA, transB, false)
	}
}

// matmulOne computes product i of a batch (a plain function, not a
// closure, so that a product allocates nothing here); serial keeps it on
// the calling core.
//
// The order of every sum is fixed by the shape alone (docs/engine.md, "One
// summation order"): a product gemm takes as dot-product tiles (A·Bᵀ with
// A small, gemm.DotTiles) sums in 16 lanes; every other product is one
// chain of FMAs per element, p = 0 .. k-1. The branches below choose only
// how to compute that, never what: each gives the same bits, whatever the
// kernel path and GOMAXPROCS (which decides serial).
func matmulOne(c, a, b []float32, i, m, n, k int, transA, transB, serial bool) {
	lda, ldb := k, n
	if transA {
		lda = m
	}
	if transB {
		ldb = k
	}
	ci := c[i*m*n : (i+1)*m*n]
	ai := a[i*m*k : (i+1)*m*k]
	bi := b[i*k*n : (i+1)*k*n]
	switch {
	case gemm.DotTiles(transA, transB, m, k):
		// A few rows against a matrix stored [n, k] (Hugging Face's
		// [out, in] weights in a decode step, attention scores): gemm's
		// dot-product tiles read B in place; a small or serial one
		// without allocating (a decode step has one per sequence, head
		// and layer).
		if serial || m*n*k < gemm.MinParallelFlops {
			gemm.SgemmTDotSerial(m, n, k, ai, lda, bi, ldb, ci, n)
			return
		}
	case n <= 4 && k <= 4 && !transA && !transB:
		// Many rows times a tiny matrix (RoPE's pair rotation,
		// [[0, 1], [-1, 0]]): direct loops, parallel over rows;
		// gemm would pack for a 2-wide product.
		tinyDot(ci, ai, bi, m, n, k, serial)
		return
	case !transB && (m*n*k <= smallDotMACs || m < 4 && serial):
		smallDot(ci, ai, bi, m, n, k, transA)
		return
	case m == 1 && !transB && !serial:
		// Vector-matrix products: gemm with one row cannot split work;
		// use a column-parallel loop.
		gemvRowParallel(ci, ai, bi, n, k)
		return
	}
	if serial {
		gemm.SgemmTSerial(transA, transB, m, n, k, ai, lda, bi, ldb, ci, n)
	} else {
		gemm.SgemmT(transA, transB, m, n, k, ai, lda, bi, ldb, ci, n)
	}
}

// smallDotMACs: products up to this many multiply-adds skip gemm's
// packing, which would cost more than the arithmetic.
const smallDotMACs = 8 << 10

// smallDot computes one small product op(A)·B (B stored k×n) with direct
// loops: each row of C is cleared, then updated by a·row p of B for p =
// 0 .. k-1, one FMA per element (axpyF32), which is each element's chain.
func smallDot(c, a, b []float32, m, n, k int, transA bool) {
	if transA {
		// Gather the row of op(A) once; A is stored k×m. Small k (RoPE's
		// rotation, once per row of q and k) needs no allocation.
		var buf [16]float32
		row := buf[:min(k, len(buf))]
		if k > len(buf) {
			row = make([]float32, k)
		}
		for i := 0; i < m; i++ {
			for p := range row {
				row[p] = a[p*m+i]
			}
			smallDotRow(c[i*n:(i+1)*n], row, b, n, k)
		}
		return
	}
	for i := 0; i < m; i++ {
		smallDotRow(c[i*n:(i+1)*n], a[i*k:(i+1)*k], b, n, k)
	}
}

func smallDotRow(c, a, b []float32, n, k int) {
	clear(c)
	for p, av := range a[:k] {
		axpyF32(c, av, b[p*n:(p+1)*n])
	}
}

// tinyDot computes c[m×n] = a[m×k]·b[k×n] for n, k <= 4, each element a
// chain of FMAs over p from +0 (as every product outside the dot tiles),
// parallel over rows unless serial.
func tinyDot(c, a, b []float32, m, n, k int, serial bool) {
	rows := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			ar, cr := a[i*k:(i+1)*k], c[i*n:(i+1)*n]
			for j := range cr {
				var s float32
				for p, av := range ar {
					if v, ok := gemm.FMA32Quick(av, b[p*n+j], s); ok {
						s = v
					} else {
						s = gemm.FMA32(av, b[p*n+j], s)
					}
				}
				cr[j] = s
			}
		}
	}
	if serial {
		rows(0, m)
		return
	}
	parallelRange(m, elemGrain/max(1, n*k), rows)
}

// gemvRowParallel computes c[1×n] = a[1×k]·B[k×n] splitting columns (a
// transposed 1-row A is the same memory), each element a chain of FMAs.
func gemvRowParallel(c, a, b []float32, n, k int) {
	parallelRange(n, max(16, elemGrain/max(1, k)), func(lo, hi int) {
		cc := c[lo:hi]
		clear(cc)
		for p := 0; p < k; p++ {
			axpyF32(cc, a[p], b[p*n+lo:p*n+hi])
		}
	})
}

func dotNaive[T number](c, a, b []T, batch, m, n, k int, transA, transB bool) {
	for i := 0; i < batch; i++ {
		ai, bi, ci := a[i*m*k:], b[i*k*n:], c[i*m*n:]
		for r := 0; r < m; r++ {
			for col := 0; col < n; col++ {
				var s T
				for p := 0; p < k; p++ {
					var av, bv T
					if transA {
						av = ai[p*m+r]
					} else {
						av = ai[r*k+p]
					}
					if transB {
						bv = bi[col*k+p]
					} else {
						bv = bi[p*n+col]
					}
					s += T(av * bv) // rounded: Go may not fuse it into an FMA
				}
				ci[r*n+col] = s
			}
		}
	}
}

// foldBF16Converts lets a float32 DotGeneral read an operand that is a
// ConvertDType from bfloat16 directly: the product widens the bfloat16
// values as it reads them (dotGeneral, dotBF16), so a large bfloat16
// weight has no float32 copy, during the product or between a training
// graph's forward and backward passes. The conversion node itself is
// dropped when nothing else reads it.
func foldBF16Converts(n *node) {
	if n.op != compute.OpTypeDotGeneral || n.shape.DType != dtypes.Float32 {
		return
	}
	for i, in := range n.inputs {
		if in.op == compute.OpTypeConvertDType && in.shape.DType == dtypes.Float32 && in.inputs[0].shape.DType == dtypes.BFloat16 {
			n.inputs[i] = in.inputs[0]
		}
	}
}

// dotBF16 computes d = a · op(b) for one product whose right operand b is
// bfloat16, stored [n, k] (transB) or [k, n], without a float32 copy of b
// where the product is large: in the dot-product tiles' regime (few rows,
// a decode step) and in gemm's, gemm widens b as its kernels read or pack
// it (gemm.SgemmTBF16); the small products matmulOne does with direct
// loops widen b whole (it is small) and run matmulOne. Either way the
// result is the product of the widened b bit for bit: the same kernels on
// the same values in the same order.
func (st *execState) dotBF16(n *node, d, lhs []float32, b []bfloat16.BFloat16, transB bool) error {
	p := n.params.(*dotParams)
	a, transA, sa := st.canonical(lhs, n.inputs[0].shape.Dimensions, p.lhsBatch, p.lhsFree, p.lhsContract)
	if sa != nil {
		defer st.pool.put(sa)
	}
	af := a.([]float32)
	m, nn, k := p.m, p.n, p.k
	lda, ldb := k, nn
	if transA {
		lda = m
	}
	if transB {
		ldb = k
	}
	bits := unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(b))), len(b))
	// The products matmulOne computes with direct loops rather than gemm
	// (in its order of tests); b is small there and is widened whole.
	direct := !gemm.DotTiles(transA, transB, m, k) && !transB &&
		(nn <= 4 && k <= 4 && !transA || m*nn*k <= smallDotMACs || m == 1)
	if !direct {
		gemm.SgemmTBF16(transA, transB, m, nn, k, af, lda, bits, ldb, d, nn)
		return nil
	}
	f := st.pool.get(dtypes.Float32, len(b)).([]float32)
	defer st.pool.put(f)
	bf16ToF32(f, b)
	matmulOne(d, af, f, 0, m, nn, k, transA, transB, false)
	return nil
}
