package wire

import (
	"sync"
	"unsafe"
)

// Arena is the host's shared-memory allocator of a step's columns
// (core.Allocator): the trainer allocates every per-token block of the
// step in one input region that every shared-memory plugin maps
// read-only, so a batch reaches the plugins without a copy. The region
// is sized from what the previous step asked for: a block that does not
// fit comes from the Go heap (and is copied at the hand-over, as without
// an arena), and the next Reset makes a region that fits.
//
// Blocks live until the next Reset: the trainer resets at the start of
// every step, when the previous step's batch is no longer read.
type Arena struct {
	mu  sync.Mutex
	cur *HostRegion
	// used is the bytes handed out of cur since the last Reset; asked the
	// bytes asked for (cur's or not), the size the next Reset makes room
	// for.
	used, asked int
	// retired are the regions replaced at the last Reset, closed at the
	// next (a step's grace for anything still reading them).
	retired []*HostRegion
	epoch   uint64
	// Heap counts the bytes asked for that came from the Go heap (the
	// region was missing or full); tests and benchmarks read it.
	Heap int64
}

// NewArena returns an arena with no region: the first step's blocks come
// from the heap, and its first Reset makes the region.
func NewArena() *Arena { return &Arena{} }

// Float64s returns n zeroed float64s in the region, or nil when they do
// not fit (the caller then uses the heap).
func (a *Arena) Float64s(n int) []float64 {
	if a == nil || n <= 0 {
		return nil
	}
	off, ok := a.take(n * 8)
	if !ok {
		return nil
	}
	v := f64s(a.cur.Mem, off, n)
	clear(v)
	return v
}

// take reserves bytes (64-aligned) in the region and returns their offset;
// false when they do not fit (counted in asked either way).
func (a *Arena) take(bytes int) (int, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.takeLocked(bytes)
}

func (a *Arena) takeLocked(bytes int) (int, bool) {
	a.asked = (a.asked+shmAlign-1)&^(shmAlign-1) + bytes
	off := (a.used + shmAlign - 1) &^ (shmAlign - 1)
	if a.cur == nil || off+bytes > len(a.cur.Mem) {
		a.Heap += int64(bytes)
		return 0, false
	}
	a.used = off + bytes
	return off, true
}

// Reset starts a step: every block handed out so far is free again. When
// the last step asked for more than the region holds, a region with a
// quarter's headroom replaces it (at least 1 MiB); the replaced one is
// closed at the next Reset. A region that cannot be made leaves the
// arena on the heap (the error is the caller's to log, once).
func (a *Arena) Reset() error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.retired {
		r.Close()
	}
	a.retired = nil
	var err error
	if a.cur == nil && a.asked > 0 || a.cur != nil && a.asked > len(a.cur.Mem) {
		var r *HostRegion
		if r, err = NewHostRegion("arena", max(a.asked+a.asked/4, 1<<20), true); err == nil {
			if a.cur != nil {
				a.retired = append(a.retired, a.cur)
			}
			a.cur = r
		}
	}
	a.used, a.asked = 0, 0
	a.epoch++
	return err
}

// Reserve makes the region hold at least bytes from now on (a benchmark or
// a caller that knows its batch before the first step); like Reset, it
// frees every block handed out.
func (a *Arena) Reserve(bytes int) error {
	a.mu.Lock()
	a.asked = max(a.asked, bytes)
	a.mu.Unlock()
	return a.Reset()
}

// Size is the region's size in bytes (0 without one).
func (a *Arena) Size() int {
	if a == nil {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cur == nil {
		return 0
	}
	return len(a.cur.Mem)
}

// Close releases every region; blocks handed out must not be read again.
func (a *Arena) Close() {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.retired {
		r.Close()
	}
	a.cur.Close()
	a.cur, a.retired = nil, nil
}

// locate returns the offset of v in the current region, and false when v
// does not lie wholly in it.
// The caller holds a.mu.
func (a *Arena) locate(v []float64) (int, bool) {
	if a == nil || a.cur == nil || len(v) == 0 {
		return 0, false
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(a.cur.Mem)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(v)))
	if p < base || p+uintptr(len(v))*8 > base+uintptr(len(a.cur.Mem)) {
		return 0, false
	}
	return int(p - base), true
}
