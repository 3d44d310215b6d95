// Package safetensors reads and writes the safetensors format that Hugging
// Face checkpoints use, in pure Go: an 8-byte little-endian header length N,
// N bytes of JSON header, then the tensors' raw little-endian bytes.
//
// The header maps each tensor name to {"dtype", "shape", "data_offsets":
// [begin, end]} (offsets into the data that follows the header) and may hold
// "__metadata__", a map of strings. A file is checked whole when opened:
// every tensor's byte range matches its dtype and shape, lies inside the
// file, and no two overlap; anything else is an error naming the file and
// the tensor.
package safetensors

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// DType is a safetensors element type name.
type DType string

// The element types this package converts to float32; others (integers,
// F64, F8) can be listed but not read as float32.
const (
	F32  DType = "F32"
	F16  DType = "F16"
	BF16 DType = "BF16"
)

// dtypeSize is the byte size of each element type the format defines.
var dtypeSize = map[DType]int{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1,
	"I16": 2, "U16": 2, "F16": 2, "BF16": 2,
	"I32": 4, "U32": 4, "F32": 4,
	"I64": 8, "U64": 8, "F64": 8,
}

// MaxHeaderBytes bounds the JSON header (100 MB, as the reference
// implementation does).
const MaxHeaderBytes = 100_000_000

// Info describes one tensor of a file.
type Info struct {
	DType DType
	Shape []int
	// Offset and Size locate the tensor's bytes in the file (Offset counts
	// from the start of the file, header included).
	Offset, Size int64
}

// Elems is the number of elements (1 for a scalar, shape []).
func (i Info) Elems() int64 {
	n := int64(1)
	for _, d := range i.Shape {
		n *= int64(d)
	}
	return n
}

// File is an open safetensors file.
type File struct {
	Path     string
	Tensors  map[string]Info
	Metadata map[string]string
	f        *os.File
}

// Open reads and checks the header of the safetensors file at path.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	sf, err := parse(f, st.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sf.Path, sf.f = path, f
	return sf, nil
}

// Close closes the file.
func (f *File) Close() error {
	if f.f == nil {
		return nil
	}
	return f.f.Close()
}

// Names lists the tensor names, sorted.
func (f *File) Names() []string {
	out := make([]string, 0, len(f.Tensors))
	for k := range f.Tensors {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// header is one tensor entry as written in the JSON header.
type header struct {
	DType       DType    `json:"dtype"`
	Shape       []int64  `json:"shape"`
	DataOffsets [2]int64 `json:"data_offsets"`
}

// parse reads the header from r (size bytes in all) and checks every entry.
func parse(r io.ReaderAt, size int64) (*File, error) {
	var lenBuf [8]byte
	if size < 8 {
		return nil, fmt.Errorf("%d bytes, too short for a safetensors file", size)
	}
	if _, err := r.ReadAt(lenBuf[:], 0); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > MaxHeaderBytes || n > uint64(size-8) {
		return nil, fmt.Errorf("header length %d: over the limit of %d bytes or past the end of the file (%d bytes)", n, MaxHeaderBytes, size)
	}
	hb := make([]byte, n)
	if _, err := r.ReadAt(hb, 8); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(hb))
	var raw map[string]json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("header: %v", err)
	}
	if err := checkUniqueKeys(hb); err != nil {
		return nil, err
	}
	f := &File{Tensors: map[string]Info{}}
	dataStart := int64(8 + n)
	dataLen := size - dataStart
	type span struct {
		name       string
		begin, end int64
	}
	var spans []span
	for name, msg := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &f.Metadata); err != nil {
				return nil, fmt.Errorf("header: __metadata__: want a map of strings: %v", err)
			}
			continue
		}
		var h header
		d := json.NewDecoder(bytes.NewReader(msg))
		d.DisallowUnknownFields()
		if err := d.Decode(&h); err != nil {
			return nil, fmt.Errorf("tensor %q: %v", name, err)
		}
		es, ok := dtypeSize[h.DType]
		if !ok {
			return nil, fmt.Errorf("tensor %q: unknown dtype %q", name, h.DType)
		}
		elems := int64(1)
		shape := make([]int, len(h.Shape))
		for i, dim := range h.Shape {
			if dim < 0 || dim > math.MaxInt32 || (dim > 0 && elems > math.MaxInt64/8/dim) {
				return nil, fmt.Errorf("tensor %q: bad shape %v", name, h.Shape)
			}
			elems *= dim
			shape[i] = int(dim)
		}
		b, e := h.DataOffsets[0], h.DataOffsets[1]
		if b < 0 || e < b || e > dataLen {
			return nil, fmt.Errorf("tensor %q: data_offsets [%d, %d] outside the %d data bytes", name, b, e, dataLen)
		}
		if e-b != elems*int64(es) {
			return nil, fmt.Errorf("tensor %q: %d bytes for shape %v of %s (%d bytes)", name, e-b, h.Shape, h.DType, elems*int64(es))
		}
		f.Tensors[name] = Info{DType: h.DType, Shape: shape, Offset: dataStart + b, Size: e - b}
		spans = append(spans, span{name, b, e})
	}
	slices.SortFunc(spans, func(a, b span) int {
		if a.begin != b.begin {
			return int(a.begin - b.begin)
		}
		return strings.Compare(a.name, b.name)
	})
	for i := 1; i < len(spans); i++ {
		if spans[i].begin < spans[i-1].end {
			return nil, fmt.Errorf("tensors %q and %q overlap", spans[i-1].name, spans[i].name)
		}
	}
	return f, nil
}

