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
// (scripts/gpucheck/prepare), and clones stay quick: 30 MB (decimal). It
// was 34.9 MB before the Qwen3 test
// tokenizer (11.4 MB) was committed gzipped (2.1 MB,
// tokenizer/testdata/qwen3/tokenizer.json.gz), 25.6 MB after
// (2026-11-27). Raised to 32 MB on 2026-11-28, when code and tests alone
// took the tree past 30.0 MB: the GPU check's limit on tree and binaries
// together (GPUCHECK_LIMIT_MIB, 61 MiB, enforced by scripts/gpucheck/prepare
// in its CI dry run) is what binds, and 32 MB (30.5 MiB) beside about
// 28 MB of binaries stays under it.
const treeLimit = 32_000_000

// largestFile bounds one tracked file: bench runs and other results are
// committed packed (docs/results/README.md), never as loose files, and
// large test data compressed (the gzipped tokenizer, 2.1 MB, was the
// largest file when this was set).
const largestFile = 4 << 20

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
			t.Errorf("%s is %.1f MB, over the %d MiB a tracked file may take: pack or compress it (docs/results/README.md)", f, float64(st.Size())/1e6, largestFile>>20)
		}
	}
	t.Logf("tracked tree: %.1f MB (limit %.0f MB)", float64(total)/1e6, float64(treeLimit)/1e6)
	if total > treeLimit {
		t.Errorf("the tracked tree is %.1f MB, over its %.0f MB limit: pack results (runs.tar.xz), compress test data, or drop what is not needed", float64(total)/1e6, float64(treeLimit)/1e6)
	}
}
