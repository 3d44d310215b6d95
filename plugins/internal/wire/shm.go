package wire

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"sort"
	"sync"
	"unsafe"

	"github.com/cde-rl/cde/core"
	pb "github.com/cde-rl/cde/plugins/proto"
)

// The shared-memory transport of protocol version 3 (the layout is stated
// in plugins/proto/cde_strategy.proto): the host places a Batch's large
// arrays in a sealed memfd the plugin maps read-only, and the plugin may
// put its per-token answer in a second region the host maps read-only.
// This file holds what does not depend on the operating system; regions
// themselves are made and mapped in shm_linux.go (elsewhere there are
// none, and both sides use the messages).

// ShmMagic opens the probe region of Configure.
const ShmMagic = "CDESHM01"

// shmAlign is the alignment of every array in the input region.
const shmAlign = 64

// ErrShmUnsupported is returned where this platform has no shared-memory
// transport.
var ErrShmUnsupported = errors.New("shared-memory transport not supported on this platform")

// shmField describes one Batch field that may travel in shared memory.
type shmField struct {
	name  string
	dtype pb.ShmArray_DType
}

// shmFields are the Batch fields (by number) the transport may carry.
var shmFields = map[int32]shmField{
	20: {"prompt", pb.ShmArray_INT32}, 21: {"response", pb.ShmArray_INT32},
	30: {"logprobs", pb.ShmArray_FLOAT64}, 31: {"entropies", pb.ShmArray_FLOAT64}, 32: {"values", pb.ShmArray_FLOAT64},
	33: {"advantages", pb.ShmArray_FLOAT64}, 34: {"advantage_bonus", pb.ShmArray_FLOAT64},
	35: {"returns", pb.ShmArray_FLOAT64}, 41: {"embedding", pb.ShmArray_FLOAT64},
}

func dtypeSize(d pb.ShmArray_DType) int {
	if d == pb.ShmArray_INT32 {
		return 4
	}
	return 8
}

// procFDPath is the only form of region path a plugin opens.
var procFDPath = regexp.MustCompile(`^/proc/[0-9]{1,10}/fd/[0-9]{1,10}$`)

// f64s and i32s view a mapped byte range as typed elements. The caller has
// checked the bounds and the alignment (regions are page-aligned, offsets
// multiples of shmAlign).
func f64s(mem []byte, off, n int) []float64 {
	if n == 0 {
		return []float64{}
	}
	return unsafe.Slice((*float64)(unsafe.Pointer(&mem[off])), n)
}

func i32s(mem []byte, off, n int) []int32 {
	if n == 0 {
		return []int32{}
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&mem[off])), n)
}

func bytesOf[T int32 | float64](v []T) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*int(unsafe.Sizeof(v[0])))
}

// ShmHost is the host's side of one plugin's shared-memory transport: the
// current input and answer regions and what each array slot holds.
type ShmHost struct {
	in, ans *HostRegion
	slots   map[int32]shmSlot
	gen     uint64
	// arena, when set, is the host's shared allocator (UseArena): a column
	// allocated in it is handed over where it lies.
	arena   *Arena
	scratch map[int32]scratchSlot
	// Written counts the bytes written into the input region, Kept the
	// bytes of arrays found unchanged (tests and benchmarks read them),
	// InPlace the bytes of columns handed over where they lay (the arena).
	Written, Kept, InPlace int64
}

// scratchSlot is where an array that is not an arena column was copied
// into the arena, in which arena epoch (a later step's Reset frees it).
type scratchSlot struct {
	region, epoch uint64
	offset, count int
}

// UseArena makes the host hand over columns allocated in a (the arena's
// region) without copying them, and copy the other arrays into a too, so
// that a batch lies in one region; a batch that does not fit the arena
// goes through this host's own input region as before.
func (h *ShmHost) UseArena(a *Arena) {
	h.arena = a
	h.scratch = map[int32]scratchSlot{}
}

// shmSlot is where an array was last written and its generation.
type shmSlot struct {
	region, offset, count, gen uint64
}

// NewShmHost starts a transport whose first input region is probe (the
// region of Configure, kept: its magic is overwritten by the first batch).
func NewShmHost(probe *HostRegion) *ShmHost {
	return &ShmHost{in: probe, slots: map[int32]shmSlot{}}
}

