package cpu

import (
	"math"
	"testing"

	"github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
)

// An executable keeps the buffers its run freed for its next run; when
// another executable starts and the idle pools hold more than
// idlePoolBytes, they are dropped. Results are unchanged either way.
func TestIdlePoolsReleasedOnSwitch(t *testing.T) {
	be, err := New("")
	if err != nil {
		t.Fatal(err)
	}
	b := be.(*Backend)
	// Two graphs with float32 temporaries of 4096 values (16 KiB) each.
	fa := graph.MustNewExec(be, func(x *graph.Node) *graph.Node {
		return graph.ReduceAllSum(graph.Mul(graph.AddScalar(x, 1), graph.AddScalar(x, 2)))
	})
	fb := graph.MustNewExec(be, func(x *graph.Node) *graph.Node {
		return graph.ReduceAllSum(graph.Sub(graph.MulScalar(x, 3), graph.AddScalar(x, 1)))
	})
	x := make([]float32, 4096)
	for i := range x {
		x[i] = float32(i%7) / 7
	}
	want := func(f func(v float64) float64) float32 {
		s := 0.0
		for _, v := range x {
			s += f(float64(v))
		}
		return float32(s)
	}
	wantA := want(func(v float64) float64 { return (v + 1) * (v + 2) })
	wantB := want(func(v float64) float64 { return 3*v - (v + 1) })
	call := func(f *graph.Exec, w float32) {
		t.Helper()
		got := tensors.MustCopyFlatData[float32](f.MustExec(tensors.FromFlatDataAndDimensions(x, len(x)))[0])[0]
		if math.Abs(float64(got-w)) > 1e-5*math.Abs(float64(w)) {
			t.Fatalf("got %v, want %v", got, w)
		}
	}
	held := func() (n int) {
		b.idle.mu.Lock()
		defer b.idle.mu.Unlock()
		for e := range b.idle.all {
			e.mu.Lock()
			if e.pool != nil {
				n += e.pool.bytes
			}
			e.mu.Unlock()
		}
		return n
	}
	defer func(v int) { idlePoolBytes = v }(idlePoolBytes)

	idlePoolBytes = 1 << 30 // far above: pools kept
	call(fa, wantA)
	call(fb, wantB)
	if h := held(); h < 2*4*4096 {
		t.Fatalf("pools hold %d bytes after two runs, want at least two 16 KiB buffers", h)
	}
	if b.idle.released != 0 {
		t.Fatalf("released %d times under a 1 GiB bound", b.idle.released)
	}

	idlePoolBytes = 1024 // below one buffer: a switch drops the others' pools
	call(fa, wantA)      // b's pool dropped
	if b.idle.released != 1 {
		t.Fatalf("released %d times after a switch, want 1", b.idle.released)
	}
	call(fa, wantA) // same executable again: nothing to do
	if b.idle.released != 1 {
		t.Fatalf("released %d times after a rerun, want 1", b.idle.released)
	}
	if h := held(); h > 4*4096*2 {
		t.Fatalf("pools hold %d bytes after the release, want fa's own only", h)
	}
	call(fb, wantB) // fa's pool dropped, fb runs from an empty pool
	call(fa, wantA)
	if b.idle.released != 3 {
		t.Fatalf("released %d times after two more switches, want 3", b.idle.released)
	}
}
