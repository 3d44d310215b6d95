package cpu

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// vmFlags returns the VmFlags of the mapping in /proc/self/smaps that holds
// address a.
func vmFlags(t *testing.T, a uintptr) []string {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x", &lo, &hi); n == 2 && strings.Contains(strings.Fields(line)[0], "-") {
			in = lo <= a && a < hi
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return strings.Fields(strings.TrimPrefix(line, "VmFlags:"))
		}
	}
	t.Fatalf("no mapping holds %#x", a)
	return nil
}

// Float32 buffers of 4 MiB and more are advised onto transparent huge
// pages: their mapping carries VmFlags "hg" (MADV_HUGEPAGE).
func TestLargeBuffersAdviseHugePages(t *testing.T) {
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil {
		t.Skip("this kernel has no transparent huge pages")
	}
	big := newF32(3 << 20) // 12 MiB: at least one aligned 2 MiB page inside
	mid := uintptr(unsafe.Pointer(&big[len(big)/2]))
	if flags := vmFlags(t, mid); !slices.Contains(flags, "hg") {
		t.Fatalf("a 12 MiB buffer's mapping has VmFlags %v, want hg (MADV_HUGEPAGE)", flags)
	}
}
