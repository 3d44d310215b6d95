package cpu

import (
	"math"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/shapes"
)

type number interface {
	~float32 | ~float64 | ~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

type float interface{ ~float32 | ~float64 }

// bcastPlan describes how a binary (or ternary) elementwise op walks its
// operands: the output is split into `outer` rows of `inner` elements; an
// operand's row starts at rowOffset(row) and its stride along a row is 0
// (broadcast) or 1.
type bcastPlan struct {
	inner, outer int
	// collapsed output dims (outer part) and per-operand strides.
	dims    []int
	strides [][]int // [operand][axis], for the outer axes
	inStep  []int   // [operand] stride along the row: 0 or 1
}

// makePlan collapses the output shape into runs where each operand is
// either fully present or broadcast. Operand shapes are scalars or of the
// output's rank with each dim equal to the output's or 1.
func makePlan(out shapes.Shape, ins ...shapes.Shape) *bcastPlan {
	rank := out.Rank()
	// present[o][a]: operand o has the full dim on axis a.
	type axisInfo struct {
		dim     int
		present []bool
	}
	var axes []axisInfo
	for a := range rank {
		d := out.Dimensions[a]
		if d == 1 {
			continue
		}
		pr := make([]bool, len(ins))
		for o, s := range ins {
			pr[o] = s.Rank() == rank && s.Dimensions[a] == d
		}
		if k := len(axes); k > 0 && equalBools(axes[k-1].present, pr) {
			axes[k-1].dim *= d
			continue
		}
		axes = append(axes, axisInfo{d, pr})
	}
	p := &bcastPlan{inner: 1, outer: 1, inStep: make([]int, len(ins)), strides: make([][]int, len(ins))}
	if len(axes) == 0 {
		return p
	}
	last := axes[len(axes)-1]
	p.inner = last.dim
	for o := range ins {
		if last.present[o] {
			p.inStep[o] = 1
		}
	}
	axes = axes[:len(axes)-1]
	for _, ax := range axes {
		p.dims = append(p.dims, ax.dim)
		p.outer *= ax.dim
	}
	for o := range ins {
		st := make([]int, len(axes))
		stride := p.inStep[o] * p.inner
		if !last.present[o] {
			stride = 1
		}
		for a := len(axes) - 1; a >= 0; a-- {
			if axes[a].present[o] {
				st[a] = stride
				stride *= axes[a].dim
			}
		}
		p.strides[o] = st
	}
	return p
}

func equalBools(a, b []bool) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// rowOffsets fills offs[o] with each operand's start for output row `row`.
func (p *bcastPlan) rowOffsets(row int, offs []int) {
	for o := range offs {
		offs[o] = 0
	}
	for a := len(p.dims) - 1; a >= 0; a-- {
		i := row % p.dims[a]
		row /= p.dims[a]
		for o := range offs {
			offs[o] += i * p.strides[o][a]
		}
	}
}

// maxPlanOperands is the most operands a plan walks (Where's three).
const maxPlanOperands = 3

// forRows runs fn over the plan's rows, in parallel when there are enough
// of them, with operand offsets kept up to date incrementally (no
// divisions per row). The offsets go to fn by value, and a serial walk
// allocates nothing (decode steps run thousands of such ops).
func (p *bcastPlan) forRows(fn func(row int, offs [maxPlanOperands]int)) {
	if p.serial() {
		p.walkRows(0, p.outer, fn)
		return
	}
	parallelRange(p.outer, p.grain(), func(lo, hi int) { p.walkRows(lo, hi, fn) })
}

// grain is the fewest rows worth a core of their own.
func (p *bcastPlan) grain() int { return max(1, elemGrain/max(1, p.inner)) }

// serial reports whether forRows would walk all rows on the calling core.
// Hot ops test it first and pass walkRows a function literal of their own,
// which then stays on the stack: the one given to forRows escapes to the
// other cores.
func (p *bcastPlan) serial() bool { return !parallelWorth(p.outer, p.grain()) }

// walkRows calls fn for rows [lo, hi) in order.
func (p *bcastPlan) walkRows(lo, hi int, fn func(row int, offs [maxPlanOperands]int)) {
	if lo >= hi {
		return
	}
	var offs [maxPlanOperands]int
	p.rowOffsets(lo, offs[:len(p.strides)])
	nd := len(p.dims)
	var idxBuf [8]int
	idx := odometer(&idxBuf, p.dims, lo)
	for row := lo; row < hi; row++ {
		fn(row, offs)
		for a := nd - 1; a >= 0; a-- {
			idx[a]++
			for o := range p.strides {
				offs[o] += p.strides[o][a]
			}
			if idx[a] < p.dims[a] {
				break
			}
			idx[a] = 0
			for o := range p.strides {
				offs[o] -= p.strides[o][a] * p.dims[a]
			}
		}
	}
}

// binKernel is the three row forms of one binary op on one element type:
// vector-vector, vector-scalar and scalar-vector. Implementations are
// small structs (no closures), so a call allocates nothing.
type binKernel[T number] interface {
	vv(d, a, b []T)
	vs(d, a []T, b T)
	sv(d []T, a T, b []T)
}

// f32Bin is a binary op on float32 through the SIMD kernels.
type f32Bin struct{ op compute.OpType }

func (k f32Bin) vv(d, a, b []float32)                   { binVVF32(k.op, d, a, b) }
func (k f32Bin) vs(d, a []float32, b float32)           { binVSF32(k.op, d, a, b) }
func (k f32Bin) sv(d []float32, a float32, b []float32) { binSVF32(k.op, d, a, b) }

// goBin is a binary op on T through plain loops.
type goBin[T number] struct{ op compute.OpType }

func (k goBin[T]) vv(d, a, b []T)       { binVVGo(k.op, d, a, b) }
func (k goBin[T]) vs(d, a []T, b T)     { binVSGo(k.op, d, a, b) }
func (k goBin[T]) sv(d []T, a T, b []T) { binSVGo(k.op, d, a, b) }

// runBinary evaluates a binary arithmetic op with broadcasting (plan p):
// float32 through the SIMD kernels, other types through plain loops.
func runBinary[T number](op compute.OpType, p *bcastPlan, dst, a, b []T) {
	if f, ok := any(dst).([]float32); ok {
		runBinaryWith(f32Bin{op}, p, f, any(a).([]float32), any(b).([]float32))
		return
	}
	runBinaryWith(goBin[T]{op}, p, dst, a, b)
}

func runBinaryWith[T number, K binKernel[T]](k K, p *bcastPlan, dst, a, b []T) {
	n := len(dst)
	serial := !parallelWorth(n, elemGrain)
	switch {
	case len(a) == n && len(b) == n:
		if serial {
			k.vv(dst, a, b)
			return
		}
		parallelRange(n, elemGrain, func(lo, hi int) { k.vv(dst[lo:hi], a[lo:hi], b[lo:hi]) })
		return
	case len(b) == 1 && len(a) == n:
		if serial {
			k.vs(dst, a, b[0])
			return
		}
		parallelRange(n, elemGrain, func(lo, hi int) { k.vs(dst[lo:hi], a[lo:hi], b[0]) })
		return
	case len(a) == 1 && len(b) == n:
		if serial {
			k.sv(dst, a[0], b)
			return
		}
		parallelRange(n, elemGrain, func(lo, hi int) { k.sv(dst[lo:hi], a[0], b[lo:hi]) })
		return
	}
	if p.serial() {
		p.walkRows(0, p.outer, func(r int, offs [maxPlanOperands]int) { binRow(k, p, dst, a, b, r, offs) })
		return
	}
	p.forRows(func(r int, offs [maxPlanOperands]int) { binRow(k, p, dst, a, b, r, offs) })
}

// binRow computes output row r of a broadcast binary op.
func binRow[T number, K binKernel[T]](k K, p *bcastPlan, dst, a, b []T, r int, offs [maxPlanOperands]int) {
	in := p.inner
	d := dst[r*in : (r+1)*in]
	switch {
	case p.inStep[0] == 1 && p.inStep[1] == 1:
		k.vv(d, a[offs[0]:offs[0]+in], b[offs[1]:offs[1]+in])
	case p.inStep[0] == 1:
		k.vs(d, a[offs[0]:offs[0]+in], b[offs[1]])
	case p.inStep[1] == 1:
		k.sv(d, a[offs[0]], b[offs[1]:offs[1]+in])
	default:
		k.sv(d[:1], a[offs[0]], b[offs[1]:offs[1]+1])
		for i := 1; i < in; i++ {
			d[i] = d[0]
		}
	}
}

func binVVF32(op compute.OpType, d, a, b []float32) {
	k := simdVV(op, d, a, b)
	if k < len(d) {
		binVVGo(op, d[k:], a[k:], b[k:])
	}
}

func binVSF32(op compute.OpType, d, a []float32, b float32) {
	k := simdVS(op, d, a, b)
	if k < len(d) {
		binVSGo(op, d[k:], a[k:], b)
	}
}

func binSVF32(op compute.OpType, d []float32, a float32, b []float32) {
	k := simdSV(op, d, a, b)
	if k < len(d) {
		binSVGo(op, d[k:], a, b[k:])
	}
}

func binVVGo[T number](op compute.OpType, d, a, b []T) {
	a, b = a[:len(d)], b[:len(d)]
	switch op {
	case compute.OpTypeAdd:
		for i := range d {
			d[i] = a[i] + b[i]
		}
	case compute.OpTypeSub:
		for i := range d {
			d[i] = a[i] - b[i]
		}
	case compute.OpTypeMul:
		for i := range d {
			d[i] = a[i] * b[i]
		}
	case compute.OpTypeDiv:
		for i := range d {
			d[i] = div(a[i], b[i])
		}
	case compute.OpTypeMax:
		for i := range d {
			d[i] = maxOf(a[i], b[i])
		}
	case compute.OpTypeMin:
		for i := range d {
			d[i] = minOf(a[i], b[i])
		}
	default:
		f := scalarBinary[T](op)
		for i := range d {
			d[i] = f(a[i], b[i])
		}
	}
}

func binVSGo[T number](op compute.OpType, d, a []T, b T) {
	a = a[:len(d)]
	switch op {
	case compute.OpTypeAdd:
		for i := range d {
			d[i] = a[i] + b
		}
	case compute.OpTypeSub:
		for i := range d {
			d[i] = a[i] - b
		}
	case compute.OpTypeMul:
		for i := range d {
			d[i] = a[i] * b
		}
	case compute.OpTypeDiv:
		for i := range d {
			d[i] = div(a[i], b)
		}
	case compute.OpTypeMax:
		for i := range d {
			d[i] = maxOf(a[i], b)
		}
	case compute.OpTypeMin:
		for i := range d {
			d[i] = minOf(a[i], b)
		}
	default:
		f := scalarBinary[T](op)
		for i := range d {
			d[i] = f(a[i], b)
		}
	}
}

func binSVGo[T number](op compute.OpType, d []T, a T, b []T) {
	b = b[:len(d)]
	switch op {
	case compute.OpTypeAdd:
		for i := range d {
			d[i] = a + b[i]
		}
	case compute.OpTypeSub:
		for i := range d {
			d[i] = a - b[i]
		}
	case compute.OpTypeMul:
		for i := range d {
			d[i] = a * b[i]
		}
	case compute.OpTypeDiv:
		for i := range d {
			d[i] = div(a, b[i])
		}
	case compute.OpTypeMax:
		for i := range d {
			d[i] = maxOf(a, b[i])
		}
	case compute.OpTypeMin:
		for i := range d {
			d[i] = minOf(a, b[i])
		}
	default:
		f := scalarBinary[T](op)
		for i := range d {
			d[i] = f(a, b[i])
		}
	}
}

// div is a/b; integer division by zero gives 0 instead of a panic.
func div[T number](a, b T) T {
	var zero T
	if isIntType[T]() && b == zero {
		return zero
	}
	return a / b
}

func isIntType[T number]() bool {
	var one T = 1
	return one/2 == 0
}

// maxOf and minOf propagate NaN like XLA.
func maxOf[T number](a, b T) T {
	if a != a || a > b {
		return a
	}
	return b
}

func minOf[T number](a, b T) T {
	if a != a || a < b {
		return a
	}
	return b
}

func scalarBinary[T number](op compute.OpType) func(a, b T) T {
	switch op {
	case compute.OpTypePow:
		return func(a, b T) T { return T(math.Pow(float64(a), float64(b))) }
	case compute.OpTypeRem:
		if isIntType[T]() {
			return func(a, b T) T {
				if b == 0 {
					return 0
				}
				return T(int64(a) % int64(b))
			}
		}
		return func(a, b T) T { return T(math.Mod(float64(a), float64(b))) }
	}
	panic("binary op " + op.String() + " not implemented")
}

// runCompare evaluates a comparison with broadcasting.
func runCompare[T number](op compute.OpType, p *bcastPlan, dst []bool, a, b []T) {
	in := p.inner
	p.forRows(func(r int, offs [maxPlanOperands]int) {
		compareRow(op, dst[r*in:(r+1)*in], a, offs[0], p.inStep[0], b, offs[1], p.inStep[1])
	})
}

// compareRow sets d[i] = a[ai+i·sa] op b[bi+i·sb].
func compareRow[T number](op compute.OpType, d []bool, a []T, ai, sa int, b []T, bi, sb int) {
	switch op {
	case compute.OpTypeEqual:
		for i := range d {
			d[i] = a[ai] == b[bi]
			ai += sa
			bi += sb
		}
	case compute.OpTypeNotEqual:
		for i := range d {
			d[i] = a[ai] != b[bi]
			ai += sa
			bi += sb
		}
	case compute.OpTypeLessThan:
		for i := range d {
			d[i] = a[ai] < b[bi]
			ai += sa
			bi += sb
		}
	case compute.OpTypeLessOrEqual:
		for i := range d {
			d[i] = a[ai] <= b[bi]
			ai += sa
			bi += sb
		}
	case compute.OpTypeGreaterThan:
		for i := range d {
			d[i] = a[ai] > b[bi]
			ai += sa
			bi += sb
		}
	case compute.OpTypeGreaterOrEqual:
		for i := range d {
			d[i] = a[ai] >= b[bi]
			ai += sa
			bi += sb
		}
	default:
		panic("comparison " + op.String() + " not implemented")
	}
}

// runLogical evaluates boolean binary ops (and bool Equal/NotEqual).
func runLogical(op compute.OpType, p *bcastPlan, dst, a, b []bool) {
	var f func(a, b bool) bool
	switch op {
	case compute.OpTypeLogicalAnd:
		f = func(a, b bool) bool { return a && b }
	case compute.OpTypeLogicalOr:
		f = func(a, b bool) bool { return a || b }
	case compute.OpTypeLogicalXor, compute.OpTypeNotEqual:
		f = func(a, b bool) bool { return a != b }
	case compute.OpTypeEqual:
		f = func(a, b bool) bool { return a == b }
	default:
		panic("boolean op " + op.String() + " not implemented")
	}
	in := p.inner
	p.forRows(func(r int, offs [maxPlanOperands]int) {
		d := dst[r*in : (r+1)*in]
		ai, bi := offs[0], offs[1]
		for i := range d {
			d[i] = f(a[ai], b[bi])
			ai += p.inStep[0]
			bi += p.inStep[1]
		}
	})
}

// runWhere evaluates Where(cond, onTrue, onFalse) with broadcasting. When
// the condition is constant along a row (e.g. a position mask over a
// [B,H,T,dh] cache), whole rows are copied from one side.
//
// alias is the operand dst is (1: onTrue, 2: onFalse, its memory taken
// over in place) or 0.
func runWhere[T any](p *bcastPlan, dst []T, c []bool, t, f []T, alias int) {
	if alias != 0 && p.inStep[0] == 0 {
		whereInPlace(p, alias, dst, c, t, f)
		return
	}
	in := p.inner
	p.forRows(func(r int, offs [maxPlanOperands]int) {
		d := dst[r*in : (r+1)*in]
		ci, ti, fi := offs[0], offs[1], offs[2]
		if p.inStep[0] == 0 {
			src, si, step := f, fi, p.inStep[2]
			if c[ci] {
				src, si, step = t, ti, p.inStep[1]
			}
			if step == 1 {
				copy(d, src[si:si+in])
			} else {
				v := src[si]
				for i := range d {
					d[i] = v
				}
			}
			return
		}
		for i := range d {
			if c[ci] {
				d[i] = t[ti]
			} else {
				d[i] = f[fi]
			}
			ci += p.inStep[0]
			ti += p.inStep[1]
			fi += p.inStep[2]
		}
	})
}

// whereInPlace computes a Where whose output took over the memory of
// value operand alias (1: onTrue, 2: onFalse) and whose condition is
// constant along each row: rows that keep the aliased operand are already
// in place, so it walks the condition's own elements and copies only the
// rows that take the other operand. A decode step's cache update (one
// position of a [B, heads, T, d] cache written) then costs B·T condition
// reads and B·heads row copies instead of a pass over B·heads·T rows.
func whereInPlace[T any](p *bcastPlan, alias int, dst []T, c []bool, t, f []T) {
	src, op, take := t, 1, true // rows where c is true take onTrue
	if alias == 1 {
		src, op, take = f, 2, false
	}
	// The outer axes the condition varies along, and those it is
	// broadcast over.
	var condAxes, bcastAxes []int
	for a, s := range p.strides[0] {
		if s != 0 {
			condAxes = append(condAxes, a)
		} else {
			bcastAxes = append(bcastAxes, a)
		}
	}
	// dst is the output, contiguous: row-major strides of the outer axes.
	rowStride := make([]int, len(p.dims))
	for a, s := len(p.dims)-1, p.inner; a >= 0; a-- {
		rowStride[a] = s
		s *= p.dims[a]
	}
	in, step := p.inner, p.inStep[op]
	walkAxes(p.dims, condAxes, [][]int{p.strides[0], rowStride, p.strides[op]}, func(offs []int) {
		if c[offs[0]] != take {
			return
		}
		d0, s0 := offs[1], offs[2]
		walkAxes(p.dims, bcastAxes, [][]int{rowStride, p.strides[op]}, func(o []int) {
			d, si := dst[d0+o[0]:d0+o[0]+in], s0+o[1]
			if step == 1 {
				copy(d, src[si:si+in])
				return
			}
			v := src[si]
			for i := range d {
				d[i] = v
			}
		})
	})
}

// walkAxes calls fn for every index over the listed axes of dims (the
// last axis fastest) with offs[k] = Σ index[a]·strides[k][a]; once, with
// zeros, when axes is empty. fn must not keep offs.
func walkAxes(dims, axes []int, strides [][]int, fn func(offs []int)) {
	offs := make([]int, len(strides))
	idx := make([]int, len(axes))
	for {
		fn(offs)
		j := len(axes) - 1
		for ; j >= 0; j-- {
			a := axes[j]
			idx[j]++
			for k := range offs {
				offs[k] += strides[k][a]
			}
			if idx[j] < dims[a] {
				break
			}
			idx[j] = 0
			for k := range offs {
				offs[k] -= strides[k][a] * dims[a]
			}
		}
		if j < 0 {
			return
		}
	}
}

// Unary kernels: d[i] = f(x[i]) over one chunk; d may alias x. The op
// table (optable.go) lists which run for which dtype.

func negK[T number](d, x []T) {
	x = x[:len(d)]
	for i := range d {
		d[i] = -x[i]
	}
}

func absK[T number](d, x []T) {
	x = x[:len(d)]
	for i := range d {
		if x[i] < 0 {
			d[i] = -x[i]
		} else {
			d[i] = x[i]
		}
	}
}

// signK is -1, 0 or 1; NaN stays NaN (float32 has signF32).
func signK[T number](d, x []T) {
	x = x[:len(d)]
	for i, v := range x {
		switch {
		case v > 0:
			d[i] = 1
		case v < 0:
			var one T = 1
			d[i] = -one
		case v != v:
			d[i] = v
		default:
			d[i] = 0
		}
	}
}

func expF64(d, x []float64) {
	x = x[:len(d)]
	for i := range d {
		d[i] = math.Exp(x[i])
	}
}

func rsqrt(x float64) float64 { return 1 / math.Sqrt(x) }

// logistic is 1/(1+e^-x), without overflow for large |x|.
func logistic(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}

func notK(d, x []bool) {
	x = x[:len(d)]
	for i := range d {
		d[i] = !x[i]
	}
}

func isFiniteK[T float](d []bool, x []T) {
	x = x[:len(d)]
	for i := range d {
		v := float64(x[i])
		d[i] = v == v && !math.IsInf(v, 0)
	}
}

func isNaNK[T float](d []bool, x []T) {
	x = x[:len(d)]
	for i := range d {
		d[i] = x[i] != x[i]
	}
}

// expF32 is exp in float32: exp32's operations for every element (8 at
// a time in the AVX2 kernel, one at a time here), within 2 ulp of the
// correctly rounded value, the same bits on every kernel path.
func expF32(d, x []float32) {
	k := simdExp(d, x)
	x = x[:len(d)]
	for i := k; i < len(d); i++ {
		d[i] = exp32(x[i])
	}
}

// signF32 is Sign for float32: -1, 0 or 1 (NaN stays NaN, ±0 stays ±0),
// without branches on the data (random signs defeat branch prediction).
func signF32(d, x []float32) {
	x = x[:len(d)]
	for i, v := range x {
		b := math.Float32bits(v)
		abs := b & 0x7fffffff
		// keep is all ones for ±0 and NaN, zero otherwise.
		keep := uint32(0)
		if abs-1 >= 0x7f800000 {
			keep = 0xffffffff
		}
		d[i] = math.Float32frombits(b&keep | (b&0x80000000|0x3f800000)&^keep)
	}
}
