package xla

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
)

func testBackend(t testing.TB) compute.Backend {
	t.Helper()
	b, err := NewEngine("go", "")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFastDotGradMatchesUpstream checks the replacement DotGeneral gradient
// against GoMLX's own rule on several axis layouts, including unsorted
// contracting axes and several batch axes.
func TestFastDotGradMatchesUpstream(t *testing.T) {
	be := testBackend(t)
	cases := []struct {
		name             string
		lhsDims, rhsDims []int
		lc, lb, rc, rb   []int
		// refPerm and refRC, when set, give the reference the same product
		// with rhs transposed by refPerm so that its contracting axes refRC
		// are sorted: GoMLX v0.28.3's own DotGeneral gradient is wrong for
		// unsorted contracting axes (it panics on twoContractUnsorted), so
		// there the reference goes through Transpose, whose gradient is
		// GoMLX's too, and the sorted product.
		refPerm, refRC []int
	}{
		{"matmul", []int{5, 3}, []int{3, 4}, []int{1}, nil, []int{0}, nil, nil, nil},
		{"matmulT", []int{3, 5}, []int{4, 3}, []int{0}, nil, []int{1}, nil, nil, nil},
		{"batched", []int{2, 5, 3}, []int{2, 3, 4}, []int{2}, []int{0}, []int{1}, []int{0}, nil, nil},
		{"attention", []int{2, 3, 5, 4}, []int{2, 3, 6, 4}, []int{3}, []int{0, 1}, []int{3}, []int{0, 1}, nil, nil},
		{"batchLast", []int{5, 4, 2}, []int{4, 2, 3}, []int{1}, []int{2}, []int{0}, []int{1}, nil, nil},
		{"twoContractUnsorted", []int{2, 3, 4}, []int{4, 5, 3}, []int{1, 2}, nil, []int{2, 0}, nil, []int{2, 0, 1}, []int{0, 1}},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lhs := randTensor(rng, c.lhsDims)
			rhs := randTensor(rng, c.rhsDims)
			build := func(fast bool) func(l, r *graph.Node) []*graph.Node {
				return func(l, r *graph.Node) []*graph.Node {
					out := graph.DotGeneral(l, c.lc, c.lb, r, c.rc, c.rb)
					if !fast && c.refPerm != nil {
						out = graph.DotGeneral(l, c.lc, c.lb, graph.TransposeAllAxes(r, c.refPerm...), c.refRC, c.rb)
					}
					// A non-uniform upstream gradient: loss = sum(out * w).
					w := graph.Iota(l.Graph(), out.Shape(), 0)
					w = graph.Add(w, graph.Cos(graph.Iota(l.Graph(), out.Shape(), out.Rank()-1)))
					loss := graph.ReduceAllSum(graph.Mul(out, w))
					if fast {
						// fastDotGeneralVJP is installed by NewEngine.
						return graph.Gradient(loss, l, r)
					}
					saved := graph.VJPRegistration[graph.NodeTypeDotGeneral]
					graph.VJPRegistration[graph.NodeTypeDotGeneral] = upstreamDotVJP
					defer func() { graph.VJPRegistration[graph.NodeTypeDotGeneral] = saved }()
					return graph.Gradient(loss, l, r)
				}
			}
			fastOut := graph.MustExecOnceN(be, build(true), lhs, rhs)
			refOut := graph.MustExecOnceN(be, build(false), lhs, rhs)
			for i := range 2 {
				if !fastOut[i].Shape().Equal(refOut[i].Shape()) {
					t.Fatalf("grad %d shape %s, upstream %s", i, fastOut[i].Shape(), refOut[i].Shape())
				}
				a := tensors.MustCopyFlatData[float32](fastOut[i])
				b := tensors.MustCopyFlatData[float32](refOut[i])
				for j := range a {
					if math.Abs(float64(a[j]-b[j])) > 1e-4*(1+math.Abs(float64(b[j]))) {
						t.Fatalf("grad %d [%d] = %v, upstream %v", i, j, a[j], b[j])
					}
				}
			}
		})
	}
}

func randTensor(rng *rand.Rand, dims []int) *tensors.Tensor {
	n := 1
	for _, d := range dims {
		n *= d
	}
	data := make([]float32, n)
	for i := range data {
		data[i] = float32(rng.NormFloat64())
	}
	return tensors.FromFlatDataAndDimensions(data, dims...)
}

// TestDotAxesParsed guards the fast rule's only fragile part: reading a
// node's axes. If GoMLX changes its node description, this fails instead of
// the rule silently falling back to the slow upstream gradient.
func TestDotAxesParsed(t *testing.T) {
	be := testBackend(t)
	var got [4][]int
	var err error
	graph.MustExecOnceN(be, func(l, r *graph.Node) []*graph.Node {
		out := graph.DotGeneral(l, []int{2}, []int{0}, r, []int{1}, []int{0})
		got, err = dotAxes(out)
		return []*graph.Node{out}
	}, randTensor(rand.New(rand.NewPCG(1, 1)), []int{2, 5, 3}), randTensor(rand.New(rand.NewPCG(1, 1)), []int{2, 3, 4}))
	if err != nil {
		t.Fatal(err)
	}
	want := [4][]int{{2}, {0}, {1}, {0}}
	for i := range want {
		if len(got[i]) != len(want[i]) || (len(want[i]) > 0 && got[i][0] != want[i][0]) {
			t.Fatalf("axes %d = %v, want %v", i, got[i], want[i])
		}
	}
}
