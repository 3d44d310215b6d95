package repocheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// treeLimit bounds the tracked tree: a GPU check carries it with about
// 28 MB of binaries and peer sources under the device machine's 64 MiB
// (scripts/gpucheck/prepare), and clones stay quick. It was 34.7 MB when
// this check was added (2026-11-27), 11.4 MB of it the Qwen3 tokenizer
// that tests and docs name by path (tokenizer/testdata/qwen3), so the
// 30 MB the repository aims at is not met yet.
const treeLimit = 36 << 20

// largestFile bounds one tracked file: bench runs and other results are
// committed packed (docs/results/README.md), never as loose files.
const largestFile = 12 << 20

func TestTrackedTreeSize(t *testing.T) {
	root := filepath.Join("..", "..")
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout (%v): the tracked tree cannot be listed", err)
	}
	total := int64(0)
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		st, err := os.Lstat(filepath.Join(root, f))
		if err != nil {
			continue // deleted in the work tree, not yet committed
		}
		total += st.Size()
		if st.Size() > largestFile {
			t.Errorf("%s is %.1f MB, over the %d MB a tracked file may take: pack it (docs/results/README.md)", f, float64(st.Size())/1e6, largestFile>>20)
		}
	}
	t.Logf("tracked tree: %.1f MB (limit %d MiB)", float64(total)/1e6, treeLimit>>20)
	if total > treeLimit {
		t.Errorf("the tracked tree is %.1f MB, over its %d MiB limit: pack results (runs.tar.xz) or drop what is not needed", float64(total)/1e6, treeLimit>>20)
	}
}
