package cpu

// The op table: every op the engine implements, with what building,
// dispatch, Capabilities and the conformance suite need to know of it.
//
// An elementwise op is one entry here: its shape rule, a kernel per input
// dtype, and (for the tests) the values its operands are drawn from. Its
// Builder method, below the table, is one line calling b.elementwise. A
// dtype missing from the kernels is refused when the graph is built, naming
// the op. Each kernel is resolved once, when the node is built, and stored
// in the node: execution calls it directly, with no lookup per op or per
// element.
//
// Ops with parameters (Transpose, Reduce*, Gather, ...) have their own
// Builder methods, which work out the shape, and one executor for all
// dtypes (exec).
//
// Adding a unary elementwise op: one entry in opTable and one Builder line
// below it (this file), plus its kernel in elementwise.go unless it is a
// float64 math function (floatMath) or an existing generic kernel. The
// conformance suite picks the op up from the table and compares it with
// GoMLX's engine on every dtype it lists; see docs/engine.md.

import (
	"maps"
	"math"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapeinference"
	"github.com/gomlx/compute/shapes"
	"github.com/pkg/errors"
)

// execFn computes node n's value into st.values[n.idx].
type execFn func(st *execState, n *node) error

// shapeRule is an elementwise op's output shape for its operands' shapes.
type shapeRule func(op compute.OpType, ins []shapes.Shape) (shapes.Shape, error)

// testDomain is the range the conformance suite draws an operand from: the
// op's domain, or values that exercise its corner cases.
type testDomain int

const (
	anyValues     testDomain = iota // the whole range of moderate values
	positive                        // > 0 (Log, Sqrt, Pow's base)
	aboveMinusOne                   // > -1 (Log1p)
	nonZero                         // divisors
	fewValues                       // a few distinct values, zero among them (ties, signs)
)

// opDef is one op of the engine.
type opDef struct {
	// Elementwise ops: shape is the shape rule, kernels the executor for
	// each supported dtype of input kernelInput, test the domain of each
	// operand. foldsBroadcast: the kernels broadcast size-1 axes, so
	// Compile may fold a BroadcastInDim operand into the op.
	shape          shapeRule
	kernels        map[dtypes.DType]execFn
	kernelInput    int
	foldsBroadcast bool
	test           []testDomain

	// exec executes the other ops, whatever the dtype. An op with neither
	// kernels nor exec never becomes a node of its own (Parameter; Clamp
	// and Dot, which are built from other ops).
	exec execFn
}

