package trainer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A second holder of a run directory is refused while the first holds it
// (flock conflicts between two open files even in one process), and gets
// it once the first lets go.
func TestRunDirLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run")
	a, err := NewRunDir(path, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewRunDir(path, false); !errors.Is(err, ErrRunDirInUse) || !strings.Contains(err.Error(), "pid") {
		t.Fatalf("second NewRunDir: %v, want ErrRunDirInUse naming the pid", err)
	}
	os.WriteFile(filepath.Join(path, "config.yaml"), []byte("seed: 1\n"), 0o644)
	if _, err := OpenRunDir(path); !errors.Is(err, ErrRunDirInUse) {
		t.Fatalf("OpenRunDir while held: %v, want ErrRunDirInUse", err)
	}
	a.Close()
	b, err := OpenRunDir(path)
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
}

// A directory holding a run is refused for a new run unless overwrite,
// which deletes the run's files and nothing else; an empty or missing one
// is taken.
func TestNewRunDirRefusesARun(t *testing.T) {
	for _, held := range []string{"config.yaml", "metrics.jsonl", "checkpoints"} {
		path := t.TempDir()
		os.WriteFile(filepath.Join(path, "notes.txt"), []byte("mine"), 0o644)
		if held == "checkpoints" {
			os.Mkdir(filepath.Join(path, held), 0o755)
		} else {
			os.WriteFile(filepath.Join(path, held), []byte("{}\n"), 0o644)
		}
		if _, err := NewRunDir(path, false); err == nil || !strings.Contains(err.Error(), held) || !strings.Contains(err.Error(), "--resume") {
			t.Fatalf("%s: got %v, want a refusal naming it and --resume", held, err)
		}
		d, err := NewRunDir(path, true)
		if err != nil {
			t.Fatal(err)
		}
		d.Close()
		if _, err := os.Stat(filepath.Join(path, held)); !os.IsNotExist(err) {
			t.Fatalf("--overwrite left %s", held)
		}
		if _, err := os.Stat(filepath.Join(path, "notes.txt")); err != nil {
			t.Fatal("--overwrite deleted a file that is not the run's")
		}
	}
	d, err := NewRunDir(t.TempDir(), false) // empty
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
}

// Default names never collide, however fast runs start.
func TestNewRunDirUnderIsUnique(t *testing.T) {
	parent := t.TempDir()
	seen := map[string]bool{}
	for range 300 {
		d, err := NewRunDirUnder(parent, "grpo")
		if err != nil {
			t.Fatal(err)
		}
		if seen[d.Path] || !strings.HasSuffix(d.Path, "-grpo") {
			t.Fatalf("name %s repeated or malformed", d.Path)
		}
		seen[d.Path] = true
		d.Close()
	}
}

// Discard removes a directory this process made when the run wrote no
// progress, and keeps one with a metrics row or made by someone else.
func TestDiscard(t *testing.T) {
	parent := t.TempDir()
	d, _ := NewRunDir(filepath.Join(parent, "failed"), false)
	os.WriteFile(filepath.Join(d.Path, "config.yaml"), []byte("seed: 1\n"), 0o644)
	os.WriteFile(filepath.Join(d.Path, "metrics.jsonl"), nil, 0o644)
	d.Discard()
	if _, err := os.Stat(d.Path); !os.IsNotExist(err) {
		t.Fatal("a failed start left its run directory")
	}
	d, _ = NewRunDir(filepath.Join(parent, "progress"), false)
	os.WriteFile(filepath.Join(d.Path, "metrics.jsonl"), []byte(`{"step":0}`+"\n"), 0o644)
	d.Discard()
	if _, err := os.Stat(d.Path); err != nil {
		t.Fatal("Discard removed a run with progress")
	}
	existing := filepath.Join(parent, "existing")
	os.Mkdir(existing, 0o755)
	d, _ = NewRunDir(existing, false)
	d.Discard()
	if _, err := os.Stat(existing); err != nil {
		t.Fatal("Discard removed a directory it did not make")
	}
}
