package core

import (
	"math"
	"runtime"
	"testing"
)

// countingAlloc hands out blocks from the Go heap and records the sizes
// asked for.
type countingAlloc struct{ sizes []int }

func (a *countingAlloc) Float64s(n int) []float64 {
	a.sizes = append(a.sizes, n)
	return make([]float64, n)
}

// lens makes a rollout of sequences with these response lengths.
func lens(ts ...int) *Rollout {
	r := &Rollout{}
	for _, t := range ts {
		r.Seqs = append(r.Seqs, Sequence{Response: make([]int32, t)})
	}
	return r
}

func TestOffsetsAndTokenRows(t *testing.T) {
	r := lens(2, 0, 3)
	if got := r.Offsets(); len(got) != 4 || got[0] != 0 || got[1] != 2 || got[2] != 2 || got[3] != 5 {
		t.Fatalf("Offsets = %v, want [0 2 2 5]", got)
	}
	block, rows := r.TokenRows(2)
	if len(block) != 10 || len(rows) != 3 || len(rows[0]) != 4 || len(rows[1]) != 0 || len(rows[2]) != 6 {
		t.Fatalf("block %d, rows %d/%d/%d; want 10 and 4/0/6", len(block), len(rows[0]), len(rows[1]), len(rows[2]))
	}
	rows[2][5] = 7
	if block[9] != 7 {
		t.Fatal("a row is not a window of the block")
	}
	// Capacity-limited: appending to row 0 must not write into row 2.
	rows[0] = append(rows[0], 99)
	if block[4] != 0 {
		t.Fatal("append to a window wrote into the next sequence's tokens")
	}
}

func TestNewColumnUsesAlloc(t *testing.T) {
	a := &countingAlloc{}
	r := lens(3, 1)
	r.Alloc = a
	block := r.NewColumn(1, func(s *Sequence) *[]float64 { return &s.Advantages })
	if len(a.sizes) != 1 || a.sizes[0] != 4 || len(block) != 4 {
		t.Fatalf("allocator asked for %v, block of %d; want [4] and 4", a.sizes, len(block))
	}
	r.Seqs[1].Advantages[0] = 5
	if block[3] != 5 {
		t.Fatal("sequence 1's advantages are not the block's last entry")
	}
}

func TestColumn(t *testing.T) {
	get := func(s *Sequence) []float64 { return s.LogProbs }
	field := func(s *Sequence) *[]float64 { return &s.LogProbs }

	r := lens(2, 0, 3)
	r.NewColumn(1, field)
	if c, ok := r.Column(1, get); !ok || len(c) != 5 || &c[0] != &r.Seqs[0].LogProbs[0] || &c[2] != &r.Seqs[2].LogProbs[0] {
		t.Fatalf("a column made by NewColumn: ok %v, %d entries", ok, len(c))
	}
	// The same windows seen from a rollout that did not make the block
	// (decoded, or copied without it) are not reported as one: only a
	// block this rollout allocated is known to be one allocation.
	if _, ok := (&Rollout{Seqs: r.Seqs}).Column(1, get); ok {
		t.Error("windows of a block another rollout made reported as a column")
	}
	// Rows of their own: not a column.
	own := lens(2, 3)
	own.Seqs[0].LogProbs, own.Seqs[1].LogProbs = []float64{1, 2}, []float64{3, 4, 5}
	if _, ok := own.Column(1, get); ok {
		t.Error("separate slices reported as one column")
	}
	// A reordered batch: the windows are no longer in sequence order.
	r.Seqs[0], r.Seqs[2] = r.Seqs[2], r.Seqs[0]
	if _, ok := r.Column(1, get); ok {
		t.Error("a reordered batch reported as one column")
	}
	// A sequence without the signal.
	part := lens(2, 2)
	part.NewColumn(1, field)
	part.Seqs[1].LogProbs = nil
	if _, ok := part.Column(1, get); ok {
		t.Error("a batch with a sequence missing the signal reported as one column")
	}
	// Wrong width.
	w := lens(2)
	w.NewColumn(2, field)
	if _, ok := w.Column(1, get); ok {
		t.Error("a width-2 column read as width 1")
	}
}