// NewShmProbe makes the Configure probe region: one page opening with
// ShmMagic.
func NewShmProbe() (*HostRegion, error) {
	r, err := NewHostRegion("input", 4096, true)
	if err != nil {
		return nil, err
	}
	copy(r.Mem, ShmMagic)
	return r, nil
}

// Close releases both regions.
func (h *ShmHost) Close() {
	if h == nil {
		return
	}
	h.in.Close()
	h.ans.Close()
	h.in, h.ans = nil, nil
}

// grow returns a region of at least need bytes for role, replacing cur
// when it is smaller; a new region has a quarter's headroom, so a batch
// that grows a little does not make a new one every step.
func grow(cur *HostRegion, role string, need int, input bool) (*HostRegion, error) {
	if cur != nil && len(cur.Mem) >= need {
		return cur, nil
	}
	size := max(need+need/4, 1<<20)
	r, err := NewHostRegion(role, size, input)
	if err != nil {
		return nil, err
	}
	cur.Close()
	return r, nil
}

// Encode is EncodeBatch with the large arrays placed in the input region.
// An array whose content equals what its slot already holds is not
// written again and keeps its generation. answerBytes > 0 also attaches
// an answer region of at least that many bytes.
func (h *ShmHost) Encode(info core.StepInfo, r *core.Rollout, needs core.Needs, answerBytes int) (*pb.Batch, error) {
	b, arrays, err := encodeParts(info, r, needs)
	if err != nil {
		return nil, err
	}
	if sb := h.encodeInArena(arrays); sb != nil {
		if err := h.attachAnswer(sb, answerBytes); err != nil {
			return nil, err
		}
		b.Shm = sb
		return b, nil
	}
	offsets := make([]int, len(arrays))
	size := 0
	for i, a := range arrays {
		size = (size + shmAlign - 1) &^ (shmAlign - 1)
		offsets[i] = size
		el := 8
		if a.ints != nil {
			el = 4
		}
		size += a.count * el
	}
	in, err := grow(h.in, "input", size, true)
	if err != nil {
		return nil, err
	}
	if in != h.in {
		h.in = in
		clear(h.slots)
	}
	sb := &pb.ShmBatch{Input: h.in.proto(), Arrays: make([]*pb.ShmArray, 0, len(arrays))}
	for i := range arrays {
		a, off := &arrays[i], offsets[i]
		slot := h.slots[a.field]
		kept, written := place(a, h.in.Mem, off)
		h.Kept += kept
		h.Written += written
		if written > 0 || slot.region != h.in.ID || slot.offset != uint64(off) || slot.count != uint64(a.count) {
			h.gen++
			h.slots[a.field] = shmSlot{region: h.in.ID, offset: uint64(off), count: uint64(a.count), gen: h.gen}
		}
		sb.Arrays = append(sb.Arrays, &pb.ShmArray{Field: a.field, Dtype: shmFields[a.field].dtype,
			Offset: uint64(off), Count: uint64(a.count), Generation: h.slots[a.field].gen})
	}
	if err := h.attachAnswer(sb, answerBytes); err != nil {
		return nil, err
	}
	b.Shm = sb
	return b, nil
}

// attachAnswer attaches an answer region of at least answerBytes (none for
// 0).
func (h *ShmHost) attachAnswer(sb *pb.ShmBatch, answerBytes int) error {
	if answerBytes <= 0 {
		return nil
	}
	ans, err := grow(h.ans, "answer", answerBytes, false)
	if err != nil {
		return err
	}
	h.ans = ans
	sb.Answer = h.ans.proto()
	return nil
}

