package cpu

import (
	"fmt"
	"slices"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
)

// A transpose that only moves axes of length 1 shares its input's memory;
// any other copies. Either way the values are those of an index-by-index
// transpose.
func TestTransposeOfUnitAxes(t *testing.T) {
	for _, c := range []struct {
		dims, perm []int
		shares     bool
	}{
		{[]int{1, 1, 16, 8}, []int{0, 2, 1, 3}, true},       // decode heads: [B,T,H,dh] -> [B,H,T,dh] at T = 1
		{[]int{3, 1, 4, 5}, []int{0, 2, 1, 3}, true},        // batch 3, one position
		{[]int{3, 4, 1, 5}, []int{2, 0, 1, 3}, true},        // a unit axis to the front
		{[]int{1, 4, 1, 5}, []int{3, 1, 0, 2}, false},       // 4 and 5 swap
		{[]int{2, 3, 4}, []int{0, 2, 1}, false},             // an ordinary transpose
		{[]int{1, 8, 1, 2, 4}, []int{0, 1, 2, 4, 3}, false}, // RoPE's pair axis
		{[]int{2, 3}, []int{0, 1}, true},                    // the identity
	} {
		t.Run(fmt.Sprint(c.dims, c.perm), func(t *testing.T) {
			if got := transposeKeepsOrder(c.dims, c.perm); got != c.shares {
				t.Fatalf("transposeKeepsOrder = %v, want %v", got, c.shares)
			}
			be, err := New("")
			if err != nil {
				t.Fatal(err)
			}
			b := be.(*Backend)
			bldB := b.Builder("transpose")
			bld := bldB.Main()
			in := shapes.Make(dtypes.Float32, c.dims...)
			x, err := bld.Parameter("x", in, nil)
			if err != nil {
				t.Fatal(err)
			}
			y, err := bld.Transpose(x, c.perm...)
			if err != nil {
				t.Fatal(err)
			}
			// A second use of y keeps the shared store alive past the
			// input's last use.
			z, err := bld.Neg(y)
			if err != nil {
				t.Fatal(err)
			}
			if err := bld.Return([]compute.Value{y, z}, nil); err != nil {
				panic(err)
			}
			exe, err := bldB.Compile()
			if err != nil {
				t.Fatal(err)
			}
			vals := make([]float32, in.Size())
			for i := range vals {
				vals[i] = float32(i)
			}
			buf, err := b.BufferFromFlatData(0, slices.Clone(vals), in)
			if err != nil {
				t.Fatal(err)
			}
			outs, err := exe.Execute([]compute.Buffer{buf}, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			got, neg := outs[0].(*Buffer).flat.([]float32), outs[1].(*Buffer).flat.([]float32)
			// Reference: out[j] = in[i] where the output index is the
			// input index permuted.
			outDims := make([]int, len(c.perm))
			for i, a := range c.perm {
				outDims[i] = c.dims[a]
			}
			idx := make([]int, len(outDims))
			for j := range got {
				for a, r := len(outDims)-1, j; a >= 0; a-- {
					idx[a] = r % outDims[a]
					r /= outDims[a]
				}
				src := 0
				inIdx := make([]int, len(c.dims))
				for i, a := range c.perm {
					inIdx[a] = idx[i]
				}
				for a, d := range c.dims {
					src = src*d + inIdx[a]
				}
				if got[j] != vals[src] || neg[j] != -vals[src] {
					t.Fatalf("element %d: got %v (neg %v), want %v", j, got[j], neg[j], vals[src])
				}
			}
		})
	}
}
