package cpu

import (
	"math"

	"github.com/gomlx/compute"
	"github.com/pkg/errors"
)

func reduceAny(op compute.OpType, d, x any, dims, axes []int) error {
	switch d := d.(type) {
	case []float32:
		reduceT(op, d, x.([]float32), dims, axes)
	case []float64:
		reduceT(op, d, x.([]float64), dims, axes)
	case []int32:
		reduceT(op, d, x.([]int32), dims, axes)
	case []int64:
		reduceT(op, d, x.([]int64), dims, axes)
	case []int8:
		reduceT(op, d, x.([]int8), dims, axes)
	case []int16:
		reduceT(op, d, x.([]int16), dims, axes)
	case []uint8:
		reduceT(op, d, x.([]uint8), dims, axes)
	case []uint16:
		reduceT(op, d, x.([]uint16), dims, axes)
	case []uint32:
		reduceT(op, d, x.([]uint32), dims, axes)
	case []uint64:
		reduceT(op, d, x.([]uint64), dims, axes)
	default:
		return errors.Errorf("%s: unsupported dtype %T", op, d)
	}
	return nil
}

func reduceInit[T number](op compute.OpType) T {
	var v T
	switch op {
	case compute.OpTypeReduceProduct:
		v = 1
	case compute.OpTypeReduceMax:
		v = lowest[T]()
	case compute.OpTypeReduceMin:
		v = highest[T]()
	}
	return v
}

func lowest[T number]() T {
	var z T
	switch p := any(&z).(type) {
	case *float32:
		*p = float32(math.Inf(-1))
	case *float64:
		*p = math.Inf(-1)
	case *int8:
		*p = math.MinInt8
	case *int16:
		*p = math.MinInt16
	case *int32:
		*p = math.MinInt32
	case *int64:
		*p = math.MinInt64
	}
	return z
}

func highest[T number]() T {
	var z T
	switch p := any(&z).(type) {
	case *float32:
		*p = float32(math.Inf(1))
	case *float64:
		*p = math.Inf(1)
	case *int8:
		*p = math.MaxInt8
	case *int16:
		*p = math.MaxInt16
	case *int32:
		*p = math.MaxInt32
	case *int64:
		*p = math.MaxInt64
	case *uint8:
		*p = math.MaxUint8
	case *uint16:
		*p = math.MaxUint16
	case *uint32:
		*p = math.MaxUint32
	case *uint64:
		*p = math.MaxUint64
	}
	return z
}

// accumulate folds a into acc elementwise (acc op= a).
func accumulate[T number](op compute.OpType, acc, a []T) {
	a = a[:len(acc)]
	if f, ok := any(acc).([]float32); ok && op == compute.OpTypeReduceSum {
		k := simdVV(compute.OpTypeAdd, f, f, any(a).([]float32))
		acc, a = acc[k:], a[k:]
	}
	switch op {
	case compute.OpTypeReduceSum:
		for i := range acc {
			acc[i] += a[i]
		}
	case compute.OpTypeReduceProduct:
		for i := range acc {
			acc[i] *= a[i]
		}
	case compute.OpTypeReduceMax:
		for i := range acc {
			acc[i] = maxOf(acc[i], a[i])
		}
	case compute.OpTypeReduceMin:
		for i := range acc {
			acc[i] = minOf(acc[i], a[i])
		}
	}
}

// fold reduces a contiguous run.
func fold[T number](op compute.OpType, a []T) T {
	v := reduceInit[T](op)
	switch op {
	case compute.OpTypeReduceSum:
		for _, x := range a {
			v += x
		}
	case compute.OpTypeReduceProduct:
		for _, x := range a {
			v *= x
		}
	case compute.OpTypeReduceMax:
		for _, x := range a {
			v = maxOf(v, x)
		}
	case compute.OpTypeReduceMin:
		for _, x := range a {
			v = minOf(v, x)
		}
	}
	return v
}

