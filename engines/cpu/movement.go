package cpu

import (
	"unsafe"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes/bfloat16"
	"github.com/pkg/errors"
)

// Data movement (transpose, broadcast, slice, pad, concatenate, gather and
// scatter windows) is one routine: walk an index space `dims` and copy
// src[srcOff + Σ i·srcStride] to dst[dstOff + Σ i·dstStride]. Movement does
// not depend on the element type, only on its width, so kernels run on
// uint8/16/32/64 views of the data.

// movePlan is an index space with unit axes dropped and adjacent axes
// merged where both strides allow it.
type movePlan struct {
	dims, dst, src []int // outer axes (all but the innermost)
	inner          int   // innermost run length
	dInner, sInner int   // strides along the innermost run
	outer          int   // product of dims
}

func newMovePlan(dims, dstStrides, srcStrides []int) *movePlan {
	var d, ds, ss []int
	for a := range dims {
		if dims[a] == 1 {
			continue
		}
		if k := len(d) - 1; k >= 0 && ds[k] == dstStrides[a]*dims[a] && ss[k] == srcStrides[a]*dims[a] {
			d[k] *= dims[a]
			ds[k], ss[k] = dstStrides[a], srcStrides[a]
			continue
		}
		d = append(d, dims[a])
		ds = append(ds, dstStrides[a])
		ss = append(ss, srcStrides[a])
	}
	p := &movePlan{inner: 1, outer: 1}
	for _, x := range dims {
		if x == 0 {
			p.inner, p.outer = 0, 0
			return p
		}
	}
	if k := len(d) - 1; k >= 0 {
		p.inner, p.dInner, p.sInner = d[k], ds[k], ss[k]
		d, ds, ss = d[:k], ds[:k], ss[:k]
	}
	p.dims, p.dst, p.src = d, ds, ss
	for _, x := range d {
		p.outer *= x
	}
	return p
}

// odometer returns the index along dims (last axis fastest) of flat
// position r, in buf when the rank fits: the start of an incremental walk.
func odometer(buf *[8]int, dims []int, r int) []int {
	idx := buf[:0]
	if len(dims) <= len(buf) {
		idx = buf[:len(dims)]
	} else {
		idx = make([]int, len(dims))
	}
	for a := len(dims) - 1; a >= 0; a-- {
		idx[a] = r % dims[a]
		r /= dims[a]
	}
	return idx
}

// offsets returns the dst and src offsets of outer row r.
func (p *movePlan) offsets(r int) (int, int) {
	do, so := 0, 0
	for a := len(p.dims) - 1; a >= 0; a-- {
		i := r % p.dims[a]
		r /= p.dims[a]
		do += i * p.dst[a]
		so += i * p.src[a]
	}
	return do, so
}

func moveRows[T any](p *movePlan, dst, src []T, dstOff, srcOff, lo, hi int) {
	n, di, si := p.inner, p.dInner, p.sInner
	// Odometer over the outer axes, advanced incrementally.
	nd := len(p.dims)
	var idxBuf [8]int
	idx := odometer(&idxBuf, p.dims, lo)
	rowD, rowS := p.offsets(lo)
	for r := lo; r < hi; r++ {
		do, so := rowD+dstOff, rowS+srcOff
		for a := nd - 1; a >= 0; a-- {
			idx[a]++
			rowD += p.dst[a]
			rowS += p.src[a]
			if idx[a] < p.dims[a] {
				break
			}
			idx[a] = 0
			rowD -= p.dst[a] * p.dims[a]
			rowS -= p.src[a] * p.dims[a]
		}
		switch {
		case di == 1 && si == 1:
			copy(dst[do:do+n], src[so:so+n])
		case di == 1 && si == 0:
			d, v := dst[do:do+n], src[so]
			for i := range d {
				d[i] = v
			}
		case di == 1:
			d := dst[do : do+n]
			for i := range d {
				d[i] = src[so]
				so += si
			}
		default:
			for i := 0; i < n; i++ {
				dst[do] = src[so]
				do += di
				so += si
			}
		}
	}
}

// run performs the move, in parallel when large.
func moveRun[T any](p *movePlan, dst, src []T, dstOff, srcOff int) {
	grain := max(1, elemGrain/max(1, p.inner))
	if !parallelWorth(p.outer, grain) {
		moveRows(p, dst, src, dstOff, srcOff, 0, p.outer)
		return
	}
	parallelRange(p.outer, grain, func(lo, hi int) { moveRows(p, dst, src, dstOff, srcOff, lo, hi) })
}

