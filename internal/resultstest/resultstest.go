// Package resultstest gives tests a committed bench report with its runs:
// docs/results/NAME keeps them packed as runs.tar.xz (docs/results/README.md),
// and Unpack copies the report into a temporary directory and unpacks the
// runs there, as `tar -xJf runs.tar.xz` does by hand.
package resultstest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Unpack copies the files of the results directory dir (not its
// subdirectories other than plots, which a report rewrites anyway) into a
// temporary directory, unpacks dir/runs.tar.xz there with tar, and returns
// the copy's path.
func Unpack(t testing.TB, dir string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), filepath.Base(dir))
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || e.Name() == "runs.tar.xz" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if b, err := exec.Command("tar", "-xJf", filepath.Join(dir, "runs.tar.xz"), "-C", out).CombinedOutput(); err != nil {
		t.Fatalf("unpacking %s/runs.tar.xz: %v\n%s", dir, err, b)
	}
	return out
}
