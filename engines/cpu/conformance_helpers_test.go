package cpu_test

// Harness for the conformance tests (conformance_test.go): random arrays,
// running a graph (through GoMLX's graph package or directly through a
// compute.Function) on both our engine and GoMLX's pure-Go engine, and
// comparing the results with dtype-appropriate tolerances.

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/gobackend"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/cde-rl/cde/engines/cpu"
)

const (
	f32  = dtypes.Float32
	f64  = dtypes.Float64
	i32  = dtypes.Int32
	i64  = dtypes.Int64
	u8   = dtypes.Uint8
	boo  = dtypes.Bool
	seed = 20240611
)

var (
	enginesOnce      sync.Once
	oursBE, refBE    compute.Backend
	enginesCreateErr error
)

// engines returns our backend and the reference (simplego, sequential ops).
func engines(t testing.TB) (ours, ref compute.Backend) {
	t.Helper()
	enginesOnce.Do(func() {
		oursBE, enginesCreateErr = cpu.New("")
		if enginesCreateErr != nil {
			return
		}
		refBE, enginesCreateErr = gobackend.New("ops_sequential")
	})
	if enginesCreateErr != nil {
		t.Fatalf("creating backends: %v", enginesCreateErr)
	}
	return oursBE, refBE
}

// newRNG returns a fixed-seed generator, different for each test name so
// that adding or reordering cases elsewhere does not change a case's data.
func newRNG(t testing.TB) *gen {
	h := fnv.New64a()
	h.Write([]byte(t.Name()))
	return &gen{rand.New(rand.NewPCG(seed, h.Sum64()))}
}

// arr is a dense array: dtype, dimensions and a flat Go slice ([]T).
type arr struct {
	dt   dtypes.DType
	dims []int
	flat any
}

func (a arr) shape() shapes.Shape { return shapes.Make(a.dt, a.dims...) }
func (a arr) size() int           { return a.shape().Size() }
func (a arr) String() string      { return a.dt.String() + dimsStr(a.dims) }

func dimsStr(dims []int) string {
	if len(dims) == 0 {
		return "[]"
	}
	s := make([]string, len(dims))
	for i, d := range dims {
		s[i] = fmt.Sprint(d)
	}
	return "[" + strings.Join(s, ",") + "]"
}

func dtName(dt dtypes.DType) string {
	switch dt {
	case f32:
		return "f32"
	case f64:
		return "f64"
	case i32:
		return "i32"
	case i64:
		return "i64"
	case u8:
		return "u8"
	case boo:
		return "bool"
	}
	return dt.String()
}

// dist selects the distribution of random values.
type dist int

const (
	dAny     dist = iota // floats U[-3,3]; signed ints U[-50,50]; unsigned U[0,100]
	dPos                 // floats U[0.1,4]; ints U[1,20]
	dNonZero             // floats ±U[0.5,3]; ints ±U[1,20] (unsigned U[1,20])
	dTies                // few distinct values: floats k/2 for k in [-4,4]; ints [-3,3] (unsigned [0,6])
	dNearOne             // floats U[0.6,1.4]; ints in {-1,1,1,2} (products that do not blow up)
	dUnit                // floats U[-1,1]; ints U[-8,8] (dot products, long sums)
	dByte                // floats U[0,250); ints U[-300,300] (conversions)
	dGT1                 // floats U[-0.9,3] (Log1p's domain)
)

type gen struct{ r *rand.Rand }

func (g *gen) value(d dist, isInt, unsigned bool) float64 {
	r := g.r
	if isInt {
		var v int
		switch d {
		case dPos:
			v = 1 + r.IntN(20)
		case dNonZero:
			v = 1 + r.IntN(20)
			if !unsigned && r.IntN(2) == 0 {
				v = -v
			}
		case dTies:
			v = r.IntN(7) - 3
		case dNearOne:
			v = []int{-1, 1, 1, 2}[r.IntN(4)]
		case dUnit:
			v = r.IntN(17) - 8
		case dByte:
			v = r.IntN(601) - 300
		default:
			v = r.IntN(101) - 50
		}
		if unsigned && v < 0 {
			v = -v
		}
		return float64(v)
	}
	switch d {
	case dPos:
		return 0.1 + 3.9*r.Float64()
	case dNonZero:
		v := 0.5 + 2.5*r.Float64()
		if r.IntN(2) == 0 {
			v = -v
		}
		return v
	case dTies:
		return float64(r.IntN(9)-4) / 2
	case dNearOne:
		return 0.6 + 0.8*r.Float64()
	case dUnit:
		return 2*r.Float64() - 1
	case dByte:
		return 250 * r.Float64()
	case dGT1:
		return -0.9 + 3.9*r.Float64()
	}
	return 6*r.Float64() - 3
}

