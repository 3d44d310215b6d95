package cpu

import (
	"slices"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/shapes"
	"github.com/pkg/errors"
)

// indexReader reads element i of an integer index tensor as int.
func indexReader(idx any) (func(i int) int, error) {
	switch x := idx.(type) {
	case []int32:
		return func(i int) int { return int(x[i]) }, nil
	case []int64:
		return func(i int) int { return int(x[i]) }, nil
	case []int8:
		return func(i int) int { return int(x[i]) }, nil
	case []int16:
		return func(i int) int { return int(x[i]) }, nil
	case []uint8:
		return func(i int) int { return int(x[i]) }, nil
	case []uint16:
		return func(i int) int { return int(x[i]) }, nil
	case []uint32:
		return func(i int) int { return int(x[i]) }, nil
	case []uint64:
		return func(i int) int { return int(x[i]) }, nil
	}
	return nil, errors.Errorf("unsupported index type %T", idx)
}

// batchWalk enumerates the positions of an index tensor other than its
// index-vector axis: for each, the flat offset of its first index component
// and the step between components.
type batchWalk struct {
	dims    []int // index tensor dims without the index-vector axis
	strides []int // their strides in the index tensor
	vecStep int   // stride of the index-vector axis (0 if implicit)
	vecLen  int
	count   int
}

func newBatchWalk(idxShape shapes.Shape, indexVectorAxis int) *batchWalk {
	str := stridesOf(idxShape.Dimensions)
	w := &batchWalk{count: 1, vecLen: 1}
	for a, d := range idxShape.Dimensions {
		if a == indexVectorAxis {
			w.vecStep, w.vecLen = str[a], d
			continue
		}
		w.dims = append(w.dims, d)
		w.strides = append(w.strides, str[a])
		w.count *= d
	}
	return w
}

// coords writes batch position b's coordinates into c and returns the
// flat offset of its index vector.
func (w *batchWalk) coords(b int, c []int) int {
	off := 0
	for a := len(w.dims) - 1; a >= 0; a-- {
		c[a] = b % w.dims[a]
		b /= w.dims[a]
		off += c[a] * w.strides[a]
	}
	return off
}

func gatherAny(d, operand, indices any, os, is, out shapes.Shape, p *gatherParams) error {
	read, err := indexReader(indices)
	if err != nil {
		return errors.WithMessage(err, "Gather")
	}
	rank := os.Rank()
	osStr := stridesOf(os.Dimensions)
	outStr := stridesOf(out.Dimensions)
	// Output axes: offset axes (operand's non-collapsed axes, in order) at
	// p.offsetOutputAxes; the others are batch axes in index order.
	var batchOut []int
	for a := range out.Rank() {
		if !slices.Contains(p.offsetOutputAxes, a) {
			batchOut = append(batchOut, a)
		}
	}
	dstStr := make([]int, rank)
	k := 0
	for a := range rank {
		if slices.Contains(p.collapsedSliceAxes, a) {
			continue
		}
		dstStr[a] = outStr[p.offsetOutputAxes[k]]
		k++
	}
	plan := newMovePlan(p.sliceSizes, dstStr, osStr)
	w := newBatchWalk(is, p.indexVectorAxis)
	run := func(lo, hi int) {
		c := make([]int, len(w.dims))
		for b := lo; b < hi; b++ {
			io := w.coords(b, c)
			dstOff := 0
			for i, ax := range batchOut {
				dstOff += c[i] * outStr[ax]
			}
			srcOff := 0
			for j, ax := range p.startIndexMap {
				s := read(io + j*w.vecStep)
				s = min(max(s, 0), os.Dimensions[ax]-p.sliceSizes[ax])
				srcOff += s * osStr[ax]
			}
			moveRowsAny(plan, d, operand, dstOff, srcOff)
		}
	}
	sliceSize := 1
	for _, s := range p.sliceSizes {
		sliceSize *= s
	}
	parallelRange(w.count, max(1, elemGrain/max(1, sliceSize)), run)
	return nil
}

// moveRowsAny is a sequential move (the caller parallelises).
func moveRowsAny(p *movePlan, dst, src any, dstOff, srcOff int) {
	d8, d16, d32, d64 := words(dst)
	s8, s16, s32, s64 := words(src)
	switch {
	case d32 != nil:
		moveRows(p, d32, s32, dstOff, srcOff, 0, p.outer)
	case d64 != nil:
		moveRows(p, d64, s64, dstOff, srcOff, 0, p.outer)
	case d8 != nil:
		moveRows(p, d8, s8, dstOff, srcOff, 0, p.outer)
	default:
		moveRows(p, d16, s16, dstOff, srcOff, 0, p.outer)
	}
}