// opTable holds every op the engine implements; Capabilities lists exactly
// these.
var opTable = map[compute.OpType]opDef{
	// Unary elementwise.
	compute.OpTypeAbs: {shape: unaryShape, test: in1(anyValues), kernels: kernels(
		unaryK(absK[float32]), unaryK(absK[float64]), unaryK(absK[int8]), unaryK(absK[int16]), unaryK(absK[int32]),
		unaryK(absK[int64]), unaryK(absK[uint8]), unaryK(absK[uint16]), unaryK(absK[uint32]), unaryK(absK[uint64]))},
	compute.OpTypeNeg: {shape: unaryShape, test: in1(anyValues), kernels: kernels(
		unaryK(negK[float32]), unaryK(negK[float64]), unaryK(negK[int8]), unaryK(negK[int16]), unaryK(negK[int32]),
		unaryK(negK[int64]), unaryK(negK[uint8]), unaryK(negK[uint16]), unaryK(negK[uint32]), unaryK(negK[uint64]))},
	compute.OpTypeSign: {shape: unaryShape, test: in1(fewValues), kernels: kernels(
		unaryK(signF32), unaryK(signK[float64]), unaryK(signK[int8]), unaryK(signK[int16]), unaryK(signK[int32]),
		unaryK(signK[int64]), unaryK(signK[uint8]), unaryK(signK[uint16]), unaryK(signK[uint32]), unaryK(signK[uint64]))},
	compute.OpTypeExp:        {shape: unaryShape, test: in1(anyValues), kernels: kernels(unaryK(expF32), unaryK(expF64))},
	compute.OpTypeExpm1:      {shape: unaryShape, test: in1(anyValues), kernels: floatMath(math.Expm1)},
	compute.OpTypeLog:        {shape: unaryShape, test: in1(positive), kernels: floatMath(math.Log)},
	compute.OpTypeLog1p:      {shape: unaryShape, test: in1(aboveMinusOne), kernels: floatMath(math.Log1p)},
	compute.OpTypeSqrt:       {shape: unaryShape, test: in1(positive), kernels: floatMath(math.Sqrt)},
	compute.OpTypeRsqrt:      {shape: unaryShape, test: in1(positive), kernels: floatMath(rsqrt)},
	compute.OpTypeErf:        {shape: unaryShape, test: in1(anyValues), kernels: floatMath(math.Erf)},
	compute.OpTypeTanh:       {shape: unaryShape, test: in1(anyValues), kernels: floatMath(math.Tanh)},
	compute.OpTypeLogistic:   {shape: unaryShape, test: in1(anyValues), kernels: floatMath(logistic)},
	compute.OpTypeSin:        {shape: unaryShape, test: in1(anyValues), kernels: floatMath(math.Sin)},
	compute.OpTypeCos:        {shape: unaryShape, test: in1(anyValues), kernels: floatMath(math.Cos)},
	compute.OpTypeFloor:      {shape: unaryShape, test: in1(anyValues), kernels: floatMath(math.Floor)},
	compute.OpTypeCeil:       {shape: unaryShape, test: in1(anyValues), kernels: floatMath(math.Ceil)},
	compute.OpTypeRound:      {shape: unaryShape, test: in1(anyValues), kernels: floatMath(math.RoundToEven)},
	compute.OpTypeLogicalNot: {shape: unaryShape, test: in1(anyValues), kernels: kernels(unaryK(notK))},
	compute.OpTypeIsFinite:   {shape: boolShape, test: in1(anyValues), kernels: kernels(unaryK(isFiniteK[float32]), unaryK(isFiniteK[float64]))},
	compute.OpTypeIsNaN:      {shape: boolShape, test: in1(anyValues), kernels: kernels(unaryK(isNaNK[float32]), unaryK(isNaNK[float64]))},

	// Binary elementwise: the kernels (elementwise.go) switch on the op
	// once per row.
	compute.OpTypeAdd:            binary(arithKernels, anyValues, anyValues),
	compute.OpTypeSub:            binary(arithKernels, anyValues, anyValues),
	compute.OpTypeMul:            binary(arithKernels, anyValues, anyValues),
	compute.OpTypeDiv:            binary(arithKernels, anyValues, nonZero),
	compute.OpTypeMax:            binary(arithKernels, fewValues, fewValues),
	compute.OpTypeMin:            binary(arithKernels, fewValues, fewValues),
	compute.OpTypePow:            binary(floatArithKernels, positive, anyValues),
	compute.OpTypeRem:            binary(arithKernels, anyValues, nonZero),
	compute.OpTypeEqual:          binary(equalKernels, fewValues, fewValues),
	compute.OpTypeNotEqual:       binary(equalKernels, fewValues, fewValues),
	compute.OpTypeLessThan:       binary(compareKernels, fewValues, fewValues),
	compute.OpTypeLessOrEqual:    binary(compareKernels, fewValues, fewValues),
	compute.OpTypeGreaterThan:    binary(compareKernels, fewValues, fewValues),
	compute.OpTypeGreaterOrEqual: binary(compareKernels, fewValues, fewValues),
	compute.OpTypeLogicalAnd:     binary(logicalKernels, anyValues, anyValues),
	compute.OpTypeLogicalOr:      binary(logicalKernels, anyValues, anyValues),
	compute.OpTypeLogicalXor:     binary(logicalKernels, anyValues, anyValues),

	// Where(cond, onTrue, onFalse): kernels by onTrue's dtype.
	compute.OpTypeWhere: {shape: whereShape, kernelInput: 1, foldsBroadcast: true, test: []testDomain{anyValues, anyValues, anyValues},
		kernels: kernels(
			whereK[float32](), whereK[float64](), whereK[int8](), whereK[int16](), whereK[int32](), whereK[int64](),
			whereK[uint8](), whereK[uint16](), whereK[uint32](), whereK[uint64](), whereK[bool]())},

	// Ops with their own Builder methods.
	compute.OpTypeParameter:           {},
	compute.OpTypeConstant:            {exec: execConstant},
	compute.OpTypeIdentity:            {exec: execAlias},
	compute.OpTypeReshape:             {exec: execAlias},
	compute.OpTypeOptimizationBarrier: {exec: execAlias},
	compute.OpTypeSchedulingBarrier:   {exec: execAlias},
	compute.OpTypeConvertDType:        {exec: execConvert},
	compute.OpTypeClamp:               {}, // Max then Min
	compute.OpTypeTranspose:           {exec: execTranspose},
	compute.OpTypeBroadcastInDim:      {exec: execBroadcastInDim},
	compute.OpTypeReduceSum:           {exec: execReduce},
	compute.OpTypeReduceMax:           {exec: execReduce},
	compute.OpTypeReduceMin:           {exec: execReduce},
	compute.OpTypeReduceProduct:       {exec: execReduce},
	compute.OpTypeIota:                {exec: execIota},
	compute.OpTypeConcatenate:         {exec: execConcatenate},
	compute.OpTypeSlice:               {exec: execSlice},
	compute.OpTypePad:                 {exec: execPad},
	compute.OpTypeArgMinMax:           {exec: execArgMinMax},
	compute.OpTypeGather:              {exec: execGather},
	compute.OpTypeScatterSum:          {exec: execScatter},
	compute.OpTypeScatterMax:          {exec: execScatter},
	compute.OpTypeScatterMin:          {exec: execScatter},
	compute.OpTypeDotGeneral:          {exec: execDotGeneral},
}

