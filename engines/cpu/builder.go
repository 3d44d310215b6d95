package cpu

import (
	"slices"
	"sync/atomic"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/notimplemented"
	"github.com/gomlx/compute/shapeinference"
	"github.com/gomlx/compute/shapes"
	"github.com/pkg/errors"
)

// node is one operation of a graph under construction. Nodes are created
// in topological order (an op can only take existing nodes as inputs), so
// a node's index is a valid execution order.
type node struct {
	idx     int
	op      compute.OpType
	shape   shapes.Shape
	inputs  []*node
	params  any // op-specific, see the *Params types
	builder *Builder
	// views, if set, gives the shape each input is read as: a
	// BroadcastInDim folded into this elementwise node leaves its operand
	// here as an input of the output's rank with size-1 axes.
	views []shapes.Shape
	// exec computes the node's value: the op's executor from opTable, or
	// for an elementwise op its kernel for the operands' dtype.
	exec execFn
	// plan caches the broadcast walk of an elementwise node (see bcast).
	plan atomic.Pointer[bcastPlan]
	// group, if set, is the sibling products this DotGeneral runs with
	// (dotgroup.go), set by Compile.
	group *dotGroup
}

// bcast is the broadcast plan of elementwise node n over its inputs as
// read (inShape), made at its first execution and kept: shapes are fixed
// once compiled, and a decode step runs each node once.
func (n *node) bcast() *bcastPlan {
	if p := n.plan.Load(); p != nil {
		return p
	}
	ins := make([]shapes.Shape, len(n.inputs))
	for i := range ins {
		ins[i] = n.inShape(i)
	}
	p := makePlan(n.shape, ins...)
	n.plan.Store(p)
	return p
}

// inShape is the shape node n reads input i as.
func (n *node) inShape(i int) shapes.Shape {
	if n.views != nil {
		return n.views[i]
	}
	return n.inputs[i].shape
}

// Builder implements compute.Builder: it owns the nodes; ops are built on
// its main Function (compute.Function), the only function supported.
type Builder struct {
	backend  *Backend
	name     string
	nodes    []*node
	params   []*node
	main     *Function
	compiled bool
}

// Function implements compute.Function (main only). Ops it does not
// implement come from the embedded notimplemented.Function and fail with an
// error wrapping compute.ErrNotImplemented, naming the op.
type Function struct {
	notimplemented.Function
	builder  *Builder
	outputs  []*node
	returned bool
}

var (
	_ compute.Builder  = (*Builder)(nil)
	_ compute.Function = (*Function)(nil)
)

func newBuilder(b *Backend, name string) *Builder {
	bld := &Builder{backend: b, name: name}
	bld.main = &Function{builder: bld}
	bld.main.ErrFn = func(op compute.OpType) error {
		return errors.Wrapf(compute.ErrNotImplemented, "backend %q does not implement op %s (graph %q); use backend.engine: go for graphs that need it", Name, op, name)
	}
	return bld
}

// Main implements compute.Builder.
func (b *Builder) Main() compute.Function { return b.main }

// NewFunction implements compute.Builder: sub-functions are not supported.
func (b *Builder) NewFunction(name string) (compute.Function, error) {
	return nil, errors.Wrapf(compute.ErrNotImplemented, "backend %q: functions are not supported", Name)
}

// Name implements compute.Function.
func (f *Function) Name() string { return compute.MainName }

// Builder implements compute.Function.
func (f *Function) Builder() compute.Builder { return f.builder }

// Parent implements compute.Function.
func (f *Function) Parent() compute.Function { return nil }

// Shape implements compute.Function.
func (f *Function) Shape(v compute.Value) (shapes.Shape, error) { return f.builder.OpShape(v) }

// Return implements compute.Function.
func (f *Function) Return(outputs []compute.Value, shardings []*compute.ShardingSpec) error {
	for _, s := range shardings {
		if s != nil {
			return errors.Errorf("backend %q: output sharding is not supported", Name)
		}
	}
	if f.returned {
		return errors.Errorf("backend %q: Return called twice", Name)
	}
	outs, err := f.builder.ops(compute.OpTypeInvalid, outputs...)
	if err != nil {
		return errors.WithMessage(err, "Return")
	}
	f.outputs, f.returned = outs, true
	return nil
}

