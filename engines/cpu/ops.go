package cpu

import (
	"github.com/pkg/errors"
)

// run computes node n's value into st.values[n.idx] with the executor the
// builder stored in the node (see opTable).
func (st *execState) run(n *node) error {
	if g := n.group; g != nil {
		if n != g.members[0] {
			return nil // computed with the group's first member
		}
		return execDotGroup(st, g)
	}
	if n.exec == nil {
		return errors.Errorf("backend %q: op %s has no executor", Name, n.op)
	}
	return n.exec(st, n)
}

// Executors of the ops that are not elementwise (opTable's exec).

func execConstant(st *execState, n *node) error {
	s := &st.stores[n.idx]
	*s = store{flat: n.params, refs: 1}
	st.values[n.idx] = s
	return nil
}

// execAlias shares the input's memory (Identity, Reshape).
func execAlias(st *execState, n *node) error {
	st.alias(n, 0)
	return nil
}

func execConvert(st *execState, n *node) error {
	s := st.alloc(n)
	return convert(s.flat, st.in(n, 0))
}

func execTranspose(st *execState, n *node) error {
	if transposeKeepsOrder(n.inputs[0].shape.Dimensions, n.params.(*transposeParams).perm) {
		st.alias(n, 0)
		return nil
	}
	s := st.alloc(n)
	transposeAny(s.flat, st.in(n, 0), n.inputs[0].shape.Dimensions, n.params.(*transposeParams).perm)
	return nil
}

// transposeKeepsOrder reports whether permuting axes of dims by perm
// leaves the row-major order of the elements unchanged: the axes longer than
// 1 keep their relative order (a decode step's [B, 1, H, dh] -> [B, H, 1,
// dh]), so the output can share the input's memory.
func transposeKeepsOrder(dims, perm []int) bool {
	last := -1
	for _, a := range perm {
		if dims[a] == 1 {
			continue
		}
		if a < last {
			return false
		}
		last = a
	}
	return true
}

func execBroadcastInDim(st *execState, n *node) error {
	s := st.alloc(n)
	broadcastAny(s.flat, st.in(n, 0), n.inputs[0].shape.Dimensions, n.shape.Dimensions, n.params.(*broadcastInDimParams).axes)
	return nil
}

func execReduce(st *execState, n *node) error {
	s := st.alloc(n)
	return reduceAny(n.op, s.flat, st.in(n, 0), n.inputs[0].shape.Dimensions, n.params.(*reduceParams).axes)
}

func execIota(st *execState, n *node) error {
	s := st.alloc(n)
	return iotaAny(s.flat, n.shape.Dimensions, n.params.(*iotaParams).axis)
}

func execConcatenate(st *execState, n *node) error {
	s := st.alloc(n)
	ins := make([]any, len(n.inputs))
	sizes := make([]int, len(n.inputs))
	ax := n.params.(*concatParams).axis
	for i, in := range n.inputs {
		ins[i] = st.in(n, i)
		sizes[i] = in.shape.Dimensions[ax]
	}
	return concatAny(s.flat, ins, n.shape.Dimensions, ax, sizes)
}

func execSlice(st *execState, n *node) error {
	s := st.alloc(n)
	p := n.params.(*sliceParams)
	sliceAny(s.flat, st.in(n, 0), n.inputs[0].shape.Dimensions, n.shape.Dimensions, p.starts, p.strides)
	return nil
}

func execPad(st *execState, n *node) error {
	s := st.alloc(n)
	p := n.params.(*padParams)
	padAny(s.flat, st.in(n, 0), st.in(n, 1), n.inputs[0].shape.Dimensions, n.shape.Dimensions, p.axes)
	return nil
}

func execArgMinMax(st *execState, n *node) error {
	s := st.alloc(n)
	p := n.params.(*argMinMaxParams)
	return argMinMaxAny(s.flat, st.in(n, 0), n.inputs[0].shape.Dimensions, p.axis, p.isMin)
}

func execGather(st *execState, n *node) error {
	s := st.alloc(n)
	return gatherAny(s.flat, st.in(n, 0), st.in(n, 1), n.inputs[0].shape, n.inputs[1].shape, n.shape, n.params.(*gatherParams))
}

func execScatter(st *execState, n *node) error {
	s := st.alloc(n)
	copyFlat(s.flat, st.in(n, 0))
	return scatterAny(n.op, s.flat, st.in(n, 1), st.in(n, 2), n.inputs[0].shape, n.inputs[1].shape, n.inputs[2].shape, n.params.(*scatterParams))
}

func execDotGeneral(st *execState, n *node) error {
	s := st.alloc(n)
	return dotGeneral(st, n, s.flat, st.in(n, 0), st.in(n, 1))
}
