package trainer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A directory holding only a lock is no run: OpenRunDir says the command
// that starts it again.
func TestOpenRunDirLockOnly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	os.Mkdir(dir, 0o755)
	os.WriteFile(filepath.Join(dir, lockName), []byte("1\n"), 0o644)
	_, err := OpenRunDir(dir)
	if err == nil || !strings.Contains(err.Error(), "holds a lock but no config.yaml") || !strings.Contains(err.Error(), "cde-run train --run-dir "+dir) {
		t.Fatalf("OpenRunDir of a lock-only directory: %v", err)
	}
	if _, err := OpenRunDir(t.TempDir()); err == nil || !strings.Contains(err.Error(), "is not a run directory") {
		t.Fatalf("OpenRunDir of an empty directory: %v", err)
	}
}

// A failed start in a directory this process did not make removes the
// run files it wrote there and keeps the directory and other files.
func TestDiscardInExistingDirectory(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine\n"), 0o644)
	d, err := NewRunDir(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "config.yaml"), []byte("seed: 1\n"), 0o644)
	d.Discard()
	if _, err := os.Stat(filepath.Join(dir, "config.yaml")); !os.IsNotExist(err) {
		t.Fatal("a failed start left its config.yaml")
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatal("Discard removed a file not the run's")
	}
	if d, err = NewRunDir(dir, false); err != nil {
		t.Fatalf("the directory is not free again: %v", err)
	}
	d.Close()
}