func (f *Function) newNode(op compute.OpType, shape shapes.Shape, params any, inputs ...*node) *node {
	return f.builder.newNode(op, shape, params, inputs...)
}
func (f *Function) ops(opType compute.OpType, ops ...compute.Value) ([]*node, error) {
	return f.builder.ops(opType, ops...)
}
func (f *Function) checkDType(opType compute.OpType, dt dtypes.DType) error {
	return f.builder.checkDType(opType, dt)
}

// Name implements compute.Builder.
func (b *Builder) Name() string { return b.name }

func (b *Builder) newNode(op compute.OpType, shape shapes.Shape, params any, inputs ...*node) *node {
	n := &node{idx: len(b.nodes), op: op, shape: shape, inputs: inputs, params: params, builder: b, exec: opTable[op].exec}
	b.nodes = append(b.nodes, n)
	return n
}

// ops converts compute.Value values to our nodes, checking they belong here.
func (b *Builder) ops(opType compute.OpType, ops ...compute.Value) ([]*node, error) {
	if b.compiled {
		return nil, errors.Errorf("%s: builder %q was already compiled", opType, b.name)
	}
	out := make([]*node, len(ops))
	for i, op := range ops {
		n, ok := op.(*node)
		if !ok || n == nil {
			return nil, errors.Errorf("%s: operand #%d of type %T is not a node of backend %q", opType, i, op, Name)
		}
		if n.builder != b {
			return nil, errors.Errorf("%s: operand #%d belongs to another builder (%q)", opType, i, n.builder.name)
		}
		out[i] = n
	}
	return out, nil
}

func (b *Builder) checkDType(opType compute.OpType, dt dtypes.DType) error {
	if !slices.Contains(supportedDTypes, dt) {
		return errors.Errorf("backend %q: op %s: dtype %s is not supported (supported: %v)", Name, opType, dt, supportedDTypes)
	}
	return nil
}

// OpShape implements compute.Builder.
func (b *Builder) OpShape(op compute.Value) (shapes.Shape, error) {
	ns, err := b.ops(compute.OpTypeInvalid, op)
	if err != nil {
		return shapes.Invalid(), err
	}
	return ns[0].shape, nil
}

// DistributedSPMD implements compute.Builder: only one device.
func (b *Builder) DistributedSPMD(numDevices int) error {
	if numDevices == 1 {
		return nil
	}
	return errors.Errorf("backend %q has a single device, cannot distribute over %d", Name, numDevices)
}

// DistributedAutoSharding implements compute.Builder.
func (b *Builder) DistributedAutoSharding(meshes ...compute.Mesh) error {
	return errors.Errorf("backend %q does not support sharding", Name)
}

// DeviceAssignment implements compute.Builder.
func (b *Builder) DeviceAssignment(devices ...compute.DeviceNum) error {
	for _, d := range devices {
		if d != 0 {
			return errors.Errorf("backend %q has only device 0, got %d", Name, d)
		}
	}
	return nil
}

type parameterParams struct {
	name string
}

// Parameter implements compute.Function.
func (b *Function) Parameter(name string, shape shapes.Shape, sharding *compute.ShardingSpec) (compute.Value, error) {
	if sharding != nil {
		return nil, errors.Errorf("backend %q: Parameter %q: sharding is not supported", Name, name)
	}
	if err := b.checkDType(compute.OpTypeParameter, shape.DType); err != nil {
		return nil, err
	}
	n := b.newNode(compute.OpTypeParameter, shape.Clone(), &parameterParams{name: name})
	b.builder.params = append(b.builder.params, n)
	return n, nil
}

