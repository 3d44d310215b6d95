package xla

import (
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/gomlx/core/graph"
)

// The sampling noise inside a graph: internal/threefry's generator and
// layout with graph ops (32-bit unsigned additions, shifts, ors and xors),
// so an accelerator draws the same words as the host, with no noise sent
// to it. The logarithms run in float64, as on the host, and the result is
// rounded to float32 once: the two agree bit for bit unless a float64
// logarithm lands within its own rounding error of a float32 boundary.

// threefryRotations are Threefry-2x32's rotation constants (rounds 0-3,
// then 4-7).
var threefryRotations = [8]uint32{13, 15, 26, 6, 17, 29, 16, 24}

// threefryGraph is internal/threefry.Block on uint32 nodes of one shape.
func threefryGraph(k0, k1, c0, c1 *graph.Node) (*graph.Node, *graph.Node) {
	u := func(x uint32) *graph.Node { return graph.ConstAs(k0, x) }
	ks := [3]*graph.Node{k0, k1, graph.BitwiseXor(graph.BitwiseXor(k0, k1), u(0x1BD11BDA))}
	x0, x1 := graph.Add(c0, ks[0]), graph.Add(c1, ks[1])
	for g := range 5 {
		for i := range 4 {
			r := threefryRotations[(g%2)*4+i]
			x0 = graph.Add(x0, x1)
			x1 = graph.BitwiseOr(graph.BitwiseShiftLeft(x1, u(r)), graph.BitwiseShiftRightLogical(x1, u(32-r)))
			x1 = graph.BitwiseXor(x1, x0)
		}
		x0 = graph.Add(x0, ks[(g+1)%3])
		x1 = graph.Add(x1, graph.Add(ks[(g+2)%3], u(uint32(g+1))))
	}
	return x0, x1
}

// gumbelGraph returns the noise [B, vocab] float32 of each row's token
// t[b] (int32 [B]) for rows whose keys (internal/threefry.RowKey) are keys
// uint32 [B, 2].
func gumbelGraph(keys, t *graph.Node, vocab int) *graph.Node {
	g := keys.Graph()
	b := keys.Shape().Dimensions[0]
	half := (vocab + 1) / 2
	k0 := graph.BroadcastToDims(graph.Slice(keys, graph.AxisRange(), graph.AxisRange(0, 1)), b, half)
	k1 := graph.BroadcastToDims(graph.Slice(keys, graph.AxisRange(), graph.AxisRange(1, 2)), b, half)
	c0 := graph.BroadcastToDims(graph.Iota(g, shapesOf(dtypes.Uint32, 1, half), 1), b, half)
	c1 := graph.BroadcastToDims(graph.Reshape(graph.ConvertDType(t, dtypes.Uint32), b, 1), b, half)
	w0, w1 := threefryGraph(k0, k1, c0, c1)
	// Interleave: word v is w0 of block v/2 for even v, w1 for odd.
	w := graph.Reshape(graph.Concatenate([]*graph.Node{graph.Reshape(w0, b, half, 1), graph.Reshape(w1, b, half, 1)}, 2), b, 2*half)
	if 2*half != vocab {
		w = graph.Slice(w, graph.AxisRange(), graph.AxisRange(0, vocab))
	}
	m := graph.Add(graph.MulScalar(graph.BitwiseShiftRightLogical(w, graph.ConstAs(w, uint32(9))), 2), graph.ConstAs(w, uint32(1)))
	u := graph.MulScalar(graph.ConvertDType(m, dtypes.Float64), 1.0/(1<<24))
	return graph.ConvertDType(graph.Neg(graph.Log(graph.Neg(graph.Log(u)))), dtypes.Float32)
}
