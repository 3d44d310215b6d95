//go:build linux

package wire

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"

	"github.com/cde-rl/cde/core"
	pb "github.com/cde-rl/cde/plugins/proto"
)

// shmRollout is n sequences with every signal the transport carries (k
// value heads, embeddings of 3), values drawn from seed, and a few
// special floats (-0, NaN, +Inf) that must cross bit for bit.
func shmRollout(seed uint64, n, k int) *core.Rollout {
	rng := rand.New(rand.NewPCG(seed, 3))
	r := &core.Rollout{Step: 2, TotalSteps: 9, Algorithm: "ppo", ValueHeads: k, Seqs: make([]core.Sequence, n)}
	for i := range r.Seqs {
		s := &r.Seqs[i]
		T, P := 1+rng.IntN(9), rng.IntN(5)
		s.Group, s.ProblemID, s.Reward, s.Text = i/2, "p", float64(i%2), "x"
		s.Prompt, s.Response = make([]int32, P), make([]int32, T)
		for j := range s.Prompt {
			s.Prompt[j] = rng.Int32()
		}
		for j := range s.Response {
			s.Response[j] = rng.Int32()
		}
		f := func() []float64 {
			v := make([]float64, T)
			for j := range v {
				v[j] = rng.NormFloat64()
			}
			return v
		}
		s.LogProbs, s.Entropies, s.Advantages, s.AdvantageBonus, s.Returns = f(), f(), f(), f(), f()
		s.Values = make([]float64, T*k)
		for j := range s.Values {
			s.Values[j] = rng.NormFloat64()
		}
		s.Embedding = []float64{rng.NormFloat64(), math.Copysign(0, -1), float64(i)}
	}
	r.Seqs[0].LogProbs[0], r.Seqs[0].Entropies[0] = math.NaN(), math.Inf(1)
	return r
}

var allNeeds = core.Needs{LogProbs: true, Entropies: true, Pooling: "mean", ValueHeads: 1}

// viaShm sends r through a host's transport to a plugin-side client and
// decodes it as the plugin would.
func viaShm(t *testing.T, h *ShmHost, c *shmClient, r *core.Rollout) (*pb.Batch, *core.Rollout) {
	t.Helper()
	b, err := h.Encode(core.StepInfo{Step: 2}, r, allNeeds, 0)
	if err != nil {
		t.Fatal(err)
	}
	// What the plugin receives is the message as serialised.
	raw, err := proto.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	got := &pb.Batch{}
	if err := proto.Unmarshal(raw, got); err != nil {
		t.Fatal(err)
	}
	if err := c.resolve(got); err != nil {
		t.Fatal(err)
	}
	_, out, err := decodeBatch(got)
	if err != nil {
		t.Fatal(err)
	}
	return b, out
}

func newPair(t *testing.T) (*ShmHost, *shmClient) {
	t.Helper()
	probe, err := NewShmProbe()
	if err != nil {
		t.Fatal(err)
	}
	c, err := openProbe(probe.proto())
	if err != nil {
		t.Fatal(err)
	}
	h := NewShmHost(probe)
	t.Cleanup(func() { h.Close(); c.close() })
	return h, c
}

// bitsEqual compares two rollouts with NaN equal to NaN (reflect.DeepEqual
// says NaN != NaN).
func bitsEqual(t *testing.T, a, b *core.Rollout) {
	t.Helper()
	ja, jb := fmtRollout(a), fmtRollout(b)
	if ja != jb {
		t.Fatalf("rollouts differ:\n%s\n%s", ja, jb)
	}
}

func fmtRollout(r *core.Rollout) string {
	var sb strings.Builder
	bits := func(v []float64) {
		for _, x := range v {
			fmt.Fprintf(&sb, "%x ", math.Float64bits(x))
		}
		sb.WriteByte('|')
	}
	for _, s := range r.Seqs {
		for _, v := range [][]float64{s.LogProbs, s.Entropies, s.Advantages, s.AdvantageBonus, s.Returns, s.Embedding, s.Values} {
			bits(v)
		}
		fmt.Fprintln(&sb, s.Prompt, s.Response)
	}
	return sb.String()
}

func unsafePointer[T any](v []T) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(v)) }

