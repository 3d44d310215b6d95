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

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/pkg/errors"

	"github.com/cde-rl/cde/engines/cpu/gemm"
)

// Name is the name the backend is registered under.
const Name = "cpu"

func init() {
	backends.Register(Name, New)
}

// Backend implements backends.Backend.
type Backend struct {
	mu        sync.Mutex
	finalized bool
	// idle tracks the executables' buffer pools (see releaseIdlePools).
	idle idlePools
}

var _ backends.Backend = (*Backend)(nil)

// New returns a new backend. The config string is accepted for symmetry with
// GoMLX's other backends and must be empty.
func New(config string) (backends.Backend, error) {
	if config != "" {
		return nil, errors.Errorf("backend %q takes no configuration, got %q", Name, config)
	}
	return &Backend{}, nil
}

// Name implements backends.Backend.
func (b *Backend) Name() string { return Name }

// String implements backends.Backend.
func (b *Backend) String() string { return Name }

// Description implements backends.Backend.
func (b *Backend) Description() string {
	return fmt.Sprintf("cde CPU engine (%d threads, matmul kernel %s)", runtime.GOMAXPROCS(0), gemm.KernelName())
}

// NumDevices implements backends.Backend: one device, the whole CPU.
func (b *Backend) NumDevices() int { return 1 }

// DeviceDescription implements backends.Backend.
func (b *Backend) DeviceDescription(deviceNum backends.DeviceNum) string {
	return fmt.Sprintf("cpu:%d", deviceNum)
}

// Capabilities implements backends.Backend.
func (b *Backend) Capabilities() backends.Capabilities {
	c := backends.Capabilities{Operations: map[backends.OpType]bool{}, DTypes: map[dtypes.DType]bool{}}
	for op := range opTable {
		c.Operations[op] = true
	}
	for _, dt := range supportedDTypes {
		c.DTypes[dt] = true
	}
	return c
}

// Builder implements backends.Backend.
func (b *Backend) Builder(name string) backends.Builder {
	return newBuilder(b, name)
}

// Finalize implements backends.Backend.
func (b *Backend) Finalize() {
	b.mu.Lock()
	b.finalized = true
	b.mu.Unlock()
}

// IsFinalized implements backends.Backend.
func (b *Backend) IsFinalized() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.finalized
}

// Buffer is the backend's buffer: a shape and a Go slice of its dtype.
type Buffer struct {
	shape shapes.Shape
	flat  any
}

func (b *Backend) buffer(buf backends.Buffer) (*Buffer, error) {
	bb, ok := buf.(*Buffer)
	if !ok || bb == nil {
		return nil, errors.Errorf("backend %q: buffer of type %T is not one of ours", Name, buf)
	}
	if bb.flat == nil {
		return nil, errors.Errorf("backend %q: buffer used after it was finalized", Name)
	}
	return bb, nil
}

// BufferFinalize implements backends.DataInterface.
func (b *Backend) BufferFinalize(buf backends.Buffer) error {
	bb, err := b.buffer(buf)
	if err != nil {
		return err
	}
	bb.flat = nil
	return nil
}

// BufferShape implements backends.DataInterface.
func (b *Backend) BufferShape(buf backends.Buffer) (shapes.Shape, error) {
	bb, err := b.buffer(buf)
	if err != nil {
		return shapes.Invalid(), err
	}
	return bb.shape, nil
}

// BufferDeviceNum implements backends.DataInterface.
func (b *Backend) BufferDeviceNum(buf backends.Buffer) (backends.DeviceNum, error) {
	if _, err := b.buffer(buf); err != nil {
		return 0, err
	}
	return 0, nil
}

// BufferToFlatData implements backends.DataInterface.
func (b *Backend) BufferToFlatData(buf backends.Buffer, flat any) error {
	bb, err := b.buffer(buf)
	if err != nil {
		return err
	}
	n, err := copyFlat(flat, bb.flat)
	if err != nil {
		return errors.WithMessagef(err, "BufferToFlatData(%s)", bb.shape)
	}
	if n != bb.shape.Size() {
		return errors.Errorf("BufferToFlatData: buffer %s has %d elements, destination has room for %d", bb.shape, bb.shape.Size(), n)
	}
	return nil
}

// BufferFromFlatData implements backends.DataInterface.
func (b *Backend) BufferFromFlatData(deviceNum backends.DeviceNum, flat any, shape shapes.Shape) (backends.Buffer, error) {
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
	return &Buffer{shape: shape.Clone(), flat: dst}, nil
}

// HasSharedBuffers implements backends.DataInterface.
func (b *Backend) HasSharedBuffers() bool { return true }

// NewSharedBuffer implements backends.DataInterface.
func (b *Backend) NewSharedBuffer(deviceNum backends.DeviceNum, shape shapes.Shape) (backends.Buffer, any, error) {
	if deviceNum != 0 {
		return nil, nil, errors.Errorf("backend %q has one device, got device %d", Name, deviceNum)
	}
	flat, err := makeFlat(shape.DType, shape.Size())
	if err != nil {
		return nil, nil, err
	}
	return &Buffer{shape: shape.Clone(), flat: flat}, flat, nil
}

// BufferData implements backends.DataInterface.
func (b *Backend) BufferData(buf backends.Buffer) (any, error) {
	bb, err := b.buffer(buf)
	if err != nil {
		return nil, err
	}
	return bb.flat, nil
}

// BufferCopyToDevice implements backends.DataInterface.
func (b *Backend) BufferCopyToDevice(source backends.Buffer, deviceNum backends.DeviceNum) (backends.Buffer, error) {
	bb, err := b.buffer(source)
	if err != nil {
		return nil, err
	}
	return b.BufferFromFlatData(deviceNum, bb.flat, bb.shape)
}