// words views a flat slice as unsigned words of its element width.
func words(flat any) (u8 []uint8, u16 []uint16, u32 []uint32, u64 []uint64) {
	switch f := flat.(type) {
	case []float32:
		return nil, nil, unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(f))), len(f)), nil
	case []int32:
		return nil, nil, unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(f))), len(f)), nil
	case []uint32:
		return nil, nil, f, nil
	case []float64:
		return nil, nil, nil, unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(f))), len(f))
	case []int64:
		return nil, nil, nil, unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(f))), len(f))
	case []uint64:
		return nil, nil, nil, f
	case []int16:
		return nil, unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(f))), len(f)), nil, nil
	case []uint16:
		return nil, f, nil, nil
	case []bfloat16.BFloat16:
		return nil, unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(f))), len(f)), nil, nil
	case []int8:
		return unsafe.Slice((*uint8)(unsafe.Pointer(unsafe.SliceData(f))), len(f)), nil, nil, nil
	case []uint8:
		return f, nil, nil, nil
	case []bool:
		return unsafe.Slice((*uint8)(unsafe.Pointer(unsafe.SliceData(f))), len(f)), nil, nil, nil
	}
	panic(errors.Errorf("backend %q: unsupported flat type %T", Name, flat))
}

// move copies with plan p between two flat slices of the same type.
func move(p *movePlan, dst, src any, dstOff, srcOff int) {
	d8, d16, d32, d64 := words(dst)
	s8, s16, s32, s64 := words(src)
	switch {
	case d32 != nil:
		moveRun(p, d32, s32, dstOff, srcOff)
	case d64 != nil:
		moveRun(p, d64, s64, dstOff, srcOff)
	case d8 != nil:
		moveRun(p, d8, s8, dstOff, srcOff)
	default:
		moveRun(p, d16, s16, dstOff, srcOff)
	}
}

// stridesOf returns row-major strides for dims.
func stridesOf(dims []int) []int {
	s := make([]int, len(dims))
	acc := 1
	for a := len(dims) - 1; a >= 0; a-- {
		s[a] = acc
		acc *= dims[a]
	}
	return s
}

func transposeAny(d, x any, inDims, perm []int) {
	inStr := stridesOf(inDims)
	outDims := make([]int, len(perm))
	src := make([]int, len(perm))
	for i, p := range perm {
		outDims[i] = inDims[p]
		src[i] = inStr[p]
	}
	move(newMovePlan(outDims, stridesOf(outDims), src), d, x, 0, 0)
}

func broadcastAny(d, x any, inDims, outDims, axes []int) {
	inStr := stridesOf(inDims)
	src := make([]int, len(outDims))
	for i, a := range axes {
		if inDims[i] != 1 {
			src[a] = inStr[i]
		}
	}
	move(newMovePlan(outDims, stridesOf(outDims), src), d, x, 0, 0)
}

func sliceAny(d, x any, inDims, outDims, starts, steps []int) {
	inStr := stridesOf(inDims)
	src := make([]int, len(inDims))
	off := 0
	for a := range inDims {
		src[a] = inStr[a] * steps[a]
		off += starts[a] * inStr[a]
	}
	move(newMovePlan(outDims, stridesOf(outDims), src), d, x, 0, off)
}

func padAny(d, x, fill any, inDims, outDims []int, cfg []compute.PadAxis) {
	// Fill everything, then place the operand.
	move(newMovePlan([]int{flatLen(d)}, []int{1}, []int{0}), d, fill, 0, 0)
	outStr := stridesOf(outDims)
	dst := make([]int, len(inDims))
	off := 0
	for a := range inDims {
		dst[a] = outStr[a] * (cfg[a].Interior + 1)
		off += cfg[a].Start * outStr[a]
	}
	move(newMovePlan(inDims, dst, stridesOf(inDims)), d, x, off, 0)
}

func concatAny(d any, ins []any, outDims []int, axis int, sizes []int) error {
	outStr := stridesOf(outDims)
	off := 0
	for i, x := range ins {
		inDims := append([]int(nil), outDims...)
		inDims[axis] = sizes[i]
		move(newMovePlan(inDims, outStr, stridesOf(inDims)), d, x, off*outStr[axis], 0)
		off += sizes[i]
	}
	return nil
}
