//go:build linux

package wire

import (
	"fmt"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"

	pb "github.com/cde-rl/cde/plugins/proto"
)

// ShmSupported says whether this build has the shared-memory transport.
const ShmSupported = true

var regionIDs atomic.Uint64

// HostRegion is one memfd region the host made: Mem is the host's mapping
// (read-write for an input region, read-only for an answer region), Path
// the /proc path the plugin opens.
type HostRegion struct {
	f    *os.File
	Mem  []byte
	ID   uint64
	Path string
}

// NewHostRegion makes a memfd of size bytes (rounded up to a page), maps
// it for the host and seals it: no one can shrink or grow it (so neither
// side's mapping can lose its pages), and for an input region no one can
// map it writable or write to it from now on (F_SEAL_FUTURE_WRITE), while
// the host keeps the writable mapping it made before sealing. F_SEAL_SEAL
// stops the plugin from adding seals of its own. The memfd has no name in
// any file system: it goes away with the last process that holds it.
func NewHostRegion(role string, size int, input bool) (*HostRegion, error) {
	page := os.Getpagesize()
	size = (max(size, 1) + page - 1) / page * page
	fd, err := unix.MemfdCreate(fmt.Sprintf("cde-plugin-%d-%s", os.Getpid(), role), unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("shm: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "memfd")
	fail := func(what string, err error) (*HostRegion, error) {
		f.Close()
		return nil, fmt.Errorf("shm: %s: %w", what, err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return fail("ftruncate", err)
	}
	prot := unix.PROT_READ
	if input {
		prot |= unix.PROT_WRITE
	}
	mem, err := unix.Mmap(fd, 0, size, prot, unix.MAP_SHARED)
	if err != nil {
		return fail("mmap", err)
	}
	seals := unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL
	if input {
		seals |= unix.F_SEAL_FUTURE_WRITE
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		unix.Munmap(mem)
		return fail("seal", err)
	}
	return &HostRegion{f: f, Mem: mem, ID: regionIDs.Add(1), Path: fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), fd)}, nil
}

func (r *HostRegion) proto() *pb.ShmRegion {
	return &pb.ShmRegion{Path: r.Path, Size: uint64(len(r.Mem)), Id: r.ID}
}

// Close unmaps and closes the region (nil is fine).
func (r *HostRegion) Close() {
	if r == nil || r.f == nil {
		return
	}
	unix.Munmap(r.Mem)
	r.f.Close()
	r.f, r.Mem = nil, nil
}

// PluginRegion is the plugin's mapping of a host region.
type PluginRegion struct {
	Mem  []byte
	ID   uint64
	Path string
}

// OpenRegion maps the host region r: read-only, or read-write for an
// answer region (write). The path must be /proc/<pid>/fd/<fd> and the file
// at least r.Size bytes.
func OpenRegion(r *pb.ShmRegion, write bool) (*PluginRegion, error) {
	if !procFDPath.MatchString(r.Path) {
		return nil, fmt.Errorf("shm: region path %q is not /proc/<pid>/fd/<fd>", r.Path)
	}
	if r.Size == 0 || r.Size > 1<<46 {
		return nil, fmt.Errorf("shm: region %s: size %d", r.Path, r.Size)
	}
	flag, prot := os.O_RDONLY, unix.PROT_READ
	if write {
		flag, prot = os.O_RDWR, unix.PROT_READ|unix.PROT_WRITE
	}
	f, err := os.OpenFile(r.Path, flag, 0)
	if err != nil {
		return nil, fmt.Errorf("shm: %w", err)
	}
	defer f.Close() // the mapping outlives the descriptor
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("shm: %w", err)
	}
	if st.Size() < int64(r.Size) {
		return nil, fmt.Errorf("shm: region %s has %d bytes, the header says %d", r.Path, st.Size(), r.Size)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(r.Size), prot, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shm: mmap %s: %w", r.Path, err)
	}
	return &PluginRegion{Mem: mem, ID: r.Id, Path: r.Path}, nil
}

// Close unmaps the region (nil is fine).
func (r *PluginRegion) Close() {
	if r == nil || r.Mem == nil {
		return
	}
	unix.Munmap(r.Mem)
	r.Mem = nil
}
