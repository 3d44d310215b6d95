package readcap

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// endless is a reader that never ends: a generator of 'a's.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// A file at the cap is read; one byte more is refused naming the path,
// the cap and the hint, before anything is read.
func TestLimitReadFile(t *testing.T) {
	l := Limit{"config", 1000, "a config is a few KB; is it the right file?", false}
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok.yaml")
	os.WriteFile(ok, []byte(strings.Repeat("x", 1000)), 0o644)
	if data, err := l.ReadFile(ok); err != nil || len(data) != 1000 {
		t.Fatalf("a file at the cap: %d bytes, %v", len(data), err)
	}
	big := filepath.Join(dir, "big.yaml")
	os.WriteFile(big, []byte(strings.Repeat("x", 1001)), 0o644)
	_, err := l.ReadFile(big)
	if !errors.Is(err, ErrTooLarge) || err.Error() != "config "+big+": larger than 1000 bytes: refused (a config is a few KB; is it the right file?)" {
		t.Fatalf("a file over the cap: %v", err)
	}
	if _, err := l.ReadFile(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing file: %v, want the open error", err)
	}
	if got := (&TooLargeError{Config, "c.yaml"}).Error(); got != "config c.yaml: larger than 16 MiB: refused (a config is a few KB; is it the right file?)" {
		t.Errorf("Config's error: %s", got)
	}
}

// A stream that never ends is refused once the cap is passed.
func TestLimitReadEndless(t *testing.T) {
	l := Limit{"stdin", 1 << 20, "hint", false}
	if _, err := l.Read(endless{}, ""); !errors.Is(err, ErrTooLarge) || !strings.HasPrefix(err.Error(), "stdin: larger than 1 MiB") {
		t.Fatalf("endless stream: %v", err)
	}
	r := l.Reader(endless{}, "")
	_, err := io.Copy(io.Discard, r)
	if !errors.Is(err, ErrTooLarge) || !errors.Is(Over(r), ErrTooLarge) {
		t.Fatalf("Reader on an endless stream: %v, Over %v", err, Over(r))
	}
	if data, err := io.ReadAll(l.Reader(strings.NewReader("short"), "")); err != nil || string(data) != "short" {
		t.Fatalf("Reader on a short stream: %q %v", data, err)
	}
}

// /dev/zero as a config ends at the cap, at once; as a rollout file (a
// JSON object) at its first byte.
func TestLimitDevZero(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	began := time.Now()
	if _, err := Config.ReadFile("/dev/zero"); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("/dev/zero as a config: %v", err)
	}
	if _, err := Rollout.ReadFile("/dev/zero"); err == nil || !strings.Contains(err.Error(), "/dev/zero: want a JSON object (a rollout file), and it starts with byte 0x00") {
		t.Fatalf("/dev/zero as a rollout file: %v", err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Fatalf("took %v", took)
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{16 << 20: "16 MiB", 2 << 30: "2 GiB", 64 << 10: "64 KiB", 1000: "1000 bytes"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %s, want %s", n, got, want)
		}
	}
}
