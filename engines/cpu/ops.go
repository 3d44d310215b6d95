package cpu

import (
	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/pkg/errors"
)

// run computes node n's value into st.values[n.idx].
func (st *execState) run(n *node) error {
	switch n.op {
	case backends.OpTypeConstant:
		st.values[n.idx] = &store{flat: n.params, refs: 1}
		return nil
	case backends.OpTypeIdentity, backends.OpTypeReshape:
		st.alias(n, 0)
		return nil
	}
	if shapeinferenceUnary(n.op) {
		s := st.allocInPlace(n, 0)
		return dtypeCheck(unaryAny(n.op, s.flat, st.in(n, 0)), n)
	}
	switch n.op {
	case backends.OpTypeLogicalNot:
		s := st.allocInPlace(n, 0)
		d, x := s.flat.([]bool), st.in(n, 0).([]bool)
		for i := range d {
			d[i] = !x[i]
		}
		return nil
	case backends.OpTypeAdd, backends.OpTypeSub, backends.OpTypeMul, backends.OpTypeDiv, backends.OpTypeMax,
		backends.OpTypeMin, backends.OpTypePow, backends.OpTypeRem:
		s := st.allocInPlace(n, 0, 1)
		l, r := n.inShape(0), n.inShape(1)
		a, b := st.in(n, 0), st.in(n, 1)
		switch d := s.flat.(type) {
		case []float32:
			runBinary(n.op, n.shape, l, r, d, a.([]float32), b.([]float32))
		case []float64:
			runBinary(n.op, n.shape, l, r, d, a.([]float64), b.([]float64))
		case []int32:
			runBinary(n.op, n.shape, l, r, d, a.([]int32), b.([]int32))
		case []int64:
			runBinary(n.op, n.shape, l, r, d, a.([]int64), b.([]int64))
		case []int8:
			runBinary(n.op, n.shape, l, r, d, a.([]int8), b.([]int8))
		case []int16:
			runBinary(n.op, n.shape, l, r, d, a.([]int16), b.([]int16))
		case []uint8:
			runBinary(n.op, n.shape, l, r, d, a.([]uint8), b.([]uint8))
		case []uint16:
			runBinary(n.op, n.shape, l, r, d, a.([]uint16), b.([]uint16))
		case []uint32:
			runBinary(n.op, n.shape, l, r, d, a.([]uint32), b.([]uint32))
		case []uint64:
			runBinary(n.op, n.shape, l, r, d, a.([]uint64), b.([]uint64))
		default:
			return errors.Errorf("%s: dtype %s not supported", n.op, n.shape.DType)
		}
		return nil
	case backends.OpTypeLogicalAnd, backends.OpTypeLogicalOr, backends.OpTypeLogicalXor,
		backends.OpTypeEqual, backends.OpTypeNotEqual, backends.OpTypeLessThan, backends.OpTypeLessOrEqual,
		backends.OpTypeGreaterThan, backends.OpTypeGreaterOrEqual:
		s := st.alloc(n)
		d := s.flat.([]bool)
		l, r := n.inShape(0), n.inShape(1)
		a, b := st.in(n, 0), st.in(n, 1)
		switch a := a.(type) {
		case []bool:
			runLogical(n.op, n.shape, l, r, d, a, b.([]bool))
		case []float32:
			runCompare(n.op, n.shape, l, r, d, a, b.([]float32))
		case []float64:
			runCompare(n.op, n.shape, l, r, d, a, b.([]float64))
		case []int32:
			runCompare(n.op, n.shape, l, r, d, a, b.([]int32))
		case []int64:
			runCompare(n.op, n.shape, l, r, d, a, b.([]int64))
		case []int8:
			runCompare(n.op, n.shape, l, r, d, a, b.([]int8))
		case []int16:
			runCompare(n.op, n.shape, l, r, d, a, b.([]int16))
		case []uint8:
			runCompare(n.op, n.shape, l, r, d, a, b.([]uint8))
		case []uint16:
			runCompare(n.op, n.shape, l, r, d, a, b.([]uint16))
		case []uint32:
			runCompare(n.op, n.shape, l, r, d, a, b.([]uint32))
		case []uint64:
			runCompare(n.op, n.shape, l, r, d, a, b.([]uint64))
		default:
			return errors.Errorf("%s: dtype %s not supported", n.op, n.inputs[0].shape.DType)
		}
		return nil
	case backends.OpTypeWhere:
		s := st.allocInPlace(n, 1, 2)
		c := st.in(n, 0).([]bool)
		cs, ts, fs := n.inShape(0), n.inShape(1), n.inShape(2)
		return dtypeCheck(whereAny(n, cs, ts, fs, s.flat, c, st.in(n, 1), st.in(n, 2)), n)
	case backends.OpTypeConvertDType:
		s := st.alloc(n)
		return convert(s.flat, st.in(n, 0))
	case backends.OpTypeTranspose:
		s := st.alloc(n)
		transposeAny(s.flat, st.in(n, 0), n.inputs[0].shape.Dimensions, n.params.(*transposeParams).perm)
		return nil
	case backends.OpTypeBroadcastInDim:
		s := st.alloc(n)
		broadcastAny(s.flat, st.in(n, 0), n.inputs[0].shape.Dimensions, n.shape.Dimensions, n.params.(*broadcastInDimParams).axes)
		return nil
	case backends.OpTypeReduceSum, backends.OpTypeReduceMax, backends.OpTypeReduceMin, backends.OpTypeReduceProduct:
		s := st.alloc(n)
		return reduceAny(n.op, s.flat, st.in(n, 0), n.inputs[0].shape.Dimensions, n.params.(*reduceParams).axes)
	case backends.OpTypeIota:
		s := st.alloc(n)
		return iotaAny(s.flat, n.shape.Dimensions, n.params.(*iotaParams).axis)
	case backends.OpTypeConcatenate:
		s := st.alloc(n)
		ins := make([]any, len(n.inputs))
		sizes := make([]int, len(n.inputs))
		ax := n.params.(*concatParams).axis
		for i, in := range n.inputs {
			ins[i] = st.in(n, i)
			sizes[i] = in.shape.Dimensions[ax]
		}
		return concatAny(s.flat, ins, n.shape.Dimensions, ax, sizes)
	case backends.OpTypeSlice:
		s := st.alloc(n)
		p := n.params.(*sliceParams)
		sliceAny(s.flat, st.in(n, 0), n.inputs[0].shape.Dimensions, n.shape.Dimensions, p.starts, p.strides)
		return nil
	case backends.OpTypePad:
		s := st.alloc(n)
		p := n.params.(*padParams)
		padAny(s.flat, st.in(n, 0), st.in(n, 1), n.inputs[0].shape.Dimensions, n.shape.Dimensions, p.axes)
		return nil
	case backends.OpTypeArgMinMax:
		s := st.alloc(n)
		p := n.params.(*argMinMaxParams)
		return argMinMaxAny(s.flat, st.in(n, 0), n.inputs[0].shape.Dimensions, p.axis, p.isMin)
	case backends.OpTypeGather:
		s := st.alloc(n)
		return gatherAny(s.flat, st.in(n, 0), st.in(n, 1), n.inputs[0].shape, n.inputs[1].shape, n.shape, n.params.(*gatherParams))
	case backends.OpTypeScatterSum, backends.OpTypeScatterMax, backends.OpTypeScatterMin:
		s := st.alloc(n)
		copyFlat(s.flat, st.in(n, 0))
		return scatterAny(n.op, s.flat, st.in(n, 1), st.in(n, 2), n.inputs[0].shape, n.inputs[1].shape, n.inputs[2].shape, n.params.(*scatterParams))
	case backends.OpTypeDotGeneral:
		s := st.alloc(n)
		return dotGeneral(st, n, s.flat, st.in(n, 0), st.in(n, 1))
	}
	return errors.Errorf("backend %q: op %s has no executor", Name, n.op)
}

