package bench

import (
	"os"
	"path/filepath"
	"testing"
)

// The bench's record of its command (commands.txt, results.md) carries no
// absolute path of this machine.
func TestDisplayPath(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ in, want string }{
		{"bench/smoke.yaml", "bench/smoke.yaml"},
		{filepath.Join(wd, "bench", "smoke.yaml"), filepath.Join("bench", "smoke.yaml")},
		{"/elsewhere/zoo/out", ".../out"},
		{filepath.Dir(wd), ".../" + filepath.Base(filepath.Dir(wd))},
	} {
		if got := DisplayPath(tc.in); got != tc.want {
			t.Errorf("DisplayPath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