// The shared-memory path gives the plugin the same rollout as the
// messages, bit for bit; an unchanged array keeps its generation and is
// not written again, and of a changed one only the sequences that changed
// are rewritten.
func TestShmSameAsMessages(t *testing.T) {
	h, c := newPair(t)
	r := shmRollout(1, 7, 3)
	msg, err := EncodeBatch(core.StepInfo{Step: 2}, r, allNeeds)
	if err != nil {
		t.Fatal(err)
	}
	_, want, err := DecodeBatch(msg)
	if err != nil {
		t.Fatal(err)
	}
	b1, got := viaShm(t, h, c, r)
	bitsEqual(t, want, got)
	if !reflect.DeepEqual(want.Seqs[3], got.Seqs[3]) {
		t.Fatalf("sequence 3: %+v\n%+v", want.Seqs[3], got.Seqs[3])
	}
	for _, a := range b1.Shm.Arrays {
		if a.Offset%shmAlign != 0 {
			t.Errorf("field %d at offset %d", a.Field, a.Offset)
		}
	}
	if len(b1.Shm.Arrays) != 9 {
		t.Fatalf("%d arrays in shared memory, want 9", len(b1.Shm.Arrays))
	}
	written := h.Written
	b2, got2 := viaShm(t, h, c, r)
	bitsEqual(t, want, got2)
	if h.Written != written || h.Kept != written {
		t.Fatalf("second call of the same batch: written %d -> %d, kept %d; want nothing written, %d kept", written, h.Written, h.Kept, written)
	}
	for i := range b1.Shm.Arrays {
		if b1.Shm.Arrays[i].Generation != b2.Shm.Arrays[i].Generation {
			t.Fatalf("field %d: generation %d -> %d with the same content", b1.Shm.Arrays[i].Field, b1.Shm.Arrays[i].Generation, b2.Shm.Arrays[i].Generation)
		}
	}
	if &got.Seqs[2].Values[0] != &got2.Seqs[2].Values[0] {
		t.Fatal("the values are not read in place")
	}
	// The trainer fills in the advantages: only they are rewritten.
	r.Seqs[4].Advantages[0]++
	b3, got3 := viaShm(t, h, c, r)
	if want := written + 8*int64(r.Seqs[4].Len()); h.Written != want {
		t.Fatalf("after changing one advantage: written %d, want %d (sequence 4's advantages alone)", h.Written, want)
	}
	if got3.Seqs[4].Advantages[0] != r.Seqs[4].Advantages[0] {
		t.Fatal("the changed advantage did not reach the plugin")
	}
	for i, a := range b3.Shm.Arrays {
		changed := a.Generation != b2.Shm.Arrays[i].Generation
		if changed != (a.Field == 33) {
			t.Errorf("field %d: generation changed %v", a.Field, changed)
		}
	}
	// A bigger batch needs a new region; it arrives whole.
	big := shmRollout(2, 3000, 16)
	oldID := h.InputID()
	_, gotBig := viaShm(t, h, c, big)
	if h.InputID() == oldID {
		t.Fatal("a batch larger than the region did not get a new one")
	}
	bitsEqual(t, big, gotBig)
}