// Builder methods of the elementwise ops: everything about them is in the
// table.

func (b *Function) Abs(x compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeAbs, x)
}
func (b *Function) Neg(x compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeNeg, x)
}
func (b *Function) Sign(x compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeSign, x)
}
func (b *Function) Exp(x compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeExp, x)
}
func (b *Function) Expm1(x compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeExpm1, x)
}
func (b *Function) Log(x compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeLog, x)
}
func (b *Function) Log1p(x compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeLog1p, x)
}
func (b *Function) Sqrt(x compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeSqrt, x)
}
func (b *Function) Rsqrt(x compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeRsqrt, x)
}
func (b *Function) Erf(x compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeErf, x)
}
func (b *Function) Tanh(x compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeTanh, x)
}
func (b *Function) Logistic(x compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeLogistic, x)
}
func (b *Function) Sin(x compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeSin, x)
}
func (b *Function) Cos(x compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeCos, x)
}
func (b *Function) Floor(x compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeFloor, x)
}
func (b *Function) Ceil(x compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeCeil, x)
}
func (b *Function) Round(x compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeRound, x)
}
func (b *Function) LogicalNot(x compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeLogicalNot, x)
}
func (b *Function) IsFinite(x compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeIsFinite, x)
}
func (b *Function) IsNaN(x compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeIsNaN, x)
}

