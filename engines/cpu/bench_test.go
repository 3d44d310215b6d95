package cpu_test

import (
	"fmt"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/shapes"

	"github.com/cde-rl/cde/engines/cpu"
)

// BenchmarkElementwiseChain times a graph of 64 elementwise ops (unary,
// binary with a scalar and with a row broadcast, a comparison and a
// Where) on float32 tensors: at 8 elements it measures the per-op
// dispatch, at 256k the kernels.
func BenchmarkElementwiseChain(b *testing.B) {
	for _, size := range []int{8, 4096, 1 << 18} {
		b.Run(fmt.Sprintf("n%d", size), func(b *testing.B) {
			be, err := cpu.New("")
			if err != nil {
				b.Fatal(err)
			}
			rows := max(1, size/64)
			cols := size / rows
			bldB := be.Builder("bench")
			bld := bldB.Main()
			must := func(o compute.Value, err error) compute.Value {
				if err != nil {
					b.Fatal(err)
				}
				return o
			}
			x := must(bld.Parameter("x", shapes.Make(f32, rows, cols), nil))
			row := must(bld.Parameter("row", shapes.Make(f32, 1, cols), nil))
			half := must(bld.Constant([]float32{0.5}))
			y := x
			for range 8 {
				y = must(bld.Mul(y, half))
				y = must(bld.Tanh(y))
				y = must(bld.Add(y, row))
				y = must(bld.Exp(y))
				y = must(bld.Neg(y))
				y = must(bld.Abs(y))
				c := must(bld.GreaterThan(y, half))
				y = must(bld.Where(c, y, x))
			}
			if err := bld.Return([]compute.Value{y}, nil); err != nil {
				panic(err)
			}
			exe, err := bldB.Compile()
			if err != nil {
				b.Fatal(err)
			}
			xb, err := be.BufferFromFlatData(0, make([]float32, rows*cols), shapes.Make(f32, rows, cols))
			if err != nil {
				b.Fatal(err)
			}
			rb, err := be.BufferFromFlatData(0, make([]float32, cols), shapes.Make(f32, 1, cols))
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				out, err := exe.Execute([]compute.Buffer{xb, rb}, nil, 0)
				if err != nil {
					b.Fatal(err)
				}
				_ = out[0].Finalize()
			}
		})
	}
}