// Constant implements compute.Function.
func (b *Function) Constant(flat any, dims ...int) (compute.Value, error) {
	dt, n, err := flatInfo(flat)
	if err != nil {
		return nil, errors.WithMessage(err, "Constant")
	}
	shape := shapes.Make(dt, dims...)
	if shape.Size() != n {
		return nil, errors.Errorf("Constant: %d values do not fill shape %s", n, shape)
	}
	data, _ := makeFlat(dt, n)
	copyFlat(data, flat)
	return b.newNode(compute.OpTypeConstant, shape, data), nil
}

// Identity implements compute.Function.
func (b *Function) Identity(x compute.Value) (compute.Value, error) {
	in, err := b.ops(compute.OpTypeIdentity, x)
	if err != nil {
		return nil, err
	}
	return b.newNode(compute.OpTypeIdentity, in[0].shape, nil, in[0]), nil
}

// OptimizationBarrier implements compute.Function: identities (the
// executor runs nodes in creation order, so there is nothing to reorder).
func (b *Function) OptimizationBarrier(operands ...compute.Value) ([]compute.Value, error) {
	in, err := b.ops(compute.OpTypeOptimizationBarrier, operands...)
	if err != nil {
		return nil, err
	}
	outs := make([]compute.Value, len(in))
	for i, n := range in {
		outs[i] = b.newNode(compute.OpTypeOptimizationBarrier, n.shape, nil, n)
	}
	return outs, nil
}

// SchedulingBarrier implements compute.Function: operand's value, as a node
// that also reads the dependencies, so it runs after them.
func (b *Function) SchedulingBarrier(operand compute.Value, dependencies ...compute.Value) (compute.Value, error) {
	in, err := b.ops(compute.OpTypeSchedulingBarrier, append([]compute.Value{operand}, dependencies...)...)
	if err != nil {
		return nil, err
	}
	return b.newNode(compute.OpTypeSchedulingBarrier, in[0].shape, nil, in...), nil
}

type convertParams struct{ dtype dtypes.DType }

// ConvertDType implements compute.Function.
func (b *Function) ConvertDType(x compute.Value, dtype dtypes.DType) (compute.Value, error) {
	in, err := b.ops(compute.OpTypeConvertDType, x)
	if err != nil {
		return nil, err
	}
	if err := b.checkDType(compute.OpTypeConvertDType, dtype); err != nil {
		return nil, err
	}
	shape := in[0].shape.Clone()
	shape.DType = dtype
	return b.newNode(compute.OpTypeConvertDType, shape, &convertParams{dtype}, in[0]), nil
}

// Clamp implements compute.Function as Min(Max(x, lo), hi).
func (b *Function) Clamp(lo, x, hi compute.Value) (compute.Value, error) {
	m, err := b.Max(x, lo)
	if err != nil {
		return nil, errors.WithMessage(err, "Clamp")
	}
	return b.Min(m, hi)
}

// Reshape implements compute.Function.
func (b *Function) Reshape(x compute.Value, dims ...int) (compute.Value, error) {
	in, err := b.ops(compute.OpTypeReshape, x)
	if err != nil {
		return nil, err
	}
	shape, err := shapeinference.Reshape(in[0].shape, dims)
	if err != nil {
		return nil, err
	}
	return b.newNode(compute.OpTypeReshape, shape, nil, in[0]), nil
}

type transposeParams struct{ perm []int }

// Transpose implements compute.Function.
func (b *Function) Transpose(x compute.Value, perm ...int) (compute.Value, error) {
	in, err := b.ops(compute.OpTypeTranspose, x)
	if err != nil {
		return nil, err
	}
	shape, err := shapeinference.Transpose(in[0].shape, perm)
	if err != nil {
		return nil, err
	}
	return b.newNode(compute.OpTypeTranspose, shape, &transposeParams{slices.Clone(perm)}, in[0]), nil
}

type broadcastInDimParams struct{ axes []int }

