package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
)

// Where with a donated value operand runs in place; with a condition
// constant along rows it copies only the rows that take the other operand
// (whereInPlace). Every case is checked against an index-by-index loop,
// donated or not, and the donated run must hand back the donated memory.
func TestWhereInPlace(t *testing.T) {
	type tc struct {
		name           string
		out            []int
		cond, on, off  []int // operand shapes (each dim the output's or 1)
		donate         int   // 1: onTrue, 2: onFalse
		condProb       float64
		sameOnAndOff   bool // onTrue and onFalse are one parameter
		wantsFastRoute bool // the condition is constant along rows
	}
	cases := []tc{
		{"decode cache, batch 1", []int{1, 8, 6, 4}, []int{1, 1, 6, 1}, []int{1, 8, 1, 4}, []int{1, 8, 6, 4}, 2, 0.2, false, true},
		{"decode cache, batch 3", []int{3, 2, 5, 4}, []int{3, 1, 5, 1}, []int{3, 2, 1, 4}, []int{3, 2, 5, 4}, 2, 0.3, false, true},
		{"onTrue donated, onFalse a scalar per head", []int{3, 2, 5, 4}, []int{3, 1, 5, 1}, []int{3, 2, 5, 4}, []int{1, 2, 1, 1}, 1, 0.6, false, true},
		{"scalar condition", []int{2, 3, 4}, []int{1, 1, 1}, []int{2, 3, 4}, []int{2, 3, 4}, 2, 0.5, false, true},
		{"condition over the leading axis", []int{4, 3, 5}, []int{4, 1, 1}, []int{1, 1, 5}, []int{4, 3, 5}, 2, 0.5, false, true},
		{"condition varies along rows", []int{3, 2, 5, 4}, []int{3, 1, 1, 4}, []int{3, 2, 5, 1}, []int{3, 2, 5, 4}, 2, 0.5, false, false},
		{"full condition", []int{3, 7}, []int{3, 7}, []int{3, 7}, []int{3, 7}, 1, 0.5, false, false},
		{"one parameter on both sides", []int{2, 3, 4}, []int{2, 3, 1}, nil, []int{2, 3, 4}, 2, 0.5, true, true},
		{"rank 0", []int{}, []int{}, []int{}, []int{}, 2, 0.5, false, true},
	}
	r := rand.New(rand.NewPCG(7, 8))
	for _, c := range cases {
		for _, donate := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/donated=%v", c.name, donate), func(t *testing.T) {
				be, err := New("")
				if err != nil {
					t.Fatal(err)
				}
				b := be.(*Backend)
				bldB := b.Builder("where")
				bld := bldB.Main()
				must := func(o compute.Value, err error) compute.Value {
					t.Helper()
					if err != nil {
						t.Fatal(err)
					}
					return o
				}
				outS := shapes.Make(dtypes.Float32, c.out...)
				all := make([]int, len(c.out))
				for i := range all {
					all[i] = i
				}
				bcast := func(x compute.Value, dt dtypes.DType, dims []int) compute.Value {
					if shapes.Make(dt, dims...).Equal(shapes.Make(dt, c.out...)) {
						return x
					}
					return must(bld.BroadcastInDim(x, shapes.Make(dt, c.out...), all))
				}
				condP := must(bld.Parameter("cond", shapes.Make(dtypes.Bool, c.cond...), nil))
				offP := must(bld.Parameter("off", shapes.Make(dtypes.Float32, c.off...), nil))
				onP := offP
				params := []shapes.Shape{shapes.Make(dtypes.Bool, c.cond...), shapes.Make(dtypes.Float32, c.off...)}
				if !c.sameOnAndOff {
					onP = must(bld.Parameter("on", shapes.Make(dtypes.Float32, c.on...), nil))
					params = append(params, shapes.Make(dtypes.Float32, c.on...))
				}
				y := must(bld.Where(bcast(condP, dtypes.Bool, c.cond), bcast(onP, dtypes.Float32, c.on), bcast(offP, dtypes.Float32, c.off)))
				if err := bld.Return([]compute.Value{y}, nil); err != nil {
					panic(err)
				}
				exe, err := bldB.Compile()
				if err != nil {
					t.Fatal(err)
				}
				condV := make([]bool, params[0].Size())
				for i := range condV {
					condV[i] = r.Float64() < c.condProb
				}
				offV := make([]float32, params[1].Size())
				for i := range offV {
					offV[i] = float32(r.IntN(1000))
				}
				onV := offV
				if !c.sameOnAndOff {
					onV = make([]float32, params[2].Size())
					for i := range onV {
						onV[i] = -float32(r.IntN(1000)) - 1
					}
				}
				onS := params[len(params)-1]
				// Reference: each output element from its operands' indices,
				// broadcast axes read at 0.
				want := make([]float32, outS.Size())
				at := func(dims []int, idx []int) int {
					o := 0
					for a, d := range dims {
						i := idx[a]
						if d == 1 {
							i = 0
						}
						o = o*d + i
					}
					return o
				}
				idx := make([]int, len(c.out))
				for e := range want {
					for a, rem := len(c.out)-1, e; a >= 0; a-- {
						idx[a] = rem % c.out[a]
						rem /= c.out[a]
					}
					if condV[at(c.cond, idx)] {
						want[e] = onV[at(onS.Dimensions, idx)]
					} else {
						want[e] = offV[at(c.off, idx)]
					}
				}
				mk := func(v any, s shapes.Shape) compute.Buffer {
					buf, err := b.BufferFromFlatData(0, v, s)
					if err != nil {
						t.Fatal(err)
					}
					return buf
				}
				inputs := []compute.Buffer{mk(condV, params[0]), mk(append([]float32(nil), offV...), params[1])}
				if !c.sameOnAndOff {
					inputs = append(inputs, mk(append([]float32(nil), onV...), params[2]))
				}
				var donated *Buffer
				flags := make([]bool, len(inputs))
				if donate {
					i := 1 // off
					if c.donate == 1 && !c.sameOnAndOff {
						i = 2
					}
					flags[i] = true
					donated = inputs[i].(*Buffer)
				}
				var donatedFlat []float32
				if donated != nil {
					donatedFlat = donated.flat.([]float32)
				}
				outs, err := exe.Execute(inputs, flags, 0)
				if err != nil {
					t.Fatal(err)
				}
				got := outs[0].(*Buffer).flat.([]float32)
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("element %d: got %v, want %v", i, got[i], want[i])
					}
				}
				// A donated operand of the output's shape is taken over.
				if donated != nil && len(got) > 0 && shapes.Make(dtypes.Float32, c.out...).Equal(donated.shape) && &got[0] != &donatedFlat[0] {
					t.Fatal("the donated operand's memory was not reused")
				}
				p := makePlan(outS, params[0], onS, params[1])
				if fast := p.inStep[0] == 0; fast != c.wantsFastRoute {
					t.Fatalf("condition constant along rows: %v, the case says %v", fast, c.wantsFastRoute)
				}
			})
		}
	}
}

