package cpu

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
)

// The memory trace counts what an execution's intermediate values hold at
// once: x (an input, not counted) -> a = exp(x), 4,000 bytes -> b = [a, a],
// 8,000 more while a is alive: the peak is 12,000 bytes at b's node; then
// a dies and the 4-byte sum is made.
func TestMemTrace(t *testing.T) {
	defer func(on bool) { memStatsOn = on }(memStatsOn)
	memStatsOn = true
	var out bytes.Buffer
	defer func() { memStatsOut = nil }()
	memStatsOut = &out
	be, err := New("")
	if err != nil {
		t.Fatal(err)
	}
	must := func(v compute.Value, err error) compute.Value {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	bb := be.Builder("memtrace")
	f := bb.Main()
	x := must(f.Parameter("x", shapes.Make(dtypes.Float32, 1000), nil))
	a := must(f.Exp(x))
	b := must(f.Concatenate(0, a, a))
	s := must(f.ReduceSum(b, 0))
	if err := f.Return([]compute.Value{s}, nil); err != nil {
		t.Fatal(err)
	}
	exe, err := bb.Compile()
	if err != nil {
		t.Fatal(err)
	}
	in, err := be.BufferFromFlatData(0, make([]float32, 1000), shapes.Make(dtypes.Float32, 1000))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exe.Execute([]compute.Buffer{in}, nil, 0); err != nil {
		t.Fatal(err)
	}
	m := exe.(*Executable).pool.mem
	if m.peak != 12000 || m.live != 4 || m.fresh != 12004 {
		t.Errorf("peak %d (want 12000), live at the end %d (want 4: the output), fresh %d (want 12004)", m.peak, m.live, m.fresh)
	}
	if got := exe.(*Executable).order[m.peakPos].op; got != compute.OpTypeConcatenate {
		t.Errorf("peak at a %s node, want the Concatenate", got)
	}
	if !strings.Contains(out.String(), "0.0 MB Concatenate (Float32)[2000] (being made)\n  0.0 MB Exp (Float32)[1000]") {
		t.Errorf("report does not list the concatenation:\n%s", out.String())
	}
}