// reduceT reduces x (dims) over axes into d. The axes are grouped into runs
// of kept (K) and reduced (R) axes; the shapes [K R], [R K] and [K R K]
// have direct loops, anything else transposes the reduced axes to the end
// first.
func reduceT[T number](op compute.OpType, d, x []T, dims, axes []int) {
	red := make([]bool, len(dims))
	for _, a := range axes {
		red[a] = true
	}
	type group struct {
		size    int
		reduced bool
	}
	var gs []group
	for a, n := range dims {
		if n == 1 {
			continue
		}
		if k := len(gs) - 1; k >= 0 && gs[k].reduced == red[a] {
			gs[k].size *= n
			continue
		}
		gs = append(gs, group{n, red[a]})
	}
	if len(x) == 0 {
		for i := range d {
			d[i] = reduceInit[T](op)
		}
		return
	}
	// Leading/trailing kept groups become outer/inner; a single reduced
	// group in the middle is the general fast case.
	outer, mid, inner := 1, 1, 1
	switch {
	case len(gs) == 0:
		copy(d, x)
		return
	case len(gs) == 1 && !gs[0].reduced:
		copy(d, x)
		return
	case len(gs) == 1:
		mid = gs[0].size
	case len(gs) == 2 && gs[0].reduced:
		mid, inner = gs[0].size, gs[1].size
	case len(gs) == 2:
		outer, mid = gs[0].size, gs[1].size
	case len(gs) == 3 && !gs[0].reduced:
		outer, mid, inner = gs[0].size, gs[1].size, gs[2].size
	default:
		// Move reduced axes last, then reduce rows.
		var perm, tdims []int
		kept := 1
		for a := range dims {
			if !red[a] {
				perm = append(perm, a)
				tdims = append(tdims, dims[a])
				kept *= dims[a]
			}
		}
		for a := range dims {
			if red[a] {
				perm = append(perm, a)
				tdims = append(tdims, dims[a])
			}
		}
		t := make([]T, len(x))
		transposeAny(t, x, dims, perm)
		reduceT(op, d, t, []int{kept, len(x) / max(1, kept)}, []int{1})
		return
	}
	if inner == 1 {
		if df, ok := any(d).([]float32); ok && (op == compute.OpTypeReduceSum || op == compute.OpTypeReduceMax) {
			xf := any(x).([]float32)
			if !parallelWorth(outer, max(1, elemGrain/mid)) {
				for o := range outer {
					df[o] = foldF32(op, xf[o*mid:(o+1)*mid])
				}
				return
			}
			parallelRange(outer, max(1, elemGrain/mid), func(lo, hi int) {
				for o := lo; o < hi; o++ {
					df[o] = foldF32(op, xf[o*mid:(o+1)*mid])
				}
			})
			return
		}
		parallelRange(outer, max(1, elemGrain/mid), func(lo, hi int) {
			for o := lo; o < hi; o++ {
				d[o] = fold(op, x[o*mid:(o+1)*mid])
			}
		})
		return
	}
	// [outer, mid, inner]: accumulate rows of inner.
	work := func(o, lo, hi int) {
		acc := d[o*inner+lo : o*inner+hi]
		copy(acc, x[o*mid*inner+lo:o*mid*inner+hi])
		for m := 1; m < mid; m++ {
			base := (o*mid + m) * inner
			accumulate(op, acc, x[base+lo:base+hi])
		}
	}
	if outer >= 2 {
		parallelRange(outer, max(1, elemGrain/(mid*inner)), func(lo, hi int) {
			for o := lo; o < hi; o++ {
				work(o, 0, inner)
			}
		})
		return
	}
	parallelRange(inner, max(64, elemGrain/mid), func(lo, hi int) { work(0, lo, hi) })
}

func argMinMaxAny(d, x any, dims []int, axis int, isMin bool) error {
	switch x := x.(type) {
	case []float32:
		return argMinMaxFrom(d, x, dims, axis, isMin)
	case []float64:
		return argMinMaxFrom(d, x, dims, axis, isMin)
	case []int32:
		return argMinMaxFrom(d, x, dims, axis, isMin)
	case []int64:
		return argMinMaxFrom(d, x, dims, axis, isMin)
	case []int8:
		return argMinMaxFrom(d, x, dims, axis, isMin)
	case []int16:
		return argMinMaxFrom(d, x, dims, axis, isMin)
	case []uint8:
		return argMinMaxFrom(d, x, dims, axis, isMin)
	case []uint16:
		return argMinMaxFrom(d, x, dims, axis, isMin)
	case []uint32:
		return argMinMaxFrom(d, x, dims, axis, isMin)
	case []uint64:
		return argMinMaxFrom(d, x, dims, axis, isMin)
	}
	return errors.Errorf("ArgMinMax: unsupported dtype %T", x)
}

func argMinMaxFrom[T number](d any, x []T, dims []int, axis int, isMin bool) error {
	idx := argMinMaxIdx(x, dims, axis, isMin)
	switch d := d.(type) {
	case []int32:
		convertT(d, idx)
	case []int64:
		convertT(d, idx)
	case []int8:
		convertT(d, idx)
	case []int16:
		convertT(d, idx)
	case []uint8:
		convertT(d, idx)
	case []uint16:
		convertT(d, idx)
	case []uint32:
		convertT(d, idx)
	case []uint64:
		convertT(d, idx)
	case []float32:
		convertT(d, idx)
	case []float64:
		convertT(d, idx)
	default:
		return errors.Errorf("ArgMinMax: unsupported output %T", d)
	}
	return nil
}

// argMinMaxIdx returns, for each position outside axis, the index of the
// first extreme value along axis (NaN counts as extreme, like XLA).
func argMinMaxIdx[T number](x []T, dims []int, axis int, isMin bool) []int64 {
	outer, inner := 1, 1
	for a := 0; a < axis; a++ {
		outer *= dims[a]
	}
	for a := axis + 1; a < len(dims); a++ {
		inner *= dims[a]
	}
	n := dims[axis]
	out := make([]int64, outer*inner)
	for o := 0; o < outer; o++ {
		for i := 0; i < inner; i++ {
			base := o*n*inner + i
			best, bi := x[base], 0
			for k := 1; k < n && best == best; k++ {
				v := x[base+k*inner]
				if v != v || (isMin && v < best) || (!isMin && v > best) {
					best, bi = v, k
				}
			}
			out[o*inner+i] = int64(bi)
		}
	}
	return out
}

// foldF32 is fold for float32 sums and maxima in one order on every
// kernel path: the first len&^7 values as the AVX2 kernels vecSum and
// vecMax fold them (sumLanes and maxLanes spell that order out), the rest
// in sequence after. A NaN anywhere makes the max NaN.
func foldF32(op compute.OpType, a []float32) float32 {
	n := len(a) &^ 7
	v, k := simdFold(op, a)
	if k != n {
		switch op {
		case compute.OpTypeReduceSum:
			v = sumLanes(a[:n])
		case compute.OpTypeReduceMax:
			if n > 0 {
				v = maxLanes(a[:n])
			}
		}
		k = n
	}
	if op == compute.OpTypeReduceSum {
		for _, x := range a[k:] {
			v += x
		}
		return v
	}
	if k == 0 {
		v = float32(math.Inf(-1))
	}
	for _, x := range a[k:] {
		v = maxOf(v, x)
	}
	if v == v && k > 0 {
		for _, x := range a[:k] {
			if x != x {
				return x
			}
		}
	}
	return v
}
