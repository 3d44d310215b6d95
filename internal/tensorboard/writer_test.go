package tensorboard

import (
	"hash/crc32"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cde-rl/cde/internal/tensorboard/tbtest"
)

// The Castagnoli CRC's standard check value: CRC-32C("123456789").
func TestCRC32C(t *testing.T) {
	if got := crc32.Checksum([]byte("123456789"), castagnoli); got != 0xE3069283 {
		t.Fatalf("crc32c %#x, want 0xe3069283", got)
	}
}

// Every value written, finite or not, is read back by the independent
// reader as the float32 TensorBoard stores, with its step, tag and wall
// time, after the file-version record.
func TestIndependentReader(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	steps := []map[string]float64{
		{"reward/mean": 0.25, "actor/loss": -1.5e-7, "val/l1/avg@4": 1},
		{"reward/mean": math.NaN(), "big": 3.4e38, "tiny": 1e-45, "neg_zero": math.Copysign(0, -1)},
		{"inf": math.Inf(1), "minus_inf": math.Inf(-1), "pi": math.Pi},
	}
	at := time.Unix(1700000000, 250000000)
	for i, m := range steps {
		if err := w.Scalars(10*i, at, m); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	recs := tbtest.Read(t, w.Path)
	if len(recs) != 1+len(steps) || recs[0]["file_version"] != FileVersion {
		t.Fatalf("records %v", recs)
	}
	for i, m := range steps {
		r := recs[i+1]
		if r["step"] != float64(10*i) || r["wall_time"] != 1700000000.25 {
			t.Fatalf("record %d: step %v wall time %v", i+1, r["step"], r["wall_time"])
		}
		got := r["scalars"].(map[string]any)
		if len(got) != len(m) {
			t.Fatalf("step %d: %d scalars, want %d", 10*i, len(got), len(m))
		}
		for k, v := range m {
			if g := tbtest.Float32(got[k]); !tbtest.Same(g, float32(v)) {
				t.Errorf("step %d %s: read %v, wrote %v (float32 %v)", 10*i, k, got[k], v, float32(v))
			}
		}
	}
	// Go's own reader agrees.
	events, err := ReadFile(w.Path)
	if err != nil || len(events) != 4 {
		t.Fatalf("ReadFile: %d events (%v)", len(events), err)
	}
	if v, ok := Scalar(events[3], "pi"); !ok || v != float64(float32(math.Pi)) {
		t.Fatalf("pi %v", v)
	}
}

// Reopening for a resume keeps the records of the steps before it and
// the file-version record, drops the later ones and a torn last record,
// and appends after them; a damaged record is an error naming its offset.
func TestResume(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	for s := range 5 {
		w.Scalars(s, time.Now(), map[string]float64{"x": float64(s)})
	}
	w.Close()
	f, _ := os.OpenFile(w.Path, os.O_APPEND|os.O_WRONLY, 0)
	f.Write([]byte{7, 0, 0}) // a crash in the middle of a record header
	f.Close()
	if _, err := ReadFile(w.Path); err == nil || !strings.Contains(err.Error(), "ends inside a record") {
		t.Fatalf("torn file: %v", err)
	}
	w2, err := Open(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	if w2.Path != w.Path {
		t.Fatalf("resumed into %s, not %s", w2.Path, w.Path)
	}
	w2.Scalars(3, time.Now(), map[string]float64{"x": 30})
	w2.Close()
	events, err := ReadFile(w2.Path)
	if err != nil {
		t.Fatal(err)
	}
	var got []float64
	for _, e := range events[1:] {
		v, _ := Scalar(e, "x")
		got = append(got, float64(e.Step), v)
	}
	if want := []float64{0, 0, 1, 1, 2, 2, 3, 30}; !slices.Equal(got, want) || events[0].GetFileVersion() != FileVersion {
		t.Fatalf("after resume: %v, want %v", got, want)
	}
	data, _ := os.ReadFile(w2.Path)
	data[len(data)-1] ^= 1
	os.WriteFile(w2.Path, data, 0o644)
	if _, err := ReadFile(w2.Path); err == nil || !strings.Contains(err.Error(), "data CRC mismatch") {
		t.Fatalf("flipped bit: %v", err)
	}
	if _, err := Open(dir, 1); err == nil {
		t.Fatal("Open accepted a damaged event file")
	}
}
