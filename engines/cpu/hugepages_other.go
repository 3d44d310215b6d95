//go:build !linux

package cpu

import "unsafe"

// adviseHugePages is a no-op off Linux (see hugepages_linux.go).
func adviseHugePages(p unsafe.Pointer, bytes int) {}
