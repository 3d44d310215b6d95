package xla

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/gomlx/compute/shapes"
	"github.com/gomlx/gomlx/core/graph"
)

// The upstream reverse-mode rule for DotGeneral (GoMLX v0.26.0) builds each
// operand's gradient as ReduceSum(Mul(broadcast, broadcast)), materialising a
// [batch, lhsCross, rhsCross, contracting] tensor. XLA fuses that away; the
// pure-Go engine does not, and a train step of our policy costs ~10x the time
// and ~14x the memory: measured on GoMLX's pure-Go engine when this rule was
// written, one train step took about 26 s and 4.7 GB with the upstream rule
// and 2.4 s and 344 MB with this one. Whatever replaces it must match the
// upstream gradient numerically (dotgrad_test.go checks that).
//
// fastDotGeneralVJP computes the same gradients as two DotGenerals and a
// transpose. For out = DotGeneral(lhs, rhs) with output axes laid out as
// [batch..., lhsCross..., rhsCross...] and upstream gradient v:
//
//	dL/dlhs = DotGeneral(v, contract rhsCross, batch;  rhs, contract rhsCross, batch)
//	          -> [batch..., lhsCross..., lhsContracting...], transposed to lhs's layout
//	dL/drhs = DotGeneral(v, contract lhsCross, batch;  lhs, contract lhsCross, batch)
//	          -> [batch..., rhsCross..., rhsContracting...], transposed to rhs's layout
//
// GoMLX keeps a node's axes private; the rule reads them from the node's
// description (stable for the pinned v0.26.0 and checked numerically against
// the upstream rule in dotgrad_test.go).

var (
	installOnce    sync.Once
	upstreamDotVJP graph.VJP
	dotAxesPattern = regexp.MustCompile(`lhsContractingAxes=\[([0-9 ]*)\], lhsBatchAxes=\[([0-9 ]*)\],.*rhsContractingAxes=\[([0-9 ]*)\], rhsBatchAxes=\[([0-9 ]*)\]`)
)

// installFastDotGrad replaces GoMLX's DotGeneral gradient rule process-wide
// (idempotent). The rule falls back to the upstream one if it cannot read a
// node's axes.
func installFastDotGrad() {
	installOnce.Do(func() {
		upstreamDotVJP = graph.VJPRegistration[graph.NodeTypeDotGeneral]
		graph.VJPRegistration[graph.NodeTypeDotGeneral] = fastDotGeneralVJP
	})
}

func parseAxes(s string) ([]int, error) {
	fields := strings.Fields(s)
	out := make([]int, len(fields))
	for i, f := range fields {
		v, err := strconv.Atoi(f)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// dotAxes recovers (lhsContracting, lhsBatch, rhsContracting, rhsBatch).
func dotAxes(node *graph.Node) (axes [4][]int, err error) {
	m := dotAxesPattern.FindStringSubmatch(node.String())
	if m == nil {
		return axes, fmt.Errorf("cannot read DotGeneral axes from %q", node.String())
	}
	for i := range 4 {
		if axes[i], err = parseAxes(m[i+1]); err != nil {
			return axes, err
		}
	}
	return axes, nil
}

// crossAxes are the axes of an operand that are neither contracted nor batch,
// in increasing order (the order DotGeneral lays them out in its output).
func crossAxes(rank int, contracting, batch []int) []int {
	used := make([]bool, rank)
	for _, a := range contracting {
		used[a] = true
	}
	for _, a := range batch {
		used[a] = true
	}
	var out []int
	for a := range rank {
		if !used[a] {
			out = append(out, a)
		}
	}
	return out
}

func iotaFrom(start, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = start + i
	}
	return out
}

// operandGrad computes the gradient for one operand ("this"), given the
// other operand and v. vThisCross / vOtherCross are the positions in v of the
// two operands' cross axes.
func operandGrad(v, other *graph.Node, nBatch int, vOtherCross []int,
	otherCross, otherBatch, otherContracting []int,
	thisRank int, thisBatch, thisCross, thisContracting []int) *graph.Node {
	vBatch := iotaFrom(0, nBatch)
	// Result layout: [batch..., thisCross..., other's contracting axes in
	// increasing axis order]; other's contracting axis otherContracting[j]
	// pairs with this operand's thisContracting[j].
	g := graph.DotGeneral(v, vOtherCross, vBatch, other, otherCross, otherBatch)
	perm := make([]int, thisRank)
	for i, a := range thisBatch {
		perm[a] = i
	}
	for i, a := range thisCross {
		perm[a] = nBatch + i
	}
	rest := crossAxes(other.Rank(), otherCross, otherBatch) // == sorted(otherContracting)
	for i, oa := range rest {
		for j, c := range otherContracting {
			if c == oa {
				perm[thisContracting[j]] = nBatch + len(thisCross) + i
			}
		}
	}
	identity := true
	for i, p := range perm {
		if i != p {
			identity = false
		}
	}
	if !identity {
		g = graph.TransposeAllAxes(g, perm...)
	}
	return g
}

func fastDotGeneralVJP(node *graph.Node, vjpOutputs []*graph.Node, outputShape shapes.Shape) []*graph.Node {
	axes, err := dotAxes(node)
	if err != nil {
		return upstreamDotVJP(node, vjpOutputs, outputShape)
	}
	lhs, rhs := node.Inputs()[0], node.Inputs()[1]
	v := vjpOutputs[0]
	lc, lb, rc, rb := axes[0], axes[1], axes[2], axes[3]
	lx := crossAxes(lhs.Rank(), lc, lb)
	rx := crossAxes(rhs.Rank(), rc, rb)
	nb := len(lb)
	vLhsCross := iotaFrom(nb, len(lx))
	vRhsCross := iotaFrom(nb+len(lx), len(rx))
	// d lhs: contract v's rhs-cross axes with rhs's cross axes; the remaining
	// rhs axes are its contracting ones, in rc order, paired with lc.
	dl := operandGrad(v, rhs, nb, vRhsCross, rx, rb, rc, lhs.Rank(), lb, lx, lc)
	dr := operandGrad(v, lhs, nb, vLhsCross, lx, lb, lc, rhs.Rank(), rb, rx, rc)
	return []*graph.Node{dl, dr}
}