// BroadcastInDim implements compute.Function.
func (b *Function) BroadcastInDim(x compute.Value, outputShape shapes.Shape, broadcastAxes []int) (compute.Value, error) {
	in, err := b.ops(compute.OpTypeBroadcastInDim, x)
	if err != nil {
		return nil, err
	}
	if err := shapeinference.BroadcastInDim(in[0].shape, outputShape, broadcastAxes, nil); err != nil {
		return nil, err
	}
	return b.newNode(compute.OpTypeBroadcastInDim, outputShape.Clone(), &broadcastInDimParams{slices.Clone(broadcastAxes)}, in[0]), nil
}

type reduceParams struct{ axes []int }

func (b *Function) reduce(op compute.OpType, x compute.Value, axes []int) (compute.Value, error) {
	in, err := b.ops(op, x)
	if err != nil {
		return nil, err
	}
	axes = slices.Clone(axes)
	if len(axes) == 0 {
		for i := range in[0].shape.Rank() {
			axes = append(axes, i)
		}
	}
	shape, err := shapeinference.Reduce(in[0].shape, axes)
	if err != nil {
		return nil, err
	}
	if !isNumber(in[0].shape.DType) {
		return nil, errors.Errorf("backend %q: op %s is not implemented for dtype %s", Name, op, in[0].shape.DType)
	}
	return b.newNode(op, shape, &reduceParams{axes}, in[0]), nil
}

func (b *Function) ReduceSum(x compute.Value, axes ...int) (compute.Value, error) {
	return b.reduce(compute.OpTypeReduceSum, x, axes)
}
func (b *Function) ReduceMax(x compute.Value, axes ...int) (compute.Value, error) {
	return b.reduce(compute.OpTypeReduceMax, x, axes)
}
func (b *Function) ReduceMin(x compute.Value, axes ...int) (compute.Value, error) {
	return b.reduce(compute.OpTypeReduceMin, x, axes)
}
func (b *Function) ReduceProduct(x compute.Value, axes ...int) (compute.Value, error) {
	return b.reduce(compute.OpTypeReduceProduct, x, axes)
}

type iotaParams struct{ axis int }

// Iota implements compute.Function.
func (b *Function) Iota(shape shapes.Shape, axis int) (compute.Value, error) {
	if shape.Rank() == 0 {
		return nil, errors.Errorf("Iota: shape %s must have rank >= 1", shape)
	}
	if axis < 0 {
		axis += shape.Rank()
	}
	if axis < 0 || axis >= shape.Rank() {
		return nil, errors.Errorf("Iota: axis %d out of range for shape %s", axis, shape)
	}
	if !isNumber(shape.DType) || b.checkDType(compute.OpTypeIota, shape.DType) != nil {
		return nil, errors.Errorf("backend %q: op Iota is not implemented for dtype %s", Name, shape.DType)
	}
	return b.newNode(compute.OpTypeIota, shape.Clone(), &iotaParams{axis}), nil
}

type concatParams struct{ axis int }

// Concatenate implements compute.Function.
func (b *Function) Concatenate(axis int, operands ...compute.Value) (compute.Value, error) {
	in, err := b.ops(compute.OpTypeConcatenate, operands...)
	if err != nil {
		return nil, err
	}
	if len(in) == 0 {
		return nil, errors.New("Concatenate: no operands")
	}
	ss := make([]shapes.Shape, len(in))
	for i, n := range in {
		ss[i] = n.shape
	}
	shape, err := shapeinference.Concatenate(ss, axis)
	if err != nil {
		return nil, err
	}
	if axis < 0 {
		axis += shape.Rank()
	}
	return b.newNode(compute.OpTypeConcatenate, shape, &concatParams{axis}, in...), nil
}

type sliceParams struct{ starts, limits, strides []int }

// Slice implements compute.Function.
func (b *Function) Slice(x compute.Value, starts, limits, strides []int) (compute.Value, error) {
	in, err := b.ops(compute.OpTypeSlice, x)
	if err != nil {
		return nil, err
	}
	shape, err := shapeinference.Slice(in[0].shape, starts, limits, strides)
	if err != nil {
		return nil, err
	}
	p := &sliceParams{slices.Clone(starts), slices.Clone(limits), slices.Clone(strides)}
	if len(p.strides) == 0 {
		p.strides = make([]int, shape.Rank())
		for i := range p.strides {
			p.strides[i] = 1
		}
	}
	return b.newNode(compute.OpTypeSlice, shape, p, in[0]), nil
}