// checkUniqueKeys refuses a header whose top-level object names a key
// twice (encoding/json would keep the last one silently).
func checkUniqueKeys(hb []byte) error {
	dec := json.NewDecoder(bytes.NewReader(hb))
	if _, err := dec.Token(); err != nil { // {
		return err
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		k, _ := t.(string)
		if seen[k] {
			return fmt.Errorf("header: key %q twice", k)
		}
		seen[k] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
	}
	return nil
}

// Raw returns the bytes of tensor name as stored (little-endian).
func (f *File) Raw(name string) ([]byte, Info, error) {
	info, ok := f.Tensors[name]
	if !ok {
		return nil, info, fmt.Errorf("%s: no tensor %q", f.Path, name)
	}
	b := make([]byte, info.Size)
	if _, err := f.f.ReadAt(b, info.Offset); err != nil {
		return nil, info, fmt.Errorf("%s: tensor %q: %w", f.Path, name, err)
	}
	return b, info, nil
}

// Float32 reads tensor name as float32 values (row-major), converting F16
// and BF16 exactly.
func (f *File) Float32(name string) ([]float32, Info, error) {
	b, info, err := f.Raw(name)
	if err != nil {
		return nil, info, err
	}
	out, err := ToFloat32(info.DType, b)
	if err != nil {
		return nil, info, fmt.Errorf("%s: tensor %q: %w", f.Path, name, err)
	}
	return out, info, nil
}

// ToFloat32 converts little-endian raw data of dtype to float32.
func ToFloat32(dt DType, b []byte) ([]float32, error) {
	switch dt {
	case F32:
		out := make([]float32, len(b)/4)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return out, nil
	case BF16:
		out := make([]float32, len(b)/2)
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
		}
		return out, nil
	case F16:
		out := make([]float32, len(b)/2)
		for i := range out {
			out[i] = HalfToFloat32(binary.LittleEndian.Uint16(b[2*i:]))
		}
		return out, nil
	}
	return nil, fmt.Errorf("dtype %s cannot be read as float32 (F32, F16, BF16 can)", dt)
}

// HalfToFloat32 converts an IEEE 754 binary16 value exactly.
func HalfToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // Inf, NaN
		return math.Float32frombits(sign | 0xff<<23 | mant<<13)
	case exp != 0: // normal
		return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign)
	}
	// subnormal: mant * 2^-24
	v := float32(mant) * float32(1.0/(1<<24))
	if sign != 0 {
		return -v
	}
	return v
}

// Float32ToBF16 rounds to the nearest bfloat16, ties to even (NaN stays NaN).
func Float32ToBF16(v float32) uint16 {
	u := math.Float32bits(v)
	if v != v {
		return uint16(u>>16) | 0x40
	}
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}

// Tensor is one tensor to write.
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte // little-endian, len = elements x dtype size
}

// F32Tensor makes an F32 tensor from values.
func F32Tensor(name string, shape []int, v []float32) Tensor {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return Tensor{Name: name, DType: F32, Shape: shape, Data: b}
}

// BF16Tensor makes a BF16 tensor from values (rounded to nearest even).
func BF16Tensor(name string, shape []int, v []float32) Tensor {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], Float32ToBF16(x))
	}
	return Tensor{Name: name, DType: BF16, Shape: shape, Data: b}
}

