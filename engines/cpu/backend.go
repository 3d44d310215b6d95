// Package cpu is cde's own GoMLX backend for the CPU: a graph builder and a
// sequential executor whose kernels are written for speed on x86-64 (matrix
// multiplication through the packed, blocked, assembly micro-kernels of
// engines/cpu/gemm; elementwise, broadcast and reduction work split across
// cores) with portable pure-Go code everywhere else.
//
// Importing the package registers the backend under the name "cpu", so
// backends.NewWithConfig("cpu") (or GOMLX_BACKEND=cpu) selects it. It
// implements the ops cde's transformer graphs use (float32 first; integer and
// boolean where the graphs need them). Any other op fails when the graph is
// built, with an error naming the op: never a wrong result.
package cpu

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	"github.com/pkg/errors"

	"github.com/cde-rl/cde/engines/cpu/gemm"
)

// Name is the name the backend is registered under.
const Name = "cpu"

func init() {
	compute.Register(Name, New)
}

// Backend implements compute.Backend.
type Backend struct {
	mu        sync.Mutex
	finalized bool
	// idle tracks the executables' buffer pools (see releaseIdlePools).
	idle idlePools
}

var _ compute.Backend = (*Backend)(nil)

// New returns a new backend. The config string is accepted for symmetry with
// GoMLX's other backends and must be empty.
func New(config string) (compute.Backend, error) {
	if config != "" {
		return nil, errors.Errorf("backend %q takes no configuration, got %q", Name, config)
	}
	return &Backend{}, nil
}

// Name implements compute.Backend.
func (b *Backend) Name() string { return Name }

// String implements compute.Backend.
func (b *Backend) String() string { return Name }

// Description implements compute.Backend.
func (b *Backend) Description() string {
	return fmt.Sprintf("cde CPU engine (%d threads, matmul kernel %s)", runtime.GOMAXPROCS(0), gemm.KernelName())
}

// NumDevices implements compute.Backend: one device, the whole CPU.
func (b *Backend) NumDevices() int { return 1 }

// DeviceDescription implements compute.Backend.
func (b *Backend) DeviceDescription(deviceNum compute.DeviceNum) string {
	return fmt.Sprintf("cpu:%d", deviceNum)
}

// Capabilities implements compute.Backend.
func (b *Backend) Capabilities() compute.Capabilities {
	c := compute.Capabilities{Operations: map[compute.OpType]bool{}, DTypes: map[dtypes.DType]bool{}}
	for op := range opTable {
		c.Operations[op] = true
	}
	for _, dt := range supportedDTypes {
		c.DTypes[dt] = true
	}
	return c
}

// Builder implements compute.Backend.
func (b *Backend) Builder(name string) compute.Builder {
	return newBuilder(b, name)
}

// Finalize implements compute.Backend.
func (b *Backend) Finalize() {
	b.mu.Lock()
	b.finalized = true
	b.mu.Unlock()
}

// IsFinalized implements compute.Backend.
func (b *Backend) IsFinalized() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.finalized
}

// Buffer is the backend's buffer: a shape and a Go slice of its dtype.
// It implements compute.Buffer.
type Buffer struct {
	backend *Backend
	shape   shapes.Shape
	flat    any
}

var _ compute.Buffer = (*Buffer)(nil)

func (b *Backend) buffer(buf compute.Buffer) (*Buffer, error) {
	bb, ok := buf.(*Buffer)
	if !ok || bb == nil {
		return nil, errors.Errorf("backend %q: buffer of type %T is not one of ours", Name, buf)
	}
	if bb.flat == nil {
		return nil, errors.Errorf("backend %q: buffer used after it was finalized", Name)
	}
	return bb, nil
}

func (bb *Buffer) check() error {
	if bb == nil || bb.flat == nil {
		return errors.Errorf("backend %q: buffer used after it was finalized", Name)
	}
	return nil
}

// Backend implements compute.Buffer.
func (bb *Buffer) Backend() compute.Backend { return bb.backend }

// Finalize implements compute.Buffer.
func (bb *Buffer) Finalize() error {
	if err := bb.check(); err != nil {
		return err
	}
	bb.flat = nil
	return nil
}

// Shape implements compute.Buffer.
func (bb *Buffer) Shape() (shapes.Shape, error) {
	if err := bb.check(); err != nil {
		return shapes.Invalid(), err
	}
	return bb.shape, nil
}

// DeviceNum implements compute.Buffer.
func (bb *Buffer) DeviceNum() (compute.DeviceNum, error) { return 0, bb.check() }

// ToFlatData implements compute.Buffer.
func (bb *Buffer) ToFlatData(flat any) error {
	if err := bb.check(); err != nil {
		return err
	}
	n, err := copyFlat(flat, bb.flat)
	if err != nil {
		return errors.WithMessagef(err, "ToFlatData(%s)", bb.shape)
	}
	if n != bb.shape.Size() {
		return errors.Errorf("ToFlatData: buffer %s has %d elements, destination has room for %d", bb.shape, bb.shape.Size(), n)
	}
	return nil
}

// Data implements compute.Buffer.
func (bb *Buffer) Data() (any, error) {
	if err := bb.check(); err != nil {
		return nil, err
	}
	return bb.flat, nil
}

// CopyToDevice implements compute.Buffer.
func (bb *Buffer) CopyToDevice(deviceNum compute.DeviceNum) (compute.Buffer, error) {
	if err := bb.check(); err != nil {
		return nil, err
	}
	return bb.backend.BufferFromFlatData(deviceNum, bb.flat, bb.shape)
}

// BufferFromFlatData implements compute.DataInterface.
func (b *Backend) BufferFromFlatData(deviceNum compute.DeviceNum, flat any, shape shapes.Shape) (compute.Buffer, error) {
	if deviceNum != 0 {
		return nil, errors.Errorf("backend %q has one device, got device %d", Name, deviceNum)
	}
	dst, err := makeFlat(shape.DType, shape.Size())
	if err != nil {
		return nil, err
	}
	n, err := copyFlat(dst, flat)
	if err != nil {
		return nil, errors.WithMessagef(err, "BufferFromFlatData(%s)", shape)
	}
	if n != shape.Size() {
		return nil, errors.Errorf("BufferFromFlatData: shape %s needs %d elements, got %d", shape, shape.Size(), flatLen(flat))
	}
	return &Buffer{backend: b, shape: shape.Clone(), flat: dst}, nil
}

// HasSharedBuffers implements compute.DataInterface.
func (b *Backend) HasSharedBuffers() bool { return true }

// NewSharedBuffer implements compute.DataInterface.
func (b *Backend) NewSharedBuffer(deviceNum compute.DeviceNum, shape shapes.Shape) (compute.Buffer, any, error) {
	if deviceNum != 0 {
		return nil, nil, errors.Errorf("backend %q has one device, got device %d", Name, deviceNum)
	}
	flat, err := makeFlat(shape.DType, shape.Size())
	if err != nil {
		return nil, nil, err
	}
	return &Buffer{backend: b, shape: shape.Clone(), flat: flat}, flat, nil
}