type padParams struct{ axes []compute.PadAxis }

// Pad implements compute.Function (negative padding is not supported).
func (b *Function) Pad(x, fill compute.Value, axesConfig ...compute.PadAxis) (compute.Value, error) {
	in, err := b.ops(compute.OpTypePad, x, fill)
	if err != nil {
		return nil, err
	}
	if !in[1].shape.IsScalar() || in[1].shape.DType != in[0].shape.DType {
		return nil, errors.Errorf("Pad: fill value must be a scalar of %s, got %s", in[0].shape.DType, in[1].shape)
	}
	rank := in[0].shape.Rank()
	if len(axesConfig) > rank {
		return nil, errors.Errorf("Pad: %d axis configs for rank %d operand", len(axesConfig), rank)
	}
	cfg := make([]compute.PadAxis, rank)
	copy(cfg, axesConfig)
	shape := in[0].shape.Clone()
	for i, c := range cfg {
		if c.Start < 0 || c.End < 0 || c.Interior < 0 {
			return nil, errors.Errorf("Pad: backend %q does not support negative padding (axis %d: %+v)", Name, i, c)
		}
		d := shape.Dimensions[i]
		if d > 0 {
			d += (d - 1) * c.Interior
		}
		shape.Dimensions[i] = d + c.Start + c.End
	}
	return b.newNode(compute.OpTypePad, shape, &padParams{cfg}, in[0], in[1]), nil
}

type argMinMaxParams struct {
	axis  int
	isMin bool
}

// ArgMinMax implements compute.Function.
func (b *Function) ArgMinMax(x compute.Value, axis int, outputDType dtypes.DType, isMin bool) (compute.Value, error) {
	in, err := b.ops(compute.OpTypeArgMinMax, x)
	if err != nil {
		return nil, err
	}
	shape, err := shapeinference.ArgMinMax(in[0].shape, axis, outputDType)
	if err != nil {
		return nil, err
	}
	if axis < 0 {
		axis += in[0].shape.Rank()
	}
	if !isNumber(in[0].shape.DType) {
		return nil, errors.Errorf("backend %q: op ArgMinMax is not implemented for dtype %s", Name, in[0].shape.DType)
	}
	if err := b.checkDType(compute.OpTypeArgMinMax, outputDType); err != nil {
		return nil, err
	}
	return b.newNode(compute.OpTypeArgMinMax, shape, &argMinMaxParams{axis, isMin}, in[0]), nil
}

type gatherParams struct {
	indexVectorAxis                                                 int
	offsetOutputAxes, collapsedSliceAxes, startIndexMap, sliceSizes []int
}

// Gather implements compute.Function (XLA semantics).
func (b *Function) Gather(operand, startIndices compute.Value, indexVectorAxis int, offsetOutputAxes, collapsedSliceAxes, startIndexMap, sliceSizes []int, indicesAreSorted bool) (compute.Value, error) {
	in, err := b.ops(compute.OpTypeGather, operand, startIndices)
	if err != nil {
		return nil, err
	}
	idxShape := in[1].shape
	if indexVectorAxis == idxShape.Rank() {
		// Implicit index vector of length 1 (XLA semantics): shape
		// inference wants it explicit.
		idxShape = idxShape.Clone()
		idxShape.Dimensions = append(idxShape.Dimensions, 1)
	}
	shape, err := shapeinference.Gather(in[0].shape, idxShape, indexVectorAxis, offsetOutputAxes, collapsedSliceAxes, startIndexMap, sliceSizes, indicesAreSorted)
	if err != nil {
		return nil, err
	}
	if !isIndexDType(in[1].shape.DType) {
		return nil, errors.Errorf("Gather: indices dtype %s is not supported", in[1].shape.DType)
	}
	p := &gatherParams{indexVectorAxis, slices.Clone(offsetOutputAxes), slices.Clone(collapsedSliceAxes), slices.Clone(startIndexMap), slices.Clone(sliceSizes)}
	return b.newNode(compute.OpTypeGather, shape, p, in[0], in[1]), nil
}

