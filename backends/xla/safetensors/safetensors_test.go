package safetensors

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// build makes a file from a JSON header and data, as the format says:
// 8-byte little-endian header length, header, data.
func build(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}

func writeTemp(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestOpenHandBuilt(t *testing.T) {
	data := []byte{
		0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0, // a: F32 1.0, -2.0
		0x80, 0x3f, 0x80, 0x7f, // b: BF16 1.0, +Inf
		0x00, 0x3c, 0x01, 0x00, // c: F16 1.0, 2^-24
	}
	hdr := `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"BF16","shape":[1,2],"data_offsets":[8,12]},` +
		`"c":{"dtype":"F16","shape":[2],"data_offsets":[12,16]},"__metadata__":{"format":"pt"}}`
	f, err := Open(writeTemp(t, "m.safetensors", build(hdr, data)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !reflect.DeepEqual(f.Names(), []string{"a", "b", "c"}) || f.Metadata["format"] != "pt" {
		t.Fatalf("names %v metadata %v", f.Names(), f.Metadata)
	}
	for _, c := range []struct {
		name  string
		want  []float32
		shape []int
	}{
		{"a", []float32{1, -2}, []int{2}},
		{"b", []float32{1, float32(math.Inf(1))}, []int{1, 2}},
		{"c", []float32{1, 5.9604645e-08}, []int{2}},
	} {
		got, info, err := f.Float32(c.name)
		if err != nil || !reflect.DeepEqual(got, c.want) || !reflect.DeepEqual(info.Shape, c.shape) {
			t.Errorf("%s: %v %v %v; want %v %v", c.name, got, info.Shape, err, c.want, c.shape)
		}
	}
	if info := f.Tensors["b"]; info.Offset != int64(8+len(hdr)+8) || info.Size != 4 || info.Elems() != 2 {
		t.Errorf("b: %+v", info)
	}
}

func TestHalfToFloat32(t *testing.T) {
	for _, c := range []struct {
		h    uint16
		want float32
	}{
		{0x3c00, 1}, {0xc000, -2}, {0x7bff, 65504}, {0x0001, 5.9604645e-08}, {0x03ff, 6.097555e-05},
		{0x0400, 6.1035156e-05}, {0x3555, 0.33325195}, {0x8000, float32(math.Copysign(0, -1))},
		{0x7c00, float32(math.Inf(1))}, {0xfc00, float32(math.Inf(-1))},
	} {
		got := HalfToFloat32(c.h)
		if math.Float32bits(got) != math.Float32bits(c.want) {
			t.Errorf("HalfToFloat32(%#04x) = %v (%#08x), want %v", c.h, got, math.Float32bits(got), c.want)
		}
	}
	if v := HalfToFloat32(0x7e00); v == v {
		t.Error("0x7e00 is not NaN")
	}
}

func TestFloat32ToBF16(t *testing.T) {
	for _, c := range []struct {
		v    float32
		want uint16
	}{
		{1, 0x3f80}, {-2, 0xc000},
		{1.00390625, 0x3f80}, // 1 + 2^-8: halfway, ties to even (0x3f80)
		{1.01171875, 0x3f82}, // 1 + 3*2^-8: halfway, ties to even (0x3f82)
		{1.0078125, 0x3f81},  // exact
		{1.0050000, 0x3f81},  // nearer 0x3f81
		{float32(math.Inf(-1)), 0xff80},
	} {
		if got := Float32ToBF16(c.v); got != c.want {
			t.Errorf("Float32ToBF16(%v) = %#04x, want %#04x", c.v, got, c.want)
		}
	}
	if got := Float32ToBF16(float32(math.NaN())); got&0x7f80 != 0x7f80 || got&0x7f == 0 {
		t.Errorf("NaN -> %#04x", got)
	}
}

func TestOpenErrors(t *testing.T) {
	ok := `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"short", []byte{1, 2, 3}, "too short"},
		{"header past end", binary.LittleEndian.AppendUint64(nil, 100), "past the end of the file"},
		{"bad json", build(`{"a":`, nil), "header: "},
		{"unknown dtype", build(`{"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}}`, []byte{0}), `tensor "a": unknown dtype "Q4"`},
		{"size mismatch", build(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, make([]byte, 8)), `tensor "a": 8 bytes for shape [3] of F32 (12 bytes)`},
		{"outside", build(ok, make([]byte, 4)), `tensor "a": data_offsets [0, 8] outside the 4 data bytes`},
		{"negative dim", build(`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}}`, nil), "bad shape [-1]"},
		{"overlap", build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8)), `tensors "a" and "b" overlap`},
		{"duplicate key", build(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8)), `key "a" twice`},
		{"unknown field", build(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}}`, make([]byte, 4)), `tensor "a": json: unknown field "x"`},
		{"bad metadata", build(`{"__metadata__":{"a":1}}`, nil), "__metadata__: want a map of strings"},
	} {
		_, err := Open(writeTemp(t, "bad.safetensors", c.b))
		if err == nil || !strings.Contains(err.Error(), "bad.safetensors: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one naming the file and containing %q", c.name, err, c.want)
		}
	}
}

func TestWriteRoundTrip(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "model.safetensors")
	vals := []float32{0.5, -1.25, 3, 1e-3, 7, -8}
	ts := []Tensor{F32Tensor("w.weight", []int{2, 3}, vals), BF16Tensor("b.bias", []int{3}, vals[:3]), F32Tensor("s", nil, []float32{2})}
	if err := WriteFile(p, ts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(p)
	if n := binary.LittleEndian.Uint64(raw); (8+n)%8 != 0 || !bytes.HasPrefix(raw[8:], []byte(`{"__metadata__"`)) {
		t.Fatalf("header length %d, starts %q", n, raw[8:30])
	}
	set, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	if !reflect.DeepEqual(set.Names(), []string{"b.bias", "s", "w.weight"}) {
		t.Fatalf("names %v", set.Names())
	}
	for name, want := range map[string][]float32{"w.weight": vals, "b.bias": {0.5, -1.25, 3}, "s": {2}} {
		got, _, err := set.Float32(name)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v %v", name, got, err)
		}
	}
	if info, _ := set.Info("s"); len(info.Shape) != 0 || info.Elems() != 1 {
		t.Errorf("scalar info %+v", info)
	}
	if err := Encode(&bytes.Buffer{}, []Tensor{F32Tensor("x", []int{2}, []float32{1})}, nil); err == nil || !strings.Contains(err.Error(), `"x": 4 bytes for shape [2]`) {
		t.Errorf("bad tensor: %v", err)
	}
	if err := Encode(&bytes.Buffer{}, []Tensor{F32Tensor("x", nil, []float32{1}), F32Tensor("x", nil, []float32{1})}, nil); err == nil {
		t.Error("duplicate written")
	}
}

func TestOpenDirSharded(t *testing.T) {
	dir := t.TempDir()
	if err := WriteFile(filepath.Join(dir, "model-00001-of-00002.safetensors"), []Tensor{F32Tensor("a", []int{1}, []float32{1})}, nil); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(filepath.Join(dir, "model-00002-of-00002.safetensors"), []Tensor{F32Tensor("b", []int{1}, []float32{2})}, nil); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(filepath.Join(dir, "extra.safetensors"), []Tensor{F32Tensor("a", []int{1}, []float32{1}), F32Tensor("c", []int{1}, []float32{3})}, nil); err != nil {
		t.Fatal(err)
	}
	index := func(m string) {
		if err := os.WriteFile(filepath.Join(dir, IndexFile), []byte(m), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	index(`{"metadata":{"total_size":8},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}`)
	s, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if v, _, err := s.Float32("b"); err != nil || v[0] != 2 {
		t.Fatalf("b = %v, %v", v, err)
	}
	s.Close()
	for _, c := range []struct{ index, want string }{
		{`{"weight_map":{"a":"model-00002-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}`, `tensor "a": not in model-00002-of-00002.safetensors`},
		{`{"weight_map":{"a":"extra.safetensors"}}`, `tensor "c" is in`},
		{`{"weight_map":{"a":"../x.safetensors"}}`, "not a file name in the directory"},
		{`{"weight_map":{}}`, "empty weight_map"},
		{`{"weight_map":{"a":"missing.safetensors"}}`, "missing.safetensors: no such file"},
	} {
		index(c.index)
		if _, err := OpenDir(dir); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("index %s: err = %v, want %q", c.index, err, c.want)
		}
	}
}

// FuzzOpen: no panic on any bytes; an accepted file's tensors all read
// back with the sizes the header gives.
func FuzzOpen(f *testing.F) {
	f.Add(build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"k":"v"}}`, make([]byte, 8)))
	f.Add(build(`{"a":{"dtype":"BF16","shape":[1,1],"data_offsets":[0,2]},"b":{"dtype":"I64","shape":[],"data_offsets":[2,10]}}`, make([]byte, 10)))
	f.Fuzz(func(t *testing.T, b []byte) {
		sf, err := parse(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		for name, info := range sf.Tensors {
			if info.Offset < 8 || info.Offset+info.Size > int64(len(b)) || info.Size != info.Elems()*int64(dtypeSize[info.DType]) {
				t.Fatalf("%s: %+v in %d bytes", name, info, len(b))
			}
		}
	})
}