// Encode writes tensors (in name order, as the reference writer does) and
// metadata in the safetensors format to w.
func Encode(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	ts := slices.Clone(tensors)
	slices.SortFunc(ts, func(a, b Tensor) int { return strings.Compare(a.Name, b.Name) })
	hdr := map[string]any{}
	if len(metadata) > 0 {
		hdr["__metadata__"] = metadata
	}
	var off int64
	for i, t := range ts {
		if i > 0 && t.Name == ts[i-1].Name {
			return fmt.Errorf("safetensors: tensor %q twice", t.Name)
		}
		if t.Name == "__metadata__" {
			return errors.New("safetensors: a tensor may not be called __metadata__")
		}
		es, ok := dtypeSize[t.DType]
		if !ok {
			return fmt.Errorf("safetensors: tensor %q: unknown dtype %q", t.Name, t.DType)
		}
		elems := 1
		for _, d := range t.Shape {
			elems *= d
		}
		if len(t.Data) != elems*es {
			return fmt.Errorf("safetensors: tensor %q: %d bytes for shape %v of %s", t.Name, len(t.Data), t.Shape, t.DType)
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		hdr[t.Name] = map[string]any{"dtype": t.DType, "shape": shape, "data_offsets": [2]int64{off, off + int64(len(t.Data))}}
		off += int64(len(t.Data))
	}
	hb, err := json.Marshal(hdr)
	if err != nil {
		return err
	}
	// Pad the header with spaces so the data starts 8-byte aligned, as the
	// reference writer does.
	for (8+len(hb))%8 != 0 {
		hb = append(hb, ' ')
	}
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(hb)))
	if _, err := w.Write(lenBuf[:]); err != nil {
		return err
	}
	if _, err := w.Write(hb); err != nil {
		return err
	}
	for _, t := range ts {
		if _, err := w.Write(t.Data); err != nil {
			return err
		}
	}
	return nil
}

// WriteFile writes tensors to path atomically (a temporary file renamed
// into place once complete and synced). The file's mode is 0644 less the
// umask, like every other file cde writes, so a server running as another
// user (vLLM, SGLang reading an export or a weight sync) can read it;
// os.CreateTemp would make it 0600.
func WriteFile(path string, tensors []Tensor, metadata map[string]string) error {
	tmp, err := createTemp(filepath.Dir(path), "."+filepath.Base(path)+".partial-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := Encode(tmp, tensors, metadata); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Set is a model's weights: one safetensors file, or the shards an index
// names.
type Set struct {
	files []*File
	where map[string]*File
}

// IndexFile is the shard index Hugging Face writes beside sharded weights.
const IndexFile = "model.safetensors.index.json"

// OpenDir opens dir/model.safetensors, or the shards that
// dir/model.safetensors.index.json lists. Every tensor the index names must
// be in the shard it names, and no tensor may be in two shards.
func OpenDir(dir string) (*Set, error) {
	single := filepath.Join(dir, "model.safetensors")
	indexPath := filepath.Join(dir, IndexFile)
	if _, err := os.Stat(indexPath); errors.Is(err, os.ErrNotExist) {
		f, err := Open(single)
		if err != nil {
			return nil, err
		}
		s := &Set{files: []*File{f}, where: map[string]*File{}}
		for name := range f.Tensors {
			s.where[name] = f
		}
		return s, nil
	}
	b, err := os.ReadFile(indexPath)
	if err != nil {
		return nil, err
	}
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, fmt.Errorf("%s: %v", indexPath, err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("%s: empty weight_map", indexPath)
	}
	s := &Set{where: map[string]*File{}}
	opened := map[string]*File{}
	fail := func(err error) (*Set, error) {
		s.Close()
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(idx.WeightMap)) {
		shard := idx.WeightMap[name]
		if shard == "" || filepath.Base(shard) != shard {
			return fail(fmt.Errorf("%s: tensor %q: shard %q is not a file name in the directory", indexPath, name, shard))
		}
		f, ok := opened[shard]
		if !ok {
			var err error
			if f, err = Open(filepath.Join(dir, shard)); err != nil {
				return fail(err)
			}
			opened[shard] = f
			s.files = append(s.files, f)
		}
		if _, ok := f.Tensors[name]; !ok {
			return fail(fmt.Errorf("%s: tensor %q: not in %s, where the index puts it", indexPath, name, shard))
		}
		s.where[name] = f
	}
	for _, f := range s.files {
		for name := range f.Tensors {
			if s.where[name] != f {
				return fail(fmt.Errorf("%s: tensor %q is in %s but the index does not put it there", indexPath, name, f.Path))
			}
		}
	}
	return s, nil
}

// Close closes every file.
func (s *Set) Close() error {
	var first error
	for _, f := range s.files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Info returns the description of tensor name.
func (s *Set) Info(name string) (Info, bool) {
	f, ok := s.where[name]
	if !ok {
		return Info{}, false
	}
	return f.Tensors[name], true
}

// Names lists every tensor name, sorted.
func (s *Set) Names() []string {
	out := make([]string, 0, len(s.where))
	for k := range s.where {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Float32 reads tensor name as float32 values.
func (s *Set) Float32(name string) ([]float32, Info, error) {
	f, ok := s.where[name]
	if !ok {
		return nil, Info{}, fmt.Errorf("no tensor %q in the model's weights", name)
	}
	return f.Float32(name)
}

// createTemp creates a new file dir/prefix<random> with mode 0644 (less the
// umask), as os.CreateTemp does with 0600.
func createTemp(dir, prefix string) (*os.File, error) {
	for range 100 {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(filepath.Join(dir, prefix+hex.EncodeToString(b[:])), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		return f, err
	}
	return nil, fmt.Errorf("safetensors: no free temporary name for %s in %s", prefix, dir)
}