type scatterParams struct {
	indexVectorAxis                                            int
	updateWindowAxes, insertedWindowAxes, scatterAxesToOperand []int
}

func (b *Function) scatter(op compute.OpType, operand, indices, updates compute.Value, indexVectorAxis int, updateWindowAxes, insertedWindowAxes, scatterAxesToOperandAxes []int) (compute.Value, error) {
	in, err := b.ops(op, operand, indices, updates)
	if err != nil {
		return nil, err
	}
	idxShape := in[1].shape
	if indexVectorAxis == idxShape.Rank() {
		idxShape = idxShape.Clone()
		idxShape.Dimensions = append(idxShape.Dimensions, 1)
	}
	shape, err := shapeinference.Scatter(in[0].shape, idxShape, in[2].shape, indexVectorAxis, updateWindowAxes, insertedWindowAxes, scatterAxesToOperandAxes)
	if err != nil {
		return nil, err
	}
	if !isIndexDType(in[1].shape.DType) {
		return nil, errors.Errorf("%s: indices dtype %s is not supported", op, in[1].shape.DType)
	}
	if !isNumber(in[0].shape.DType) {
		return nil, errors.Errorf("backend %q: op %s is not implemented for dtype %s", Name, op, in[0].shape.DType)
	}
	p := &scatterParams{indexVectorAxis, slices.Clone(updateWindowAxes), slices.Clone(insertedWindowAxes), slices.Clone(scatterAxesToOperandAxes)}
	return b.newNode(op, shape, p, in...), nil
}

// ScatterSum implements compute.Function (XLA semantics).
func (b *Function) ScatterSum(operand, indices, updates compute.Value, indexVectorAxis int, updateWindowAxes, insertedWindowAxes, scatterAxesToOperandAxes []int, indicesAreSorted, uniqueIndices bool) (compute.Value, error) {
	return b.scatter(compute.OpTypeScatterSum, operand, indices, updates, indexVectorAxis, updateWindowAxes, insertedWindowAxes, scatterAxesToOperandAxes)
}

// ScatterMax implements compute.Function (XLA semantics).
func (b *Function) ScatterMax(operand, indices, updates compute.Value, indexVectorAxis int, updateWindowAxes, insertedWindowAxes, scatterAxesToOperandAxes []int, indicesAreSorted, uniqueIndices bool) (compute.Value, error) {
	return b.scatter(compute.OpTypeScatterMax, operand, indices, updates, indexVectorAxis, updateWindowAxes, insertedWindowAxes, scatterAxesToOperandAxes)
}

// ScatterMin implements compute.Function (XLA semantics).
func (b *Function) ScatterMin(operand, indices, updates compute.Value, indexVectorAxis int, updateWindowAxes, insertedWindowAxes, scatterAxesToOperandAxes []int, indicesAreSorted, uniqueIndices bool) (compute.Value, error) {
	return b.scatter(compute.OpTypeScatterMin, operand, indices, updates, indexVectorAxis, updateWindowAxes, insertedWindowAxes, scatterAxesToOperandAxes)
}

// dotParams holds DotGeneral's axes, normalised to non-negative values.
type dotParams struct {
	lhsContract, lhsBatch, rhsContract, rhsBatch []int
	lhsFree, rhsFree                             []int
	batch, m, n, k                               int
}

