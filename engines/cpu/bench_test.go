package cpu_test

import (
	"fmt"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/shapes"

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
			bld := be.Builder("bench")
			must := func(o backends.Op, err error) backends.Op {
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
			exe, err := bld.Compile([]backends.Op{y}, nil)
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
				out, err := exe.Execute([]backends.Buffer{xb, rb}, nil, 0)
				if err != nil {
					b.Fatal(err)
				}
				_ = be.BufferFinalize(out[0])
			}
		})
	}
}