// encodeInArena places the batch in the arena's region: a column that lies
// there is named where it is, any other array is copied into the arena
// (into the same place for the rest of the step: a later hook's call
// writes only what changed). It returns nil, having sent nothing, when
// there is no arena region or an array does not fit it.
func (h *ShmHost) encodeInArena(arrays []batchArray) *pb.ShmBatch {
	a := h.arena
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cur == nil {
		return nil
	}
	sb := &pb.ShmBatch{Input: a.cur.proto(), Arrays: make([]*pb.ShmArray, 0, len(arrays))}
	for i := range arrays {
		arr := &arrays[i]
		el := 8
		if arr.ints != nil {
			el = 4
		}
		// Content in the arena may change in place between calls: every
		// array gets a new generation.
		h.gen++
		if off, ok := a.locate(arr.block); ok {
			h.InPlace += int64(len(arr.block) * 8)
			sb.Arrays = append(sb.Arrays, &pb.ShmArray{Field: arr.field, Dtype: shmFields[arr.field].dtype,
				Offset: uint64(off), Count: uint64(arr.count), Generation: h.gen})
			continue
		}
		slot, ok := h.scratch[arr.field]
		if !ok || slot.region != a.cur.ID || slot.epoch != a.epoch || slot.count != arr.count {
			off, fits := a.takeLocked(arr.count * el)
			if !fits {
				return nil
			}
			slot = scratchSlot{region: a.cur.ID, epoch: a.epoch, offset: off, count: arr.count}
			h.scratch[arr.field] = slot
		}
		kept, written := place(arr, a.cur.Mem, slot.offset)
		h.Kept += kept
		h.Written += written
		sb.Arrays = append(sb.Arrays, &pb.ShmArray{Field: arr.field, Dtype: shmFields[arr.field].dtype,
			Offset: uint64(slot.offset), Count: uint64(arr.count), Generation: h.gen})
	}
	return sb
}

// place puts array a into mem at byte offset off, part by part: a part
// already there (equal bytes) is left alone, the others are written. The
// parts are shared among up to GOMAXPROCS goroutines when the array is
// large (copying is bound by memory bandwidth, which one core does not
// saturate). It returns the bytes found in place and the bytes written.
func place(a *batchArray, mem []byte, off int) (kept, written int64) {
	el := 8
	if a.ints != nil {
		el = 4
	}
	var i32 []int32
	var f64 []float64
	if a.ints != nil {
		i32 = i32s(mem, off, a.count)
	} else {
		f64 = f64s(mem, off, a.count)
	}
	part := func(i int) bool { // reports whether part i was written
		if a.ints != nil {
			v, dst := a.ints(i), i32[a.start[i]:a.start[i+1]]
			if bytes.Equal(bytesOf(v), bytesOf(dst)) {
				return false
			}
			copy(dst, v)
			return true
		}
		if a.partEqual(f64, i) {
			return false
		}
		a.writePart(f64, i)
		return true
	}
	n := a.parts()
	workers := min(runtime.GOMAXPROCS(0), 8)
	if a.count*el < 4<<20 || n < 2 {
		workers = 1
	}
	var wg sync.WaitGroup
	sums := make([][2]int64, workers)
	for w := range workers {
		// Worker w takes the parts that start in its share of the elements.
		lo, hi := sort.SearchInts(a.start[:n], a.count*w/workers), sort.SearchInts(a.start[:n], a.count*(w+1)/workers)
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				b := int64(a.start[i+1]-a.start[i]) * int64(el)
				if part(i) {
					sums[w][1] += b
				} else {
					sums[w][0] += b
				}
			}
		})
	}
	wg.Wait()
	for _, s := range sums {
		kept, written = kept+s[0], written+s[1]
	}
	return kept, written
}

// Answer returns a view of n float64 answers in the answer region (valid
// until the next call: the caller copies what it keeps), or says that they
// do not fit it (no answer region was sent, or the plugin claims more
// values than the region holds).
func (h *ShmHost) Answer(n int) ([]float64, error) {
	if h.ans == nil || n < 0 || n*8 > len(h.ans.Mem) {
		return nil, fmt.Errorf("answer of %d values does not fit the answer region", n)
	}
	return f64s(h.ans.Mem, 0, n), nil
}

// InputID names the current input region (0 for none).
func (h *ShmHost) InputID() uint64 {
	if h.in == nil {
		return 0
	}
	return h.in.ID
}

// --- the plugin side ---------------------------------------------------------

// shmClient is the plugin's side: its mappings of the host's regions.
type shmClient struct {
	in, ans *PluginRegion
}

