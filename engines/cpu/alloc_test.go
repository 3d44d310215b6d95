package cpu_test

import (
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/shapes"

	"github.com/cde-rl/cde/engines/cpu"
)

// TestSmallOpsAllocateNothing: a batch-1 decode step of a 28-layer model
// runs about 1,400 small ops (norms, RoPE, residuals). Each used to
// allocate a few objects (kernel closures, broadcast plans, its value's
// store); with gigabytes of weights on the heap the collector almost never
// runs, so those came from fresh, page-faulted memory every step. Here a
// chain of 72 such ops (same-shape, scalar and broadcast arithmetic, a
// reduction, unary ops, reshapes) must run with only the execution's own
// few allocations: its output buffer and the values handing it over.
func TestSmallOpsAllocateNothing(t *testing.T) {
	if raceOn {
		t.Skip("the race detector allocates")
	}
	be, err := cpu.New("")
	if err != nil {
		t.Fatal(err)
	}
	must := func(o compute.Value, err error) compute.Value {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	full := shapes.Make(f32, 1, 16, 1, 128)
	bldB := be.Builder("small-ops")
	bld := bldB.Main()
	x := must(bld.Parameter("x", full, nil))
	g := must(bld.Parameter("g", shapes.Make(f32, 128), nil))
	half := must(bld.Constant([]float32{0.5}))
	gb := must(bld.BroadcastInDim(g, full, []int{3}))
	y := x
	const rounds = 8
	for range rounds {
		y = must(bld.Mul(y, half))                        // with a scalar
		y = must(bld.Add(y, x))                           // same shape
		ss := must(bld.ReduceSum(must(bld.Mul(y, y)), 3)) // [1,16,1]
		ss = must(bld.Reshape(ss, 1, 16, 1, 1))
		rb := must(bld.BroadcastInDim(ss, full, []int{0, 1, 2, 3}))
		y = must(bld.Div(y, rb)) // broadcast along the row
		y = must(bld.Mul(y, gb)) // broadcast across rows
		y = must(bld.Exp(must(bld.Neg(y))))
	}
	if err := bld.Return([]compute.Value{y}, nil); err != nil {
		panic(err)
	}
	exe, err := bldB.Compile()
	if err != nil {
		t.Fatal(err)
	}
	xs := make([]float32, full.Size())
	for i := range xs {
		xs[i] = float32(i%7) * 0.1
	}
	xb, err := be.BufferFromFlatData(0, xs, full)
	if err != nil {
		t.Fatal(err)
	}
	gs := make([]float32, 128)
	for i := range gs {
		gs[i] = 1 + float32(i%3)*0.01
	}
	gbuf, err := be.BufferFromFlatData(0, gs, shapes.Make(f32, 128))
	if err != nil {
		t.Fatal(err)
	}
	run := func() {
		out, err := exe.Execute([]compute.Buffer{xb, gbuf}, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := out[0].Finalize(); err != nil {
			t.Fatal(err)
		}
	}
	run() // the first run fills the buffer pool and the plans
	allocs := testing.AllocsPerRun(20, run)
	// The execution's own: the outputs slice, the Buffer, its shape's
	// dimensions and the output data (handed out, so not from the pool).
	// Before the per-op allocations were removed this graph made 410.
	const fixed = 8
	if allocs > fixed {
		t.Fatalf("an execution of %d small ops made %.0f allocations, want at most %d", rounds*10, allocs, fixed)
	}
	t.Logf("%.0f allocations per execution of %d ops", allocs, rounds*10)
}
