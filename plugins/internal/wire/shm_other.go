//go:build !linux

package wire

import pb "github.com/cde-rl/cde/plugins/proto"

// ShmSupported says whether this build has the shared-memory transport
// (Linux only: memfds and /proc).
const ShmSupported = false

// HostRegion is a shared-memory region of the host (none here).
type HostRegion struct {
	Mem  []byte
	ID   uint64
	Path string
}

// NewHostRegion fails: no shared-memory transport on this platform.
func NewHostRegion(string, int, bool) (*HostRegion, error) { return nil, ErrShmUnsupported }

func (r *HostRegion) proto() *pb.ShmRegion { return &pb.ShmRegion{} }

// Close does nothing.
func (r *HostRegion) Close() {}

// PluginRegion is the plugin's mapping of a host region (none here).
type PluginRegion struct {
	Mem  []byte
	ID   uint64
	Path string
}

// OpenRegion fails: no shared-memory transport on this platform.
func OpenRegion(*pb.ShmRegion, bool) (*PluginRegion, error) { return nil, ErrShmUnsupported }

// Close does nothing.
func (r *PluginRegion) Close() {}
