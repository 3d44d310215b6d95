package cpu_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/gomlx/compute"

	"github.com/cde-rl/cde/engines/cpu"
	"github.com/cde-rl/cde/engines/cpu/gemm"
)

// TestSiblingDotGroups: products of one activation (read through separate
// reshapes, as a graph's linear layers do) times several [out, in]
// weights run as one group; their values match GoMLX's engine over two
// runs (the second from the buffer pool), and the groups formed are the
// expected ones: a weight computed after the group's first product stays
// out, one computed before it joins, and a product of other activations
// is not grouped.
func TestSiblingDotGroups(t *testing.T) {
	rng := newRNG(t)
	for _, c := range []struct {
		name   string
		m      int
		ns     []int // weights used as they are
		before bool  // one more weight, scaled by 2 before the first product
		after  bool  // one more weight, negated after the first product
		groups []int // sizes
	}{
		{"qkv/m1", 1, []int{2048, 1024, 1024}, false, false, []int{3}},
		{"gate-up/m3", 3, []int{3072, 3072}, false, false, []int{2}},
		{"computed-weights/m2", 2, []int{512}, true, true, []int{2}},
		{"lone/m1", 1, []int{1024}, false, true, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			const k = 1024
			ins := []arr{rng.arr(f32, dUnit, 1, c.m, k), rng.arr(f32, dUnit, c.m, k)}
			for _, n := range c.ns {
				ins = append(ins, rng.arr(f32, dUnit, n, k))
			}
			if c.before {
				ins = append(ins, rng.arr(f32, dUnit, 256, k))
			}
			if c.after {
				ins = append(ins, rng.arr(f32, dUnit, 384, k))
			}
			build := func(b compute.Function, xs []compute.Value) ([]compute.Value, error) {
				dot := func(w compute.Value) (compute.Value, error) {
					x, err := b.Reshape(xs[0], c.m, k)
					if err != nil {
						return nil, err
					}
					return b.DotGeneral(x, []int{1}, nil, w, []int{1}, nil, compute.DotGeneralConfig{})
				}
				ws := xs[2 : 2+len(c.ns)]
				extra := xs[2+len(c.ns):]
				var outs []compute.Value
				if c.before {
					two, err := b.Constant([]float32{2})
					if err != nil {
						return nil, err
					}
					w, err := b.Mul(extra[0], two)
					if err != nil {
						return nil, err
					}
					ws = append(ws, w)
					extra = extra[1:]
				}
				for i, w := range ws {
					y, err := dot(w)
					if err != nil {
						return nil, err
					}
					outs = append(outs, y)
					if i == 0 && c.after {
						wn, err := b.Neg(extra[0])
						if err != nil {
							return nil, err
						}
						ya, err := dot(wn)
						if err != nil {
							return nil, err
						}
						outs = append(outs, ya)
					}
				}
				// A product of other activations, with the first weight.
				y, err := b.DotGeneral(xs[1], []int{1}, nil, xs[2], []int{1}, nil, compute.DotGeneralConfig{})
				if err != nil {
					return nil, err
				}
				return append(outs, y), nil
			}
			checkBuilder(t, ins, tolFor(f32, k), build)

			ours, _ := engines(t)
			bB := ours.Builder("groups")
			b := bB.Main()
			xs := make([]compute.Value, len(ins))
			for i, in := range ins {
				var err error
				if xs[i], err = b.Parameter(fmt.Sprintf("x%d", i), in.shape(), nil); err != nil {
					t.Fatal(err)
				}
			}
			outs, err := build(b, xs)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Return(outs, nil); err != nil {
				panic(err)
			}
			exe, err := bB.Compile()
			if err != nil {
				t.Fatal(err)
			}
			defer exe.Finalize()
			// Products are grouped only where they take the dot-tile
			// kernels, which need AVX-512: elsewhere none is.
			want := c.groups
			if !gemm.DotTiles(false, true, 1, 16) {
				want = nil
			}
			if got := cpu.DotGroupSizes(exe); !slices.Equal(got, want) {
				t.Fatalf("group sizes %v, want %v", got, want)
			}
		})
	}
}
