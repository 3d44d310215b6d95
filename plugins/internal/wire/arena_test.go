//go:build linux

package wire

import (
	"slices"
	"testing"
	"unsafe"

	"github.com/cde-rl/cde/core"
)

// inMapping reports whether v lies wholly in mem.
func inMapping(v []float64, mem []byte) bool {
	if len(v) == 0 {
		return false
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(v)))
	return p >= lo && p+8*uintptr(len(v)) <= lo+uintptr(len(mem))
}

// The arena: a step's columns allocated in it reach the plugin without a
// copy (the plugin's views lie in its mapping of the arena region), the
// other arrays are copied into it, the numbers are those of the messages,
// and a change the trainer makes in place is what the plugin reads next.
func TestShmArena(t *testing.T) {
	a := NewArena()
	defer a.Close()
	h, c := newPair(t)
	h.UseArena(a)
	want := func(r *core.Rollout) *core.Rollout {
		msg, err := EncodeBatch(core.StepInfo{Step: 2}, r, allNeeds)
		if err != nil {
			t.Fatal(err)
		}
		_, w, err := DecodeBatch(msg)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}

	// The first step: no region yet, the columns come from the heap and
	// the batch goes through the host's own region.
	r0 := shmRollout(1, 7, 3)
	r0.Alloc = a
	r0.Pack()
	if a.Heap == 0 || a.Size() != 0 {
		t.Fatalf("before the first Reset: heap %d, region %d; want heap > 0 and no region", a.Heap, a.Size())
	}
	_, got := viaShm(t, h, c, r0)
	bitsEqual(t, want(r0), got)
	if h.InPlace != 0 {
		t.Fatalf("%d bytes in place without a region", h.InPlace)
	}

	// The next step: the region fits what the first asked for.
	if err := a.Reset(); err != nil {
		t.Fatal(err)
	}
	r := shmRollout(1, 7, 3)
	r.Alloc = a
	heap := a.Heap
	r.Pack()
	if a.Heap != heap || a.Size() == 0 {
		t.Fatalf("after Reset: %d more heap bytes, region %d; want none and a region", a.Heap-heap, a.Size())
	}
	w0 := h.Written
	b, got := viaShm(t, h, c, r)
	bitsEqual(t, want(r), got)
	if b.Shm.Input.Id != a.cur.ID {
		t.Fatal("the batch does not name the arena's region")
	}
	// Six per-token columns (log-probs, entropies, advantages, advantage
	// bonuses, returns: T each; values: 3T) in place; prompts, responses
	// and embeddings copied.
	T, P := r.NumTokens(), 0
	for i := range r.Seqs {
		P += len(r.Seqs[i].Prompt)
	}
	if wantIn := int64(8 * (5*T + 3*T)); h.InPlace != wantIn {
		t.Fatalf("in place %d bytes, want %d", h.InPlace, wantIn)
	}
	for i, s := range got.Seqs {
		if !inMapping(s.LogProbs, c.in.Mem) || !inMapping(s.Values, c.in.Mem) || !inMapping(s.Advantages, c.in.Mem) {
			t.Fatalf("sequence %d: the plugin's views are not in its mapping of the arena", i)
		}
	}
	written := h.Written
	if written-w0 != int64(4*(P+T)+8*3*len(r.Seqs)) {
		t.Fatalf("written %d bytes, want %d (prompts, responses, embeddings)", written-w0, 4*(P+T)+8*3*len(r.Seqs))
	}
	// The trainer adds to the advantages in place: the plugin reads the
	// new value, and the array has a new generation; the copied arrays are
	// found unchanged.
	gen := map[int32]uint64{}
	for _, arr := range b.Shm.Arrays {
		gen[arr.Field] = arr.Generation
	}
	r.Seqs[4].Advantages[0] += 1.5
	b2, got2 := viaShm(t, h, c, r)
	bitsEqual(t, want(r), got2)
	if got2.Seqs[4].Advantages[0] != r.Seqs[4].Advantages[0] {
		t.Fatal("the plugin did not see the change made in place")
	}
	for _, arr := range b2.Shm.Arrays {
		if arr.Generation == gen[arr.Field] {
			t.Fatalf("field %d kept generation %d although arena content may change in place", arr.Field, arr.Generation)
		}
	}
	if h.Written != written {
		t.Fatalf("a later hook of the step wrote %d bytes again", h.Written-written)
	}

	// A batch larger than the region: its columns come from the heap, and
	// it goes through the host's own region, with the same numbers.
	big := shmRollout(2, 5000, 3) // about 25,000 tokens: 1.6 MB of columns
	big.Alloc = a
	big.Pack()
	_, gotBig := viaShm(t, h, c, big)
	bitsEqual(t, want(big), gotBig)
	// The next Reset grows the region to fit it.
	size := a.Size()
	if err := a.Reset(); err != nil {
		t.Fatal(err)
	}
	if a.Size() <= size {
		t.Fatalf("region %d after a step that asked for more than %d", a.Size(), size)
	}
}

// gather: rows already in place are left alone, rows elsewhere copied, and
// rows of dst's own memory in another order are read before any write.
func TestGather(t *testing.T) {
	dst := []float64{1, 2, 3, 4, 5}
	gather(dst, [][]float64{dst[0:2:2], nil, dst[2:5:5]})
	if want := []float64{1, 2, 3, 4, 5}; !slices.Equal(dst, want) {
		t.Fatalf("in place: %v, want %v", dst, want)
	}
	gather(dst, [][]float64{{9, 8}, {}, {7, 6, 5}})
	if want := []float64{9, 8, 7, 6, 5}; !slices.Equal(dst, want) {
		t.Fatalf("from the heap: %v, want %v", dst, want)
	}
	// Swapped: the row of 3 first, from dst[2:5], then dst[0:2].
	gather(dst, [][]float64{dst[2:5:5], dst[0:2:2]})
	if want := []float64{7, 6, 5, 9, 8}; !slices.Equal(dst, want) {
		t.Fatalf("rows of dst reordered: %v, want %v", dst, want)
	}
}