// arr returns a random array of the given dtype and dims.
func (g *gen) arr(dt dtypes.DType, d dist, dims ...int) arr {
	n := shapes.Make(dt, dims...).Size()
	if dt == boo {
		b := make([]bool, n)
		for i := range b {
			b[i] = g.r.IntN(2) == 1
		}
		return arr{dt, dims, b}
	}
	vs := make([]float64, n)
	for i := range vs {
		vs[i] = g.value(d, dt.IsInt(), dt.IsUnsigned())
	}
	return fromFloats(dt, vs, dims...)
}

// ints returns an integer array with values uniform in [lo, hi].
func (g *gen) ints(dt dtypes.DType, lo, hi int, dims ...int) arr {
	n := shapes.Make(dt, dims...).Size()
	vs := make([]float64, n)
	for i := range vs {
		vs[i] = float64(lo + g.r.IntN(hi-lo+1))
	}
	return fromFloats(dt, vs, dims...)
}

func convertSlice[T interface {
	~float32 | ~float64 | ~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64
}](vs []float64) []T {
	out := make([]T, len(vs))
	for i, v := range vs {
		out[i] = T(v)
	}
	return out
}

// fromFloats builds an array of dt from float64 values (exact for the
// small integers the tests use).
func fromFloats(dt dtypes.DType, vs []float64, dims ...int) arr {
	var flat any
	switch dt {
	case f32:
		flat = convertSlice[float32](vs)
	case f64:
		flat = convertSlice[float64](vs)
	case i32:
		flat = convertSlice[int32](vs)
	case i64:
		flat = convertSlice[int64](vs)
	case dtypes.Int8:
		flat = convertSlice[int8](vs)
	case dtypes.Int16:
		flat = convertSlice[int16](vs)
	case u8:
		flat = convertSlice[uint8](vs)
	case dtypes.Uint16:
		flat = convertSlice[uint16](vs)
	case dtypes.Uint32:
		flat = convertSlice[uint32](vs)
	case dtypes.Uint64:
		flat = convertSlice[uint64](vs)
	case boo:
		b := make([]bool, len(vs))
		for i, v := range vs {
			b[i] = v != 0
		}
		flat = b
	default:
		panic(fmt.Sprintf("fromFloats: dtype %s", dt))
	}
	if len(vs) != shapes.Make(dt, dims...).Size() {
		panic(fmt.Sprintf("fromFloats: %d values for dims %v", len(vs), dims))
	}
	return arr{dt, dims, flat}
}

// toFloats returns the array's values as float64 (bools as 0/1).
func toFloats(a arr) []float64 {
	v := reflect.ValueOf(a.flat)
	out := make([]float64, v.Len())
	for i := range out {
		e := v.Index(i)
		switch e.Kind() {
		case reflect.Bool:
			if e.Bool() {
				out[i] = 1
			}
		case reflect.Float32, reflect.Float64:
			out[i] = e.Float()
		case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int:
			out[i] = float64(e.Int())
		default:
			out[i] = float64(e.Uint())
		}
	}
	return out
}

func cloneSlice(flat any) any {
	v := reflect.ValueOf(flat)
	c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
	reflect.Copy(c, v)
	return c.Interface()
}

func makeSlice(dt dtypes.DType, n int) any {
	return reflect.MakeSlice(reflect.SliceOf(dt.GoType()), n, n).Interface()
}

func toTensor(a arr) *tensors.Tensor {
	t := tensors.FromShape(a.shape())
	err := t.MutableFlatData(func(flat any) { reflect.Copy(reflect.ValueOf(flat), reflect.ValueOf(a.flat)) })
	if err != nil {
		panic(err)
	}
	return t
}

func fromTensor(t *tensors.Tensor) arr {
	s := t.Shape()
	a := arr{dt: s.DType, dims: append([]int{}, s.Dimensions...)}
	if err := t.ConstFlatData(func(flat any) { a.flat = cloneSlice(flat) }); err != nil {
		panic(err)
	}
	return a
}

// graphFn builds outputs from the parameters, with GoMLX's graph package.
type graphFn func(g *Graph, xs []*Node) []*Node

// builderFn builds outputs from the parameters directly on a backend builder.
type builderFn func(b compute.Function, xs []compute.Value) ([]compute.Value, error)

