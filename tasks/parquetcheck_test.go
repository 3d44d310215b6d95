package tasks

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// frame wraps a footer as a parquet file: magic, footer, its length, magic.
func frame(footer []byte) []byte {
	b := append([]byte("PAR1"), footer...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(footer)))
	return append(b, "PAR1"...)
}

// Files that made the parquet library allocate what they claim (found by
// FuzzMathParquet) fail with an error naming the file, allocating little.
func TestParquetBombs(t *testing.T) {
	// A list of 2^32-1 structs as the footer's schema (field 2).
	listBomb := frame([]byte{0x15, 0x02, 0x19, 0xfc, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00})
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		// 16 bytes whose footer length reads as 0x776f6203 (2 GiB).
		{"footer length", []byte("PAR1\x04\x19\x8cH\x03bowPAR1"), "footer of 2003788291 bytes in a file of 16"},
		{"short", []byte("PAR1PAR1"), "8 bytes, too short"},
		{"no magic", []byte("PAR1 not parquet at all PAR2"), `no parquet magic bytes ("PAR1")`},
		{"encrypted", append([]byte("PAR1\x00\x00\x00\x00"), "\x00\x00\x00\x00PARE"...), "encrypted"},
		{"thrift list", listBomb, "list of 4294967295 elements"},
		{"thrift truncated", frame([]byte{0x15, 0x02, 0x18, 0x7f, 'a'}), "footer: thrift: truncated"},
		{"thrift depth", frame(bytes.Repeat([]byte{0x1c}, 100)), "nested too deeply"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var err error
			n := allocated(func() {
				_, err = ReadMathParquet(bytes.NewReader(c.data), int64(len(c.data)), "bomb.parquet", MathKeys{})
			})
			if err == nil || !strings.HasPrefix(err.Error(), "bomb.parquet: ") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one containing %q", err, c.want)
			}
			if n > 1<<20 {
				t.Fatalf("allocated %d bytes", n)
			}
		})
	}
}

// The checks accept real files: the arrow-rs-written GSM8K files pass
// checkParquetFrame, and every page of them passes checkPageRuns (the
// loader tests read them whole).
func TestParquetChecksAcceptReal(t *testing.T) {
	for _, name := range []string{"verl_gsm8k_train.parquet", "verl_gsm8k_test.parquet"} {
		b, err := os.ReadFile(filepath.Join("testdata", "math", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := checkParquetFrame(bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

func TestCheckThrift(t *testing.T) {
	for _, c := range []struct {
		name string
		b    []byte
		n    int
		want string
	}{
		{"empty struct", []byte{0x00, 0xff}, 1, ""},
		{"i32, binary, bool", []byte{0x15, 0x04, 0x18, 0x02, 'h', 'i', 0x11, 0x00}, 8, ""},
		{"long-form id", []byte{0x05, 0x0a, 0x02, 0x00}, 4, ""},
		{"list of 3 i32", []byte{0x19, 0x35, 0x01, 0x02, 0x03, 0x00}, 6, ""},
		{"list of bools", []byte{0x19, 0x21, 0x01, 0x02, 0x00}, 5, ""},
		{"map i32->binary", []byte{0x1b, 0x01, 0x58, 0x02, 0x01, 'x', 0x00}, 7, ""},
		{"nested struct", []byte{0x1c, 0x15, 0x02, 0x00, 0x00}, 5, ""},
		{"double", []byte{0x17, 1, 2, 3, 4, 5, 6, 7, 8, 0x00}, 10, ""},
		{"uuid", append(append([]byte{0x1d}, make([]byte, 16)...), 0x00), 18, ""},
		{"binary too long", []byte{0x18, 0x10, 'a', 0x00}, 0, "truncated"},
		{"list too long", []byte{0x19, 0xf5, 0x80, 0x01, 0x00}, 0, "list of 128 elements in 1 bytes"},
		{"map too long", []byte{0x1b, 0x40, 0x55, 0x00}, 0, "map of 64 entries"},
		{"unknown type", []byte{0x1e, 0x00}, 0, "unknown type 14"},
		{"no stop", []byte{0x15, 0x02}, 0, "truncated"},
		{"bad varint", []byte{0x15, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 0, "bad varint"},
	} {
		n, err := checkThrift(c.b)
		if c.want == "" {
			if err != nil || n != c.n {
				t.Errorf("%s: %d, %v; want %d", c.name, n, err, c.n)
			}
		} else if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
}

// checkRuns against run-length/bit-packed hybrid streams written out by
// hand (header = count<<1 for a run of one value, groups<<1|1 for
// bit-packed groups of 8).
func TestCheckRuns(t *testing.T) {
	for _, c := range []struct {
		name     string
		b        []byte
		width, n int
		want     string
	}{
		{"run of 5", []byte{5 << 1, 0x01}, 1, 5, ""},
		{"two runs", []byte{3 << 1, 0x01, 2 << 1, 0x00}, 1, 5, ""},
		{"bit-packed 8, width 3", append([]byte{1<<1 | 1}, 0, 0, 0), 3, 6, ""}, // 8 values, 6 used: padding
		{"run width 9", []byte{4 << 1, 0x01, 0x01}, 9, 4, ""},
		{"empty", nil, 1, 0, ""},
		{"run too long", []byte{0xfe, 0xff, 0xff, 0xff, 0x0f, 0x01}, 1, 100, "runs hold over 2147483647 values, the page says 100"},
		{"runs add up too long", []byte{60 << 1, 0x01, 60 << 1, 0x00}, 1, 100, "runs hold over 120 values"},
		{"bit-packed past end", []byte{2<<1 | 1, 0x00}, 3, 16, "past the stream's end"},
		{"run value missing", []byte{3 << 1}, 8, 3, "past the stream's end"},
		{"bad header", []byte{0x80}, 1, 3, "bad run header"},
	} {
		err := checkRuns(c.b, c.width, c.n, "levels")
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
}
