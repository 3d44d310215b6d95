package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A finished run's metrics.jsonl is read whole, lines of any length (the
// old scanner stopped at 64 MiB), and a line that is not a row is an error
// naming the file and line (it was skipped, so a verdict could rest on a
// run with rows left out).
func TestReadMetricRows(t *testing.T) {
	long := `{"step":1,` + strings.Repeat(" ", 65<<20) + `"a":1}`
	cases := []struct {
		name, text string
		rows       int
		err        string
	}{
		{"rows and a blank line", "{\"step\":0,\"a\":1}\n\n{\"step\":1,\"a\":null}\n", 2, ""},
		{"no final newline", "{\"step\":0}\n{\"step\":1}", 2, ""},
		{"a 65 MiB row", "{\"step\":0}\n" + long + "\n{\"step\":2}\n", 3, ""},
		{"a corrupt line", "{\"step\":0}\n{\"step\":1,\"a\"\n{\"step\":2}\n", 0, "metrics.jsonl line 2 is not a metrics row"},
		{"random bytes", "{\"step\":0}\n{\"step\":1}\n\x8f\x00\xfe\n", 0, "metrics.jsonl line 3 is not a metrics row"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "metrics.jsonl")
			if err := os.WriteFile(path, []byte(c.text), 0o644); err != nil {
				t.Fatal(err)
			}
			rows, err := readMetricRows(path)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), path) {
					t.Fatalf("got %v, want an error with %q naming the file", err, c.err)
				}
				return
			}
			if err != nil || len(rows) != c.rows {
				t.Fatalf("got %d rows, %v; want %d", len(rows), err, c.rows)
			}
			if _, ok := rows[len(rows)-1]["step"]; !ok {
				t.Fatal("the last row has no step")
			}
			if bytes.Contains([]byte(c.text), []byte("null")) {
				if _, ok := rows[1]["a"]; ok {
					t.Fatal("a null value was read as a number")
				}
			}
		})
	}
}