// BenchmarkWhereCacheUpdate: a decode step's cache update, the new K of
// one position written into a donated [B, 8, 352, 128] cache by a Where
// over a position mask.
func BenchmarkWhereCacheUpdate(b *testing.B) {
	for _, batch := range []int{1, 32} {
		b.Run(fmt.Sprintf("b%d", batch), func(b *testing.B) {
			const T, heads, dh = 352, 8, 128
			be, err := New("")
			if err != nil {
				b.Fatal(err)
			}
			bldB := be.Builder("cache")
			bld := bldB.Main()
			must := func(o compute.Value, err error) compute.Value {
				if err != nil {
					b.Fatal(err)
				}
				return o
			}
			full := []int{batch, heads, T, dh}
			cond := must(bld.Parameter("at", shapes.Make(dtypes.Bool, batch, 1, T, 1), nil))
			k := must(bld.Parameter("k", shapes.Make(dtypes.Float32, batch, heads, 1, dh), nil))
			cache := must(bld.Parameter("cache", shapes.Make(dtypes.Float32, full...), nil))
			y := must(bld.Where(must(bld.BroadcastInDim(cond, shapes.Make(dtypes.Bool, full...), []int{0, 1, 2, 3})),
				must(bld.BroadcastInDim(k, shapes.Make(dtypes.Float32, full...), []int{0, 1, 2, 3})), cache))
			if err := bld.Return([]compute.Value{y}, nil); err != nil {
				panic(err)
			}
			exe, err := bldB.Compile()
			if err != nil {
				b.Fatal(err)
			}
			at := make([]bool, batch*T)
			for i := range batch {
				at[i*T+40+i] = true
			}
			c, _ := be.BufferFromFlatData(0, at, shapes.Make(dtypes.Bool, batch, 1, T, 1))
			kb, _ := be.BufferFromFlatData(0, make([]float32, batch*heads*dh), shapes.Make(dtypes.Float32, batch, heads, 1, dh))
			cb, _ := be.BufferFromFlatData(0, make([]float32, batch*heads*T*dh), shapes.Make(dtypes.Float32, full...))
			for b.Loop() {
				out, err := exe.Execute([]compute.Buffer{c, kb, cb}, []bool{false, false, true}, 0)
				if err != nil {
					b.Fatal(err)
				}
				cb = out[0]
			}
		})
	}
}