func (b *Function) Add(l, r compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeAdd, l, r)
}
func (b *Function) Sub(l, r compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeSub, l, r)
}
func (b *Function) Mul(l, r compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeMul, l, r)
}
func (b *Function) Div(l, r compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeDiv, l, r)
}
func (b *Function) Max(l, r compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeMax, l, r)
}
func (b *Function) Min(l, r compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeMin, l, r)
}
func (b *Function) Pow(l, r compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypePow, l, r)
}
func (b *Function) Rem(l, r compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeRem, l, r)
}
func (b *Function) LogicalAnd(l, r compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeLogicalAnd, l, r)
}
func (b *Function) LogicalOr(l, r compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeLogicalOr, l, r)
}
func (b *Function) LogicalXor(l, r compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeLogicalXor, l, r)
}
func (b *Function) Equal(l, r compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeEqual, l, r)
}
func (b *Function) NotEqual(l, r compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeNotEqual, l, r)
}
func (b *Function) LessThan(l, r compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeLessThan, l, r)
}
func (b *Function) LessOrEqual(l, r compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeLessOrEqual, l, r)
}
func (b *Function) GreaterThan(l, r compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeGreaterThan, l, r)
}
func (b *Function) GreaterOrEqual(l, r compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeGreaterOrEqual, l, r)
}

// Where implements compute.Function.
func (b *Function) Where(cond, onTrue, onFalse compute.Value) (compute.Value, error) {
	return b.elementwise(compute.OpTypeWhere, cond, onTrue, onFalse)
}

// elementwise builds an elementwise op from its table entry: the shape
// rule, then the kernel for the operand's dtype, stored in the node.
func (b *Function) elementwise(op compute.OpType, xs ...compute.Value) (compute.Value, error) {
	in, err := b.ops(op, xs...)
	if err != nil {
		return nil, err
	}
	def := opTable[op]
	ins := make([]shapes.Shape, len(in))
	for i, n := range in {
		ins[i] = n.shape
	}
	shape, err := def.shape(op, ins)
	if err != nil {
		return nil, err
	}
	dt := ins[def.kernelInput].DType
	k := def.kernels[dt]
	if k == nil {
		return nil, errors.Errorf("backend %q: op %s is not implemented for dtype %s", Name, op, dt)
	}
	n := b.newNode(op, shape, nil, in...)
	n.exec = k
	return n, nil
}

// Shape rules.

func unaryShape(op compute.OpType, ins []shapes.Shape) (shapes.Shape, error) {
	return shapeinference.UnaryOp(op, ins[0])
}

// boolShape: the operand's dimensions, dtype bool (IsFinite, IsNaN).
func boolShape(op compute.OpType, ins []shapes.Shape) (shapes.Shape, error) {
	s := ins[0].Clone()
	s.DType = dtypes.Bool
	return s, nil
}

func binaryShape(op compute.OpType, ins []shapes.Shape) (shapes.Shape, error) {
	if shapeinference.ComparisonOperations.Has(op) {
		return shapeinference.ComparisonOp(op, ins[0], ins[1])
	}
	return shapeinference.BinaryOp(op, ins[0], ins[1])
}

func whereShape(op compute.OpType, ins []shapes.Shape) (shapes.Shape, error) {
	return shapeinference.Where(ins[0], ins[1], ins[2])
}

// Table helpers.

func in1(d testDomain) []testDomain { return []testDomain{d} }

func binary(k map[dtypes.DType]execFn, lhs, rhs testDomain) opDef {
	return opDef{shape: binaryShape, kernels: k, foldsBroadcast: true, test: []testDomain{lhs, rhs}}
}

// dtKernel is the executor of an op for one dtype.
type dtKernel struct {
	dt   dtypes.DType
	exec execFn
}

func kernels(ks ...dtKernel) map[dtypes.DType]execFn {
	m := make(map[dtypes.DType]execFn, len(ks))
	for _, k := range ks {
		m[k.dt] = k.exec
	}
	return m
}

func dtypeOf[T any]() dtypes.DType {
	var z T
	return dtypes.FromAny(z)
}