func TestPack(t *testing.T) {
	nan := math.NaN()
	r := &Rollout{ValueHeads: 2, Seqs: []Sequence{
		{Response: []int32{1, 2}, LogProbs: []float64{-1, nan}, Values: []float64{1, 2, 3, 4}, Entropies: []float64{0.5, 0.25}},
		{Response: nil},
		{Response: []int32{3}, LogProbs: []float64{math.Copysign(0, -1)}, Values: []float64{5, 6}},
	}}
	a := &countingAlloc{}
	r.Alloc = a
	r.Pack()
	lp, ok := r.Column(1, func(s *Sequence) []float64 { return s.LogProbs })
	if !ok || len(lp) != 3 || lp[0] != -1 || !math.IsNaN(lp[1]) || math.Float64bits(lp[2]) != math.Float64bits(math.Copysign(0, -1)) {
		t.Fatalf("log-probs after Pack: ok %v %v", ok, lp)
	}
	v, ok := r.Column(2, func(s *Sequence) []float64 { return s.Values })
	if !ok || len(v) != 6 || v[0] != 1 || v[3] != 4 || v[4] != 5 || v[5] != 6 {
		t.Fatalf("values after Pack: ok %v %v", ok, v)
	}
	// Entropies are missing on sequence 2: left as they were.
	if r.Seqs[2].Entropies != nil || len(r.Seqs[0].Entropies) != 2 {
		t.Fatal("Pack changed a signal some sequence lacks")
	}
	if len(a.sizes) != 2 || a.sizes[0] != 3 || a.sizes[1] != 6 {
		t.Fatalf("allocator asked for %v, want [3 6] (log-probs, then values)", a.sizes)
	}
	// A second Pack finds the columns made and allocates nothing.
	r.Pack()
	if len(a.sizes) != 2 {
		t.Fatalf("a second Pack allocated %v", a.sizes[2:])
	}
	// Row views.
	s := &r.Seqs[0]
	if s.Heads() != 2 || s.ValueRow(1)[0] != 3 || s.ValueRow(1)[1] != 4 || len(s.ValueRow(1)) != 2 || cap(s.ValueRow(1)) != 2 {
		t.Fatalf("Heads %d, ValueRow(1) %v", s.Heads(), s.ValueRow(1))
	}
	if s.MaskRow(0) != nil {
		t.Fatal("MaskRow of a sequence without masks is not nil")
	}
	s.HeadMask = []float64{1, 0, 0, 1}
	if m := s.MaskRow(1); len(m) != 2 || m[0] != 0 || m[1] != 1 {
		t.Fatalf("MaskRow(1) = %v, want [0 1]", m)
	}
}

// BenchmarkValuesMemory: the heap bytes of the critic values of a
// 2048 x 3072-token batch with 16 heads, one column (805,306,368 bytes of
// float64 and the sequences' window headers), reported as values-bytes:
//
//	go test ./core -run '^$' -bench ValuesMemory -benchtime 1x
func BenchmarkValuesMemory(b *testing.B) {
	for b.Loop() {
		var m0, m1 runtime.MemStats
		r := &Rollout{ValueHeads: 16, Seqs: make([]Sequence, 2048)}
		for i := range r.Seqs {
			r.Seqs[i].Response = make([]int32, 3072)
		}
		runtime.GC()
		runtime.ReadMemStats(&m0)
		r.NewColumn(16, func(s *Sequence) *[]float64 { return &s.Values })
		runtime.GC()
		runtime.ReadMemStats(&m1)
		b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc), "values-bytes")
		runtime.KeepAlive(r)
	}
}

func TestAllFinite(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	for _, c := range []struct {
		xs   []float64
		want bool
	}{
		{nil, true},
		{[]float64{1, -2, 0, math.Copysign(0, -1), math.MaxFloat64, -math.MaxFloat64, 5e-324}, true},
		{[]float64{1, 2, 3, 4, 5, inf}, false}, // in the tail after the groups of four
		{[]float64{-inf}, false},
		{[]float64{1, nan, 3, 4}, false},
		{[]float64{math.MaxFloat64, math.MaxFloat64, math.MaxFloat64, math.MaxFloat64}, true}, // x*0, never x+x
	} {
		if got := AllFinite(c.xs); got != c.want {
			t.Errorf("AllFinite(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
}
