package cpu

import (
	"syscall"
	"unsafe"
)

// adviseHugePages asks Linux to back the 2 MiB-aligned interior of a
// buffer of at least hugeAdviceBytes with transparent huge pages
// (madvise MADV_HUGEPAGE; the machines this targets leave THP at
// "madvise", and Go's heap does not ask for them). A large buffer's pages
// are then faulted in 2 MiB at a time: on the 2-core virtual machine
// faulting 1 GiB took 1.7-4.2 s in 4 KiB pages and 0.07-0.34 s in huge
// pages, and a train step of the Qwen3-0.6B shape spent more system time
// than user time on faults. The advice stays with the address range, so
// memory the Go runtime returns to the kernel and reuses keeps it. It is
// only advice: an error is ignored.
func adviseHugePages(p unsafe.Pointer, bytes int) {
	if bytes < hugeAdviceBytes {
		return
	}
	const huge = 2 << 20
	beg := (uintptr(p) + huge - 1) &^ (huge - 1)
	end := (uintptr(p) + uintptr(bytes)) &^ (huge - 1)
	if beg >= end {
		return
	}
	_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, beg, end-beg, madvHugePage)
}

const madvHugePage = 14 // MADV_HUGEPAGE
