package cpu_test

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/dtypes/bfloat16"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
)

const bf16 = dtypes.BFloat16

// ConvertDType to bfloat16 rounds to nearest, ties to even, on bit
// patterns worked out by hand; back to float32 it is exact (the top 16
// bits), on more values than one vector register holds plus a tail.
func TestBF16Convert(t *testing.T) {
	ours, _ := engines(t)
	cases := []struct{ in, want uint32 }{
		{0x3f800000, 0x3f80}, // 1
		{0x3f808000, 0x3f80}, // 1 + 2^-8: a tie, 0x3f80 is even
		{0x3f818000, 0x3f82}, // a tie, 0x3f81 is odd: up
		{0x3f808001, 0x3f81}, // just above the tie
		{0xbf80ffff, 0xbf81}, // negative, rounds away in magnitude
		{0x7f7fffff, 0x7f80}, // the largest float32 rounds to +Inf
		{0x7f800000, 0x7f80}, // +Inf
		{0x00000001, 0x0000}, // the smallest denormal rounds to 0
	}
	in := make([]float32, len(cases))
	for i, c := range cases {
		in[i] = math.Float32frombits(c.in)
	}
	outs, err := execGraph(ours, []arr{{dt: f32, dims: []int{len(in)}, flat: in}}, func(g *Graph, xs []*Node) []*Node {
		return []*Node{ConvertDType(xs[0], bf16)}
	}, 1)
	if err != nil {
		t.Fatal(err)
	}
	got := outs[0][0].flat.([]bfloat16.BFloat16)
	for i, c := range cases {
		if uint32(got[i]) != c.want {
			t.Errorf("%#08x -> %#04x, want %#04x", c.in, uint16(got[i]), c.want)
		}
	}
	nan, err := execGraph(ours, []arr{{dt: f32, dims: []int{1}, flat: []float32{float32(math.NaN())}}}, func(g *Graph, xs []*Node) []*Node {
		return []*Node{ConvertDType(ConvertDType(xs[0], bf16), f32)}
	}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if v := nan[0][0].flat.([]float32)[0]; v == v {
		t.Errorf("NaN -> bfloat16 -> float32 gave %v", v)
	}

	const n = 8*5 + 3
	raw := make([]bfloat16.BFloat16, n)
	for i := range raw {
		raw[i] = bfloat16.BFloat16(0x3c00 + 97*i) // spread over exponents, signs, mantissas
	}
	outs, err = execGraph(ours, []arr{{dt: bf16, dims: []int{n}, flat: raw}}, func(g *Graph, xs []*Node) []*Node {
		return []*Node{ConvertDType(xs[0], f32)}
	}, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range outs[0][0].flat.([]float32) {
		if want := math.Float32frombits(uint32(raw[i]) << 16); math.Float32bits(v) != math.Float32bits(want) {
			t.Fatalf("element %d: %#04x -> %v, want %v", i, uint16(raw[i]), v, want)
		}
	}
}

// A product reading a bfloat16 weight through ConvertDType (the engine
// widens it as it goes) equals, bit for bit, the product of a float32
// parameter holding the widened values, for a weight stored [out, in] (a
// projection's forward) and [in, out] (its backward), one row, a few and
// many, depths under and over gemm's block: every path of the product
// (direct loops, gemm's dot-product tiles reading bfloat16, gemm widening
// as it packs, split by rows and by columns); and both are within float32
// rounding of a float64 loop.
func TestBF16Product(t *testing.T) {
	ours, _ := engines(t)
	rng := newRNG(t)
	for _, kn := range [][2]int{{37, 70}, {37, 300}, {300, 300}} {
		for _, m := range []int{1, 3, 40} {
			for _, weightOutIn := range []bool{true, false} {
				k, n := kn[0], kn[1]
				wdims := []int{k, n}
				if weightOutIn {
					wdims = []int{n, k}
				}
				x := rng.arr(f32, dUnit, m, k)
				wb := make([]bfloat16.BFloat16, n*k)
				wf := make([]float32, n*k)
				for i := range wb {
					wb[i] = bfloat16.FromFloat32(float32(rng.r.NormFloat64()))
					wf[i] = wb[i].Float32()
				}
				product := func(xs0, w *Node) *Node {
					if weightOutIn {
						return DotGeneral(xs0, []int{1}, nil, w, []int{1}, nil)
					}
					return DotGeneral(xs0, []int{1}, nil, w, []int{0}, nil)
				}
				fused, err := execGraph(ours, []arr{x, {dt: bf16, dims: wdims, flat: wb}}, func(g *Graph, xs []*Node) []*Node {
					return []*Node{product(xs[0], ConvertDType(xs[1], f32))}
				}, 2)
				if err != nil {
					t.Fatal(err)
				}
				plain, err := execGraph(ours, []arr{x, {dt: f32, dims: wdims, flat: wf}}, func(g *Graph, xs []*Node) []*Node {
					return []*Node{product(xs[0], xs[1])}
				}, 1)
				if err != nil {
					t.Fatal(err)
				}
				xf := x.flat.([]float32)
				for run := range fused {
					got, want := fused[run][0].flat.([]float32), plain[0][0].flat.([]float32)
					for i := range m {
						for j := range n {
							var ref, abs float64
							for kk := range k {
								wv := wf[kk*n+j]
								if weightOutIn {
									wv = wf[j*k+kk]
								}
								ref += float64(xf[i*k+kk]) * float64(wv)
								abs += math.Abs(float64(xf[i*k+kk]) * float64(wv))
							}
							g := got[i*n+j]
							if math.Float32bits(g) != math.Float32bits(want[i*n+j]) || math.Abs(float64(g)-ref) > 1e-5*abs {
								t.Fatalf("k %d, n %d, m %d, [out,in] %v, run %d: [%d,%d] = %v, float32 weight %v, float64 loop %v",
									k, n, m, weightOutIn, run, i, j, g, want[i*n+j], ref)
							}
						}
					}
				}
			}
		}
	}
}

// bfloat16 buffers move like any other (gather, slice, concatenate,
// transpose), which an embedding lookup needs; arithmetic on them is
// refused with the dtype named.
func TestBF16MovesNotArithmetic(t *testing.T) {
	ours, _ := engines(t)
	emb := make([]bfloat16.BFloat16, 5*3)
	for i := range emb {
		emb[i] = bfloat16.FromFloat32(float32(i) + 0.5)
	}
	outs, err := execGraph(ours, []arr{{dt: bf16, dims: []int{5, 3}, flat: emb}, {dt: i32, dims: []int{2, 1}, flat: []int32{4, 1}}},
		func(g *Graph, xs []*Node) []*Node {
			rows := ConvertDType(Gather(xs[0], xs[1]), f32)                                                                                       // rows 4 and 1
			cat := Concatenate([]*Node{Slice(xs[0], AxisRange(0, 1)), TransposeAllAxes(Slice(xs[0], AxisRange(2, 3), AxisRange(0, 1)), 1, 0)}, 1) // [1,3] ++ [1,1]
			return []*Node{rows, ConvertDType(cat, f32)}
		}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := outs[0][0].flat.([]float32), []float32{12.5, 13.5, 14.5, 3.5, 4.5, 5.5}; !slices.Equal(got, want) {
		t.Errorf("gathered rows %v, want %v", got, want)
	}
	if got, want := outs[0][1].flat.([]float32), []float32{0.5, 1.5, 2.5, 6.5}; !slices.Equal(got, want) {
		t.Errorf("slices concatenated %v, want %v", got, want)
	}
	_, err = execGraph(ours, []arr{{dt: bf16, dims: []int{5, 3}, flat: emb}}, func(g *Graph, xs []*Node) []*Node {
		return []*Node{Add(xs[0], xs[0])}
	}, 1)
	if err == nil || !strings.Contains(err.Error(), "BFloat16") && !strings.Contains(err.Error(), "bfloat16") {
		t.Errorf("Add of bfloat16: err %v, want one naming the dtype", err)
	}
}