func shapeinferenceUnary(op backends.OpType) bool {
	switch op {
	case backends.OpTypeAbs, backends.OpTypeNeg, backends.OpTypeSign, backends.OpTypeExp, backends.OpTypeExpm1,
		backends.OpTypeLog, backends.OpTypeLog1p, backends.OpTypeSqrt, backends.OpTypeRsqrt, backends.OpTypeErf,
		backends.OpTypeTanh, backends.OpTypeLogistic, backends.OpTypeSin, backends.OpTypeCos, backends.OpTypeFloor,
		backends.OpTypeCeil, backends.OpTypeRound:
		return true
	}
	return false
}

func unaryAny(op backends.OpType, d, x any) bool {
	switch d := d.(type) {
	case []float32:
		runUnary(op, d, x.([]float32))
	case []float64:
		runUnary(op, d, x.([]float64))
	case []int32:
		runUnary(op, d, x.([]int32))
	case []int64:
		runUnary(op, d, x.([]int64))
	case []int8:
		runUnary(op, d, x.([]int8))
	case []int16:
		runUnary(op, d, x.([]int16))
	case []uint8:
		runUnary(op, d, x.([]uint8))
	case []uint16:
		runUnary(op, d, x.([]uint16))
	case []uint32:
		runUnary(op, d, x.([]uint32))
	case []uint64:
		runUnary(op, d, x.([]uint64))
	default:
		return false
	}
	return true
}

// dtypeCheck turns a kernel's "handled this dtype" result into an error
// naming the op.
func dtypeCheck(ok bool, n *node) error {
	if !ok {
		return errors.Errorf("%s: dtype %s not supported", n.op, n.shape.DType)
	}
	return nil
}

func whereAny(n *node, cs, ts, fs shapes.Shape, d any, c []bool, t, f any) bool {
	switch d := d.(type) {
	case []float32:
		runWhere(n.shape, cs, ts, fs, d, c, t.([]float32), f.([]float32))
	case []float64:
		runWhere(n.shape, cs, ts, fs, d, c, t.([]float64), f.([]float64))
	case []int32:
		runWhere(n.shape, cs, ts, fs, d, c, t.([]int32), f.([]int32))
	case []int64:
		runWhere(n.shape, cs, ts, fs, d, c, t.([]int64), f.([]int64))
	case []int8:
		runWhere(n.shape, cs, ts, fs, d, c, t.([]int8), f.([]int8))
	case []int16:
		runWhere(n.shape, cs, ts, fs, d, c, t.([]int16), f.([]int16))
	case []uint8:
		runWhere(n.shape, cs, ts, fs, d, c, t.([]uint8), f.([]uint8))
	case []uint16:
		runWhere(n.shape, cs, ts, fs, d, c, t.([]uint16), f.([]uint16))
	case []uint32:
		runWhere(n.shape, cs, ts, fs, d, c, t.([]uint32), f.([]uint32))
	case []uint64:
		runWhere(n.shape, cs, ts, fs, d, c, t.([]uint64), f.([]uint64))
	case []bool:
		runWhere(n.shape, cs, ts, fs, d, c, t.([]bool), f.([]bool))
	default:
		return false
	}
	return true
}