// The plugin can neither write into the input region nor resize either
// region: the seals refuse it, even to root.
func TestShmSeals(t *testing.T) {
	in, err := NewHostRegion("input", 4096, true)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	ans, err := NewHostRegion("answer", 4096, false)
	if err != nil {
		t.Fatal(err)
	}
	defer ans.Close()
	f, err := os.OpenFile(in.Path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := unix.Mmap(int(f.Fd()), 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err == nil {
		t.Fatal("the input region could be mapped writable")
	}
	if _, err := f.WriteAt([]byte("x"), 0); err == nil {
		t.Fatal("the input region could be written")
	}
	if err := f.Truncate(0); err == nil {
		t.Fatal("the input region could be shrunk")
	}
	if _, err := OpenRegion(in.proto(), true); err == nil {
		t.Fatal("OpenRegion mapped the input region writable")
	}
	in.Mem[0] = 7 // the host's own mapping stays writable
	g, err := os.OpenFile(ans.Path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.Truncate(0); err == nil {
		t.Fatal("the answer region could be shrunk (the host would fault reading it)")
	}
	m, err := OpenRegion(ans.proto(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.Mem[5] = 9
	if ans.Mem[5] != 9 {
		t.Fatal("the plugin's answer did not reach the host's mapping")
	}
}

// goodBatch is a valid batch of two sequences of 2 and 3 tokens with its
// log-probs in a region of 4096 bytes.
func goodBatch(region *pb.ShmRegion) *pb.Batch {
	n := 2
	return &pb.Batch{Lengths: []int32{2, 3}, PromptLengths: make([]int32, n), Group: make([]int32, n), ProblemId: make([]string, n),
		Reward: make([]float64, n), Correct: make([]bool, n), Truncated: make([]bool, n), Text: make([]string, n),
		RewardBonus: make([]float64, n), ShapedReward: make([]float64, n),
		Shm: &pb.ShmBatch{Input: region, Arrays: []*pb.ShmArray{{Field: 30, Dtype: pb.ShmArray_FLOAT64, Offset: 64, Count: 5}}}}
}

// A header that lies is refused with an error naming the field.
func TestShmLyingHeaders(t *testing.T) {
	h, c := newPair(t)
	region := h.in.proto()
	f64 := pb.ShmArray_FLOAT64
	cases := []struct {
		name string
		mod  func(b *pb.Batch)
		want string
	}{
		{"beyond the region", func(b *pb.Batch) { b.Shm.Arrays[0].Offset = 4096 - 8 }, "logprobs (field 30): offset 4088 + 5 elements of 8 bytes exceeds the region's 4096 bytes"},
		{"count overflows", func(b *pb.Batch) { b.Shm.Arrays[0].Count = 1 << 62 }, "logprobs (field 30): offset 64 + 4611686018427387904 elements"},
		{"offset overflows", func(b *pb.Batch) { b.Shm.Arrays[0].Offset = math.MaxUint64 - 7 }, "exceeds the region"},
		{"misaligned", func(b *pb.Batch) { b.Shm.Arrays[0].Offset = 60 }, "logprobs (field 30): offset 60 is not a multiple of 8"},
		{"wrong type", func(b *pb.Batch) { b.Shm.Arrays[0].Dtype = pb.ShmArray_INT32 }, "logprobs (field 30): element type INT32, want FLOAT64"},
		{"unknown field", func(b *pb.Batch) { b.Shm.Arrays[0].Field = 12 }, "field 12 is not a field the transport carries"},
		{"twice", func(b *pb.Batch) {
			b.Shm.Arrays = append(b.Shm.Arrays, &pb.ShmArray{Field: 30, Dtype: f64, Offset: 128, Count: 5})
		}, "logprobs (field 30): listed twice"},
		{"also in the message", func(b *pb.Batch) { b.Logprobs = []float64{1, 2, 3, 4, 5} }, "logprobs (field 30): also sent in the message"},
		{"wrong count", func(b *pb.Batch) { b.Shm.Arrays[0].Count = 4 }, "logprobs has 4 entries, want 5"},
		{"size beyond the file", func(b *pb.Batch) { b.Shm.Input = &pb.ShmRegion{Path: region.Path, Size: 1 << 20, Id: 99} }, "has 4096 bytes, the header says 1048576"},
		{"not a /proc path", func(b *pb.Batch) { b.Shm.Input = &pb.ShmRegion{Path: "/etc/passwd", Size: 8, Id: 98} }, `region path "/etc/passwd" is not /proc/<pid>/fd/<fd>`},
		{"no region", func(b *pb.Batch) { b.Shm.Input = nil }, "names no input region"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := goodBatch(region)
			tc.mod(b)
			err := c.resolve(b)
			if err == nil {
				_, _, err = decodeBatch(b)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want one containing %q", err, tc.want)
			}
		})
	}
	b := goodBatch(region)
	if err := c.resolve(b); err != nil {
		t.Fatal(err)
	}
	if _, _, err := decodeBatch(b); err != nil {
		t.Fatal(err)
	}
}

// FuzzShmHeader: any header is refused or gives views inside the mapping;
// nothing panics and nothing reads outside the region.
func FuzzShmHeader(f *testing.F) {
	f.Add(int32(30), int32(2), uint64(64), uint64(5), int32(32), uint64(128), uint64(10), int32(2))
	f.Add(int32(21), int32(1), uint64(0), uint64(5), int32(41), uint64(4000), uint64(12), int32(3))
	f.Add(int32(32), int32(2), uint64(4088), uint64(1), int32(20), uint64(8), uint64(0), int32(0))
	probe, err := NewShmProbe()
	if err != nil {
		f.Fatal(err)
	}
	c, err := openProbe(probe.proto())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { probe.Close(); c.close() })
	f.Fuzz(func(t *testing.T, f1, d1 int32, o1, n1 uint64, f2 int32, o2, n2 uint64, k int32) {
		b := goodBatch(probe.proto())
		b.ValueHeads, b.EmbeddingDim = k%5, k%4
		b.Shm.Arrays = []*pb.ShmArray{{Field: f1, Dtype: pb.ShmArray_DType(d1 % 3), Offset: o1, Count: n1},
			{Field: f2, Dtype: shmFields[f2].dtype, Offset: o2, Count: n2}}
		if err := c.resolve(b); err != nil {
			return
		}
		lo := uintptr(unsafePointer(c.in.Mem))
		hi := lo + uintptr(len(c.in.Mem))
		for _, v := range [][]float64{b.Logprobs, b.Entropies, b.Values, b.Advantages, b.AdvantageBonus, b.Returns, b.Embedding} {
			if len(v) > 0 && (uintptr(unsafePointer(v)) < lo || uintptr(unsafePointer(v))+uintptr(8*len(v)) > hi) {
				t.Fatalf("a view outside the region")
			}
		}
		if _, r, err := decodeBatch(b); err == nil {
			// Every value the plugin may read lies in the mapping.
			sum := 0.0
			for _, s := range r.Seqs {
				for _, x := range s.Values {
					sum += x
				}
				for _, x := range s.LogProbs {
					sum += x
				}
			}
			_ = sum
		}
	})
}
