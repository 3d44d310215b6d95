package cpu

import (
	"os"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"

	"github.com/cde-rl/cde/engines/cpu/gemm"
)

// Sibling products. A transformer layer multiplies one hidden state by
// several weights: the query, key and value projections, then the gate
// and up projections. At decode batch sizes each product streams its
// weight from memory, and each one starts and ends on the cores on its
// own, with small ops between them. Compile groups the DotGenerals that
// read the same activations (through reshapes, which share memory) times
// different [out, in] weights; the group runs as one gemm.SgemmTMany at
// the position of its first member, a single hand-off whose cores end
// together once, and the other members find their values computed.

// dotGroup is one such set of DotGeneral nodes, in execution order.
type dotGroup struct {
	members []*node
}

// dotGroupsOff disables the grouping (CDE_CPU_NO_DOT_GROUPS set when the
// package loads): a switch to time the engine with and without it.
var dotGroupsOff = os.Getenv("CDE_CPU_NO_DOT_GROUPS") != ""

// abtForm reports whether n computes x·Wᵀ the way a group runs it: float32,
// x [m, k] contracted on its axis 1, W [n, k] contracted on its axis 1, no
// batch axes, big enough for gemm (smaller products take direct loops,
// which a group would change) and on gemm's dot-tile path. root is x with
// reshapes stripped: members with the same root and x shape read the same
// data.
func abtForm(n *node) (root *node, m, k int, ok bool) {
	if n.op != compute.OpTypeDotGeneral || n.shape.DType != dtypes.Float32 {
		return nil, 0, 0, false
	}
	p := n.params.(*dotParams)
	x, w := n.inputs[0], n.inputs[1]
	if x.shape.DType != dtypes.Float32 || w.shape.DType != dtypes.Float32 { // a bfloat16 operand (foldBF16Converts)
		return nil, 0, 0, false
	}
	if p.batch != 1 || len(p.lhsBatch) != 0 || x.shape.Rank() != 2 || w.shape.Rank() != 2 ||
		len(p.lhsContract) != 1 || p.lhsContract[0] != 1 || len(p.rhsContract) != 1 || p.rhsContract[0] != 1 {
		return nil, 0, 0, false
	}
	m, k = p.m, p.k
	if m*p.n*k <= smallDotMACs || !gemm.DotTiles(false, true, m, k) {
		return nil, 0, 0, false
	}
	root = x
	for root.op == compute.OpTypeReshape || root.op == compute.OpTypeIdentity {
		root = root.inputs[0]
	}
	return root, m, k, true
}

// groupSiblingDots sets the group of the DotGenerals in order (the
// executable's nodes, in execution order) that share their activations.
// A member joins only if its weight is ready when the first member runs:
// a parameter or constant, or computed before it.
func groupSiblingDots(order []*node) {
	if dotGroupsOff {
		return
	}
	pos := make(map[*node]int, len(order))
	for i, n := range order {
		pos[n] = i
	}
	type key struct {
		root *node
		m, k int
	}
	cands := map[key][]*node{}
	var keys []key
	for _, n := range order {
		root, m, k, ok := abtForm(n)
		if !ok {
			continue
		}
		kk := key{root, m, k}
		if cands[kk] == nil {
			keys = append(keys, kk)
		}
		cands[kk] = append(cands[kk], n)
	}
	for _, kk := range keys {
		ms := cands[kk]
		if len(ms) < 2 {
			continue
		}
		lead := ms[0]
		g := &dotGroup{members: []*node{lead}}
		for _, n := range ms[1:] {
			w := n.inputs[1]
			if w.op == compute.OpTypeParameter || w.op == compute.OpTypeConstant || pos[w] < pos[lead] {
				g.members = append(g.members, n)
			}
		}
		if len(g.members) < 2 {
			continue
		}
		for _, n := range g.members {
			n.group = g
		}
	}
}

// execDotGroup computes every member of g, when its first member's turn
// comes.
func execDotGroup(st *execState, g *dotGroup) error {
	lead := g.members[0]
	p := lead.params.(*dotParams)
	var buf [4]gemm.Product
	ps := buf[:0]
	for _, n := range g.members {
		s := st.alloc(n)
		ps = append(ps, gemm.Product{N: n.params.(*dotParams).n, B: st.in(n, 1).([]float32), C: s.flat.([]float32)})
	}
	gemm.SgemmTMany(p.m, p.k, st.in(lead, 0).([]float32), ps)
	return nil
}