// DotGeneral implements compute.Function. The output axes are the batch
// axes, then lhs's free axes, then rhs's free axes, each in operand order.
func (b *Function) DotGeneral(lhs compute.Value, lhsContractingAxes, lhsBatchAxes []int, rhs compute.Value, rhsContractingAxes, rhsBatchAxes []int, config compute.DotGeneralConfig) (compute.Value, error) {
	in, err := b.ops(compute.OpTypeDotGeneral, lhs, rhs)
	if err != nil {
		return nil, err
	}
	if dt := in[0].shape.DType; (config.AccumulatorDType != dtypes.InvalidDType && config.AccumulatorDType != dt) ||
		(config.OutputDType != dtypes.InvalidDType && config.OutputDType != dt) {
		return nil, errors.Wrapf(compute.ErrNotImplemented, "backend %q: DotGeneral with accumulator/output dtype %s/%s for %s operands",
			Name, config.AccumulatorDType, config.OutputDType, dt)
	}
	if err != nil {
		return nil, err
	}
	ls, rs := in[0].shape, in[1].shape
	if ls.DType != rs.DType {
		return nil, errors.Errorf("DotGeneral: dtypes differ: %s and %s", ls, rs)
	}
	if !isNumber(ls.DType) {
		return nil, errors.Errorf("backend %q: op DotGeneral is not implemented for dtype %s", Name, ls.DType)
	}
	if len(lhsContractingAxes) != len(rhsContractingAxes) || len(lhsBatchAxes) != len(rhsBatchAxes) {
		return nil, errors.Errorf("DotGeneral: lhs has %d contracting/%d batch axes, rhs %d/%d",
			len(lhsContractingAxes), len(lhsBatchAxes), len(rhsContractingAxes), len(rhsBatchAxes))
	}
	p := &dotParams{}
	norm := func(what string, axes []int, rank int, used []bool) ([]int, error) {
		out := make([]int, len(axes))
		for i, a := range axes {
			if a < 0 {
				a += rank
			}
			if a < 0 || a >= rank || used[a] {
				return nil, errors.Errorf("DotGeneral: %s axis %d invalid or repeated (operands %s, %s)", what, axes[i], ls, rs)
			}
			used[a] = true
			out[i] = a
		}
		return out, nil
	}
	lUsed, rUsed := make([]bool, ls.Rank()), make([]bool, rs.Rank())
	if p.lhsContract, err = norm("lhs contracting", lhsContractingAxes, ls.Rank(), lUsed); err != nil {
		return nil, err
	}
	if p.lhsBatch, err = norm("lhs batch", lhsBatchAxes, ls.Rank(), lUsed); err != nil {
		return nil, err
	}
	if p.rhsContract, err = norm("rhs contracting", rhsContractingAxes, rs.Rank(), rUsed); err != nil {
		return nil, err
	}
	if p.rhsBatch, err = norm("rhs batch", rhsBatchAxes, rs.Rank(), rUsed); err != nil {
		return nil, err
	}
	p.batch, p.k, p.m, p.n = 1, 1, 1, 1
	var dims []int
	for i := range p.lhsBatch {
		ld, rd := ls.Dimensions[p.lhsBatch[i]], rs.Dimensions[p.rhsBatch[i]]
		if ld != rd {
			return nil, errors.Errorf("DotGeneral: batch axes differ: lhs %s axis %d vs rhs %s axis %d", ls, p.lhsBatch[i], rs, p.rhsBatch[i])
		}
		p.batch *= ld
		dims = append(dims, ld)
	}
	for i := range p.lhsContract {
		ld, rd := ls.Dimensions[p.lhsContract[i]], rs.Dimensions[p.rhsContract[i]]
		if ld != rd {
			return nil, errors.Errorf("DotGeneral: contracting axes differ: lhs %s axis %d vs rhs %s axis %d", ls, p.lhsContract[i], rs, p.rhsContract[i])
		}
		p.k *= ld
	}
	for a := range ls.Rank() {
		if !lUsed[a] {
			p.lhsFree = append(p.lhsFree, a)
			p.m *= ls.Dimensions[a]
			dims = append(dims, ls.Dimensions[a])
		}
	}
	for a := range rs.Rank() {
		if !rUsed[a] {
			p.rhsFree = append(p.rhsFree, a)
			p.n *= rs.Dimensions[a]
			dims = append(dims, rs.Dimensions[a])
		}
	}
	return b.newNode(compute.OpTypeDotGeneral, shapes.Make(ls.DType, dims...), p, in[0], in[1]), nil
}