// execGraph builds fn on be, compiles it and runs it `runs` times on the
// inputs. Panics (GoMLX graph building reports errors by panicking) become
// errors.
func execGraph(be compute.Backend, ins []arr, fn graphFn, runs int) (outs [][]arr, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	g := NewGraph(be, "conformance")
	defer g.Finalize()
	xs := make([]*Node, len(ins))
	for i, in := range ins {
		xs[i] = Parameter(g, fmt.Sprintf("x%d", i), in.shape())
	}
	g.Compile(fn(g, xs)...)
	for range runs {
		args := make([]any, len(ins))
		for i, in := range ins {
			args[i] = toTensor(in)
		}
		ts := g.Run(args...)
		res := make([]arr, len(ts))
		for i, t := range ts {
			res[i] = fromTensor(t)
			_ = t.FinalizeAll()
		}
		outs = append(outs, res)
	}
	return outs, nil
}

// execBuilder is execGraph through the compute.Function API directly.
func execBuilder(be compute.Backend, ins []arr, fn builderFn, runs int) (outs [][]arr, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	bB := be.Builder("conformance")
	b := bB.Main()
	xs := make([]compute.Value, len(ins))
	for i, in := range ins {
		if xs[i], err = b.Parameter(fmt.Sprintf("x%d", i), in.shape(), nil); err != nil {
			return nil, err
		}
	}
	ops, err := fn(b, xs)
	if err != nil {
		return nil, err
	}
	if err := b.Return(ops, nil); err != nil {
		panic(err)
	}
	exe, err := bB.Compile()
	if err != nil {
		return nil, err
	}
	defer exe.Finalize()
	for range runs {
		bufs := make([]compute.Buffer, len(ins))
		for i, in := range ins {
			if bufs[i], err = be.BufferFromFlatData(0, in.flat, in.shape()); err != nil {
				return nil, err
			}
		}
		res, err := exe.Execute(bufs, nil, 0)
		if err != nil {
			return nil, err
		}
		row := make([]arr, len(res))
		for i, r := range res {
			s, err := r.Shape()
			if err != nil {
				return nil, err
			}
			flat := makeSlice(s.DType, s.Size())
			if err := r.ToFlatData(flat); err != nil {
				return nil, err
			}
			row[i] = arr{s.DType, append([]int{}, s.Dimensions...), flat}
			_ = r.Finalize()
		}
		for _, buf := range bufs {
			_ = buf.Finalize()
		}
		outs = append(outs, row)
	}
	return outs, nil
}

// tol is the allowed difference for floats: |got-want| <= abs + rel*|want|.
type tol struct{ rel, abs float64 }

// tolFor returns the tolerance for dtype dt for values that accumulate k
// terms (k=1: elementwise).
func tolFor(dt dtypes.DType, k int) tol {
	s := math.Sqrt(float64(max(k, 1)))
	switch dt {
	case f32:
		if k <= 1 {
			return tol{rel: 1e-5, abs: 1e-6}
		}
		return tol{rel: 1e-5 * s, abs: 1e-5 * s}
	case f64:
		if k <= 1 {
			return tol{rel: 1e-12, abs: 1e-13}
		}
		return tol{rel: 1e-12 * s, abs: 1e-12 * s}
	}
	return tol{}
}

var exact = tol{}

// unravel returns the multi-index of flat index i in dims.
func unravel(i int, dims []int) []int {
	idx := make([]int, len(dims))
	for a := len(dims) - 1; a >= 0; a-- {
		if dims[a] > 0 {
			idx[a] = i % dims[a]
			i /= dims[a]
		}
	}
	return idx
}