func scatterAny(op compute.OpType, d, indices, updates any, os, is, us shapes.Shape, p *scatterParams) error {
	switch d := d.(type) {
	case []float32:
		return scatterT(op, d, indices, updates.([]float32), os, is, us, p)
	case []float64:
		return scatterT(op, d, indices, updates.([]float64), os, is, us, p)
	case []int32:
		return scatterT(op, d, indices, updates.([]int32), os, is, us, p)
	case []int64:
		return scatterT(op, d, indices, updates.([]int64), os, is, us, p)
	case []int8:
		return scatterT(op, d, indices, updates.([]int8), os, is, us, p)
	case []int16:
		return scatterT(op, d, indices, updates.([]int16), os, is, us, p)
	case []uint8:
		return scatterT(op, d, indices, updates.([]uint8), os, is, us, p)
	case []uint16:
		return scatterT(op, d, indices, updates.([]uint16), os, is, us, p)
	case []uint32:
		return scatterT(op, d, indices, updates.([]uint32), os, is, us, p)
	case []uint64:
		return scatterT(op, d, indices, updates.([]uint64), os, is, us, p)
	}
	return errors.Errorf("%s: unsupported dtype %T", op, d)
}

// scatterT combines updates into d (a copy of the operand) with XLA scatter
// semantics. A window that would fall outside the operand is skipped.
// Updates are applied sequentially, in index order, so colliding indices
// give deterministic results.
func scatterT[T number](op compute.OpType, d []T, indices any, u []T, os, is, us shapes.Shape, p *scatterParams) error {
	read, err := indexReader(indices)
	if err != nil {
		return errors.WithMessagef(err, "%s", op)
	}
	rank := os.Rank()
	osStr := stridesOf(os.Dimensions)
	usStr := stridesOf(us.Dimensions)
	var scatterU []int // update axes that enumerate index positions
	for a := range us.Rank() {
		if !slices.Contains(p.updateWindowAxes, a) {
			scatterU = append(scatterU, a)
		}
	}
	// Window: operand axes not inserted map to updateWindowAxes in order.
	win := make([]int, rank)
	srcStr := make([]int, rank)
	k := 0
	for a := range rank {
		if slices.Contains(p.insertedWindowAxes, a) {
			win[a] = 1
			continue
		}
		ua := p.updateWindowAxes[k]
		win[a], srcStr[a] = us.Dimensions[ua], usStr[ua]
		k++
	}
	plan := newMovePlan(win, osStr, srcStr)
	w := newBatchWalk(is, p.indexVectorAxis)
	c := make([]int, len(w.dims))
	start := make([]int, rank)
	for b := 0; b < w.count; b++ {
		io := w.coords(b, c)
		srcOff := 0
		for i, ax := range scatterU {
			srcOff += c[i] * usStr[ax]
		}
		clear(start)
		for j, ax := range p.scatterAxesToOperand {
			start[ax] = read(io + j*w.vecStep)
		}
		dstOff, ok := 0, true
		for a := range rank {
			if start[a] < 0 || start[a]+win[a] > os.Dimensions[a] {
				ok = false
				break
			}
			dstOff += start[a] * osStr[a]
		}
		if !ok {
			continue
		}
		combineRows(op, plan, d, u, dstOff, srcOff)
	}
	return nil
}

func combineRows[T number](op compute.OpType, p *movePlan, dst, src []T, dstOff, srcOff int) {
	for r := 0; r < p.outer; r++ {
		do, so := p.offsets(r)
		do += dstOff
		so += srcOff
		if p.dInner == 1 && p.sInner == 1 {
			d, s := dst[do:do+p.inner], src[so:so+p.inner]
			switch op {
			case compute.OpTypeScatterSum:
				if f, ok := any(d).([]float32); ok {
					binVVF32(compute.OpTypeAdd, f, f, any(s).([]float32))
					continue
				}
				for i := range d {
					d[i] += s[i]
				}
			case compute.OpTypeScatterMax:
				for i := range d {
					d[i] = maxOf(d[i], s[i])
				}
			case compute.OpTypeScatterMin:
				for i := range d {
					d[i] = minOf(d[i], s[i])
				}
			}
			continue
		}
		for i := 0; i < p.inner; i++ {
			switch op {
			case compute.OpTypeScatterSum:
				dst[do] += src[so]
			case compute.OpTypeScatterMax:
				dst[do] = maxOf(dst[do], src[so])
			case compute.OpTypeScatterMin:
				dst[do] = minOf(dst[do], src[so])
			}
			do += p.dInner
			so += p.sInner
		}
	}
}
