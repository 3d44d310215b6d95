//go:build unix

package safetensors

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// WriteFile's file is 0644 less the umask, as os.WriteFile(..., 0o644)
// makes the other files: readable by a server running as another user.
func TestWriteFileMode(t *testing.T) {
	for _, tc := range []struct {
		umask int
		want  os.FileMode
	}{{0o022, 0o644}, {0o002, 0o644}, {0o077, 0o600}} {
		old := syscall.Umask(tc.umask)
		path := filepath.Join(t.TempDir(), "model.safetensors")
		err := WriteFile(path, []Tensor{F32Tensor("w", []int{2}, []float32{1, 2})}, map[string]string{"format": "pt"})
		syscall.Umask(old)
		if err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got != tc.want {
			t.Errorf("umask %03o: mode %03o, want %03o", tc.umask, got, tc.want)
		}
	}
}
