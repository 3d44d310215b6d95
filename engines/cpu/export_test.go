package cpu

import (
	"slices"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
)

// TableOp is what the conformance suite (package cpu_test) reads of one
// elementwise op of opTable.
type TableOp struct {
	Op compute.OpType
	// DTypes are the dtypes it has kernels for (of operand KernelInput),
	// in supportedDTypes order.
	DTypes      []dtypes.DType
	KernelInput int
	// Domains names, per operand, where the tests draw its values:
	// "any", "positive", "aboveMinusOne", "nonZero" or "fewValues".
	Domains []string
}

var domainNames = map[testDomain]string{
	anyValues: "any", positive: "positive", aboveMinusOne: "aboveMinusOne", nonZero: "nonZero", fewValues: "fewValues",
}

// ElementwiseOps lists the table's elementwise ops, in OpType order.
func ElementwiseOps() []TableOp {
	var out []TableOp
	for op, def := range opTable {
		if def.kernels == nil {
			continue
		}
		t := TableOp{Op: op, KernelInput: def.kernelInput}
		for _, dt := range supportedDTypes {
			if def.kernels[dt] != nil {
				t.DTypes = append(t.DTypes, dt)
			}
		}
		for _, d := range def.test {
			t.Domains = append(t.Domains, domainNames[d])
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b TableOp) int { return int(a.Op) - int(b.Op) })
	return out
}

// Implements reports whether op is in the table.
func Implements(op compute.OpType) bool {
	_, ok := opTable[op]
	return ok
}

// DotGroupSizes lists the sizes of the sibling-product groups Compile
// made for e, in execution order.
func DotGroupSizes(e compute.Executable) []int {
	var sizes []int
	for _, n := range e.(*Executable).order {
		if n.group != nil && n.group.members[0] == n {
			sizes = append(sizes, len(n.group.members))
		}
	}
	return sizes
}