// compareArr returns "" if got matches want, else a description of the
// mismatch (dtype, shape, or up to 5 differing elements and their count).
func compareArr(want, got arr, tl tol) string {
	if want.dt != got.dt || !equalInts(want.dims, got.dims) {
		return fmt.Sprintf("shape: want %s, got %s", want, got)
	}
	wf, gf := toFloats(want), toFloats(got)
	if len(wf) != len(gf) {
		return fmt.Sprintf("length: want %d, got %d", len(wf), len(gf))
	}
	isFloat := want.dt.IsFloat()
	var msgs []string
	bad, worst := 0, 0.0
	for i := range wf {
		w, g := wf[i], gf[i]
		ok := w == g
		if !ok && isFloat {
			switch {
			case math.IsNaN(w) || math.IsNaN(g):
				ok = math.IsNaN(w) && math.IsNaN(g)
			case math.IsInf(w, 0) || math.IsInf(g, 0):
				ok = false
			default:
				d := math.Abs(g - w)
				ok = d <= tl.abs+tl.rel*math.Abs(w)
				if !ok {
					worst = max(worst, d/(tl.abs+tl.rel*math.Abs(w)))
				}
			}
		}
		if !ok {
			bad++
			if len(msgs) < 5 {
				msgs = append(msgs, fmt.Sprintf("at %v (flat %d): want %v, got %v", unravel(i, want.dims), i, w, g))
			}
		}
	}
	if bad == 0 {
		return ""
	}
	s := fmt.Sprintf("%s: %d of %d elements differ", want, bad, len(wf))
	if worst > 0 {
		s += fmt.Sprintf(" (worst %.3g× tolerance %+v)", worst, tl)
	}
	return s + ":\n\t" + strings.Join(msgs, "\n\t")
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// shortErr trims long errors (our executor attaches a stack trace).
func shortErr(err error) string {
	s := err.Error()
	if len(s) > 3000 {
		s = s[:3000] + "…"
	}
	return s
}

func describeInputs(ins []arr) string {
	s := make([]string, len(ins))
	for i, in := range ins {
		s[i] = in.String()
	}
	return strings.Join(s, ", ")
}

// compareRuns checks every run of ours against the reference outputs.
func compareRuns(t *testing.T, ins []arr, want []arr, got [][]arr, tl tol) {
	t.Helper()
	for r, row := range got {
		if len(row) != len(want) {
			t.Errorf("run %d: %d outputs, reference has %d", r, len(row), len(want))
			continue
		}
		for i := range want {
			if msg := compareArr(want[i], row[i], tl); msg != "" {
				t.Errorf("inputs (%s): run %d, output %d: %s", describeInputs(ins), r, i, msg)
			}
		}
	}
}

// checkGraph runs fn through the graph package on both engines (ours
// twice, to catch state leaking between executions) and compares.
func checkGraph(t *testing.T, ins []arr, tl tol, fn graphFn) {
	t.Helper()
	ours, ref := engines(t)
	want, err := execGraph(ref, ins, fn, 1)
	if err != nil {
		t.Fatalf("reference engine failed (test bug?): %s", shortErr(err))
	}
	got, err := execGraph(ours, ins, fn, 2)
	if err != nil {
		t.Fatalf("cpu engine failed on inputs (%s): %s", describeInputs(ins), shortErr(err))
	}
	compareRuns(t, ins, want[0], got, tl)
}

// checkBuilder is checkGraph through compute.Function directly.
func checkBuilder(t *testing.T, ins []arr, tl tol, fn builderFn) {
	t.Helper()
	ours, ref := engines(t)
	want, err := execBuilder(ref, ins, fn, 1)
	if err != nil {
		t.Fatalf("reference engine failed (test bug?): %s", shortErr(err))
	}
	got, err := execBuilder(ours, ins, fn, 2)
	if err != nil {
		t.Fatalf("cpu engine failed on inputs (%s): %s", describeInputs(ins), shortErr(err))
	}
	compareRuns(t, ins, want[0], got, tl)
}

// checkBuilderExpect runs fn on our engine only and compares with want
// (for ops the reference engine lacks or gets wrong).
func checkBuilderExpect(t *testing.T, ins []arr, tl tol, fn builderFn, want ...arr) {
	t.Helper()
	ours, _ := engines(t)
	got, err := execBuilder(ours, ins, fn, 2)
	if err != nil {
		t.Fatalf("cpu engine failed on inputs (%s): %s", describeInputs(ins), shortErr(err))
	}
	compareRuns(t, ins, want, got, tl)
}

// checkGraphExpect is checkBuilderExpect through the graph package.
func checkGraphExpect(t *testing.T, ins []arr, tl tol, fn graphFn, want ...arr) {
	t.Helper()
	ours, _ := engines(t)
	got, err := execGraph(ours, ins, fn, 2)
	if err != nil {
		t.Fatalf("cpu engine failed on inputs (%s): %s", describeInputs(ins), shortErr(err))
	}
	compareRuns(t, ins, want, got, tl)
}

// permutations returns all permutations of 0..n-1 in lexicographic order.
func permutations(n int) [][]int {
	var out [][]int
	var rec func(prefix []int, used []bool)
	rec = func(prefix []int, used []bool) {
		if len(prefix) == n {
			out = append(out, append([]int{}, prefix...))
			return
		}
		for i := range n {
			if !used[i] {
				used[i] = true
				rec(append(prefix, i), used)
				used[i] = false
			}
		}
	}
	rec(nil, make([]bool, n))
	return out
}

// subsets returns every non-empty subset of 0..n-1, each sorted.
func subsets(n int) [][]int {
	var out [][]int
	for m := 1; m < 1<<n; m++ {
		var s []int
		for i := range n {
			if m&(1<<i) != 0 {
				s = append(s, i)
			}
		}
		out = append(out, s)
	}
	return out
}

func strides(dims []int) []int {
	s := make([]int, len(dims))
	acc := 1
	for a := len(dims) - 1; a >= 0; a-- {
		s[a] = acc
		acc *= dims[a]
	}
	return s
}

func one(xs ...*Node) []*Node { return xs }

// isRef reports whether g is being built for the reference engine (for
// the few cases where the reference needs the same math spelled differently).
func isRef(g *Graph) bool { return g.Backend() == refBE }