// unaryK runs k, a unary kernel d[i] = f(x[i]), over the node's elements:
// split across cores, and in place over a dead input of the output's shape
// and dtype.
func unaryK[T, U any](k func(d []U, x []T)) dtKernel {
	return dtKernel{dtypeOf[T](), func(st *execState, n *node) error {
		s := st.allocInPlace(n, 0)
		d, x := s.flat.([]U), st.in(n, 0).([]T)
		if !parallelWorth(len(d), elemGrain) {
			k(d, x)
			return nil
		}
		parallelRange(len(d), elemGrain, func(lo, hi int) { k(d[lo:hi], x[lo:hi]) })
		return nil
	}}
}

// floatMath is the float32 and float64 kernels of a float64 function.
func floatMath(f func(float64) float64) map[dtypes.DType]execFn {
	return kernels(unaryK(mathK[float32](f)), unaryK(mathK[float64](f)))
}

// mathK applies f to each element, through float64.
func mathK[T float](f func(float64) float64) func(d, x []T) {
	return func(d, x []T) {
		x = x[:len(d)]
		for i := range d {
			d[i] = T(f(float64(x[i])))
		}
	}
}

var (
	arithKernels = kernels(binaryK[float32](), binaryK[float64](), binaryK[int8](), binaryK[int16](), binaryK[int32](),
		binaryK[int64](), binaryK[uint8](), binaryK[uint16](), binaryK[uint32](), binaryK[uint64]())
	floatArithKernels = kernels(binaryK[float32](), binaryK[float64]())
	compareKernels    = kernels(compareK[float32](), compareK[float64](), compareK[int8](), compareK[int16](), compareK[int32](),
		compareK[int64](), compareK[uint8](), compareK[uint16](), compareK[uint32](), compareK[uint64]())
	equalKernels   = withBool(compareKernels)
	logicalKernels = kernels(logicalK())
)

// withBool is the comparison kernels plus the boolean one (Equal, NotEqual).
func withBool(m map[dtypes.DType]execFn) map[dtypes.DType]execFn {
	m = maps.Clone(m)
	m[dtypes.Bool] = logicalK().exec
	return m
}

// binaryK is Add, Sub, Mul, Div, Max, Min, Pow and Rem on T, in place
// over a dead operand.
func binaryK[T number]() dtKernel {
	return dtKernel{dtypeOf[T](), func(st *execState, n *node) error {
		s := st.allocInPlace(n, 0, 1)
		runBinary(n.op, n.bcast(), s.flat.([]T), st.in(n, 0).([]T), st.in(n, 1).([]T))
		return nil
	}}
}

// compareK is the comparisons of T operands.
func compareK[T number]() dtKernel {
	return dtKernel{dtypeOf[T](), func(st *execState, n *node) error {
		s := st.alloc(n)
		runCompare(n.op, n.bcast(), s.flat.([]bool), st.in(n, 0).([]T), st.in(n, 1).([]T))
		return nil
	}}
}

// logicalK is the boolean binary ops (and boolean Equal, NotEqual).
func logicalK() dtKernel {
	return dtKernel{dtypes.Bool, func(st *execState, n *node) error {
		s := st.alloc(n)
		runLogical(n.op, n.bcast(), s.flat.([]bool), st.in(n, 0).([]bool), st.in(n, 1).([]bool))
		return nil
	}}
}

// whereK is Where with T values, in place over a dead onTrue or onFalse.
func whereK[T any]() dtKernel {
	return dtKernel{dtypeOf[T](), func(st *execState, n *node) error {
		s := st.allocInPlace(n, 1, 2)
		alias := 0 // the value operand whose memory s took over
		if st.values[n.inputs[2].idx] == s {
			alias = 2
		} else if st.values[n.inputs[1].idx] == s {
			alias = 1
		}
		runWhere(n.bcast(), s.flat.([]T), st.in(n, 0).([]bool), st.in(n, 1).([]T), st.in(n, 2).([]T), alias)
		return nil
	}}
}
