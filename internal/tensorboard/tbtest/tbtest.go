// Package tbtest reads TensorBoard event files with an independent reader
// (internal/tensorboard/testdata/read_events.py, plain Python: its own
// CRC-32C and protobuf decoding), for tests that check what cde wrote.
package tbtest

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Script is the reader's path.
func Script() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "read_events.py")
}

// Read runs the reader on an event file and returns its records (JSON
// objects: step, wall_time, file_version or scalars). Without a python3 it
// skips, but not under CI, where it fails.
func Read(t testing.TB, path string) []map[string]any {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		py = "/usr/bin/python3"
	}
	if _, err := os.Stat(py); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no python3: CI is set, so the independent reader must run")
		}
		t.Skip("skipping: no python3 for the independent reader (CI is unset)")
	}
	out, err := exec.Command(py, Script(), path).CombinedOutput()
	if err != nil {
		t.Fatalf("read_events.py: %v\n%s", err, out)
	}
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("read_events.py printed %q: %v", line, err)
		}
		recs = append(recs, r)
	}
	return recs
}

// Float32 is the float32 a reader value stands for ("nan", "inf" and
// "-inf" for the non-finite ones).
func Float32(v any) float32 {
	switch x := v.(type) {
	case float64:
		return float32(x)
	case string:
		switch x {
		case "inf":
			return float32(math.Inf(1))
		case "-inf":
			return float32(math.Inf(-1))
		}
	}
	return float32(math.NaN())
}

// Same reports whether two float32s are the same value (NaN equals NaN,
// and -0 differs from +0).
func Same(a, b float32) bool {
	if a != a || b != b {
		return a != a && b != b
	}
	return a == b && math.Signbit(float64(a)) == math.Signbit(float64(b))
}