func (c *shmClient) close() {
	if c == nil {
		return
	}
	c.in.Close()
	c.ans.Close()
}

// openProbe opens and checks the probe region of Configure.
func openProbe(r *pb.ShmRegion) (*shmClient, error) {
	in, err := OpenRegion(r, false)
	if err != nil {
		return nil, err
	}
	if len(in.Mem) < len(ShmMagic) || string(in.Mem[:len(ShmMagic)]) != ShmMagic {
		in.Close()
		return nil, fmt.Errorf("shm probe %s: no %q at its start", r.Path, ShmMagic)
	}
	return &shmClient{in: in}, nil
}

// region returns the mapping of r, (re)opening it when r names another
// region than cur.
func (c *shmClient) region(cur **PluginRegion, r *pb.ShmRegion, write bool) (*PluginRegion, error) {
	if *cur != nil && (*cur).ID == r.Id && (*cur).Path == r.Path && uint64(len((*cur).Mem)) == r.Size {
		return *cur, nil
	}
	m, err := OpenRegion(r, write)
	if err != nil {
		return nil, err
	}
	(*cur).Close()
	*cur = m
	return m, nil
}

// resolve checks b.Shm's header against the mapping and points b's array
// fields at the arrays in place (read-only views). A header that lies
// (an unknown or repeated field, a wrong element type, an array outside
// the region, a misaligned offset, a field also sent in the message) is
// an error naming the field.
func (c *shmClient) resolve(b *pb.Batch) error {
	sb := b.Shm
	if sb.Input == nil {
		return errors.New("shm: the batch names no input region")
	}
	in, err := c.region(&c.in, sb.Input, false)
	if err != nil {
		return err
	}
	size := uint64(len(in.Mem))
	seen := map[int32]bool{}
	for _, a := range sb.Arrays {
		f, ok := shmFields[a.Field]
		if !ok {
			return fmt.Errorf("shm: field %d is not a field the transport carries", a.Field)
		}
		what := fmt.Sprintf("shm: %s (field %d)", f.name, a.Field)
		if seen[a.Field] {
			return fmt.Errorf("%s: listed twice", what)
		}
		seen[a.Field] = true
		if a.Dtype != f.dtype {
			return fmt.Errorf("%s: element type %s, want %s", what, a.Dtype, f.dtype)
		}
		el := uint64(dtypeSize(a.Dtype))
		if a.Offset%el != 0 {
			return fmt.Errorf("%s: offset %d is not a multiple of %d", what, a.Offset, el)
		}
		if a.Count > size/el || a.Offset > size || a.Count*el > size-a.Offset {
			return fmt.Errorf("%s: offset %d + %d elements of %d bytes exceeds the region's %d bytes", what, a.Offset, a.Count, el, size)
		}
		off, n := int(a.Offset), int(a.Count)
		set := func(dst *[]float64) error {
			if len(*dst) != 0 {
				return fmt.Errorf("%s: also sent in the message", what)
			}
			*dst = f64s(in.Mem, off, n)
			return nil
		}
		switch a.Field {
		case 20, 21:
			dst := &b.Prompt
			if a.Field == 21 {
				dst = &b.Response
			}
			if len(*dst) != 0 {
				return fmt.Errorf("%s: also sent in the message", what)
			}
			*dst = i32s(in.Mem, off, n)
		case 30:
			err = set(&b.Logprobs)
		case 31:
			err = set(&b.Entropies)
		case 32:
			err = set(&b.Values)
		case 33:
			err = set(&b.Advantages)
		case 34:
			err = set(&b.AdvantageBonus)
		case 35:
			err = set(&b.Returns)
		case 41:
			err = set(&b.Embedding)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// answer returns a float64 view of n values of the answer region b names,
// or nil when b has none or it is too small (the plugin then answers in
// the message).
func (c *shmClient) answer(b *pb.Batch, n int) ([]float64, error) {
	r := b.GetShm().GetAnswer()
	if c == nil || r == nil || uint64(n) > r.Size/8 {
		return nil, nil
	}
	m, err := c.region(&c.ans, r, true)
	if err != nil {
		return nil, err
	}
	return f64s(m.Mem, 0, n), nil
}
