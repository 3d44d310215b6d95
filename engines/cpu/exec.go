package cpu

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/dtypes/bfloat16"
	"github.com/gomlx/compute/shapes"
	"github.com/pkg/errors"
)

// Executable implements compute.Executable: the nodes reachable from the
// outputs, in creation (topological) order, with the last step at which
// each value is read, so intermediate buffers return to a pool as soon as
// they are dead and can be reused by later nodes (or in place by
// elementwise nodes).
type Executable struct {
	backend *Backend
	name    string
	params  []*node
	outputs []*node
	order   []*node
	// lastUse[node idx] is the position in order of the last node reading
	// it; -1 for nodes never read (outputs only).
	lastUse  map[int]int
	isOutput map[int]bool

	mu   sync.Mutex
	pool *pool
}

// Compile implements compute.Builder.
func (b *Builder) Compile() (compute.Executable, error) {
	if !b.main.returned {
		return nil, errors.Errorf("backend %q: Compile called before Main().Return()", Name)
	}
	outs := b.main.outputs
	b.compiled = true
	for _, n := range b.nodes {
		foldBroadcasts(n)
		foldBF16Converts(n)
	}
	reach := make([]bool, len(b.nodes))
	var stack []*node
	for _, o := range outs {
		if !reach[o.idx] {
			reach[o.idx] = true
			stack = append(stack, o)
		}
	}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, in := range n.inputs {
			if !reach[in.idx] {
				reach[in.idx] = true
				stack = append(stack, in)
			}
		}
	}
	e := &Executable{backend: b.backend, name: b.name, params: b.params, outputs: outs,
		lastUse: map[int]int{}, isOutput: map[int]bool{}, pool: newPool()}
	b.backend.idle.add(e)
	for _, n := range b.nodes {
		if reach[n.idx] {
			e.order = append(e.order, n)
		}
	}
	for pos, n := range e.order {
		for _, in := range n.inputs {
			e.lastUse[in.idx] = pos
		}
	}
	groupSiblingDots(e.order)
	for _, o := range outs {
		e.isOutput[o.idx] = true
	}
	return e, nil
}

// Finalize implements compute.Executable.
func (e *Executable) Finalize() {
	e.mu.Lock()
	e.pool = newPool()
	e.mu.Unlock()
	e.backend.idle.remove(e)
}

// idlePoolBytes is how many bytes of free buffers the pools of the
// executables other than the one about to run may hold (see
// idlePools.switchTo): 128 MiB. At 1 GiB, the default 200-step run, whose
// graphs are small but come in many padded shapes (one executable each),
// reached 897 MB resident; at 128 MiB it peaks at 328 MB (/usr/bin/time
// -v, 2026-11-27).
var idlePoolBytes = IdlePoolBytes

// IdlePoolBytes is the bound on the free buffers that executables other
// than the running one keep (idlePoolBytes; the run's memory estimate
// counts it).
const IdlePoolBytes = 128 << 20

// idlePools bounds the memory that executables hold between their runs.
// Each executable keeps the buffers its last run freed, for its next run
// (no allocation in a decode loop); a process that runs several large
// graphs (scoring, a train step, an Adam step) would otherwise hold the sum
// of their peaks, several GB each at LLM shapes. When a different
// executable starts and the others' pools hold more than idlePoolBytes,
// those pools are dropped and the garbage collector reclaims them.
type idlePools struct {
	mu   sync.Mutex
	all  map[*Executable]struct{}
	last *Executable
	// Released counts executions that dropped other executables' pools
	// (for tests).
	released int
}

func (ip *idlePools) add(e *Executable) {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	if ip.all == nil {
		ip.all = map[*Executable]struct{}{}
	}
	ip.all[e] = struct{}{}
}

func (ip *idlePools) remove(e *Executable) {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	delete(ip.all, e)
	if ip.last == e {
		ip.last = nil
	}
}

// switchTo is called as e starts a run: when the executable that ran last
// was another one and the idle pools of the others hold more than
// idlePoolBytes, it drops them (a pool in use by a running execution is
// not idle and is left alone) and runs the garbage collector, so the
// memory is free before e allocates its own.
func (ip *idlePools) switchTo(e *Executable) {
	ip.mu.Lock()
	if ip.last == e {
		ip.mu.Unlock()
		return
	}
	ip.last = e
	held := 0
	for x := range ip.all {
		if x != e {
			x.mu.Lock()
			if x.pool != nil {
				held += x.pool.bytes
			}
			x.mu.Unlock()
		}
	}
	dropped := false
	if held > idlePoolBytes {
		for x := range ip.all {
			if x == e {
				continue
			}
			x.mu.Lock()
			if x.pool != nil && x.pool.bytes > 0 {
				x.pool = newPool()
				dropped = true
			}
			x.mu.Unlock()
		}
	}
	if dropped {
		ip.released++
	}
	ip.mu.Unlock()
	if dropped {
		runtime.GC()
	}
}

// Inputs implements compute.Executable.
func (e *Executable) Inputs() ([]string, []shapes.Shape) {
	names := make([]string, len(e.params))
	ss := make([]shapes.Shape, len(e.params))
	for i, p := range e.params {
		names[i] = p.params.(*parameterParams).name
		ss[i] = p.shape
	}
	return names, ss
}

// Outputs implements compute.Executable.
func (e *Executable) Outputs() []shapes.Shape {
	ss := make([]shapes.Shape, len(e.outputs))
	for i, o := range e.outputs {
		ss[i] = o.shape
	}
	return ss
}

// store is memory holding one value; reshapes and identities share it.
type store struct {
	flat   any
	refs   int
	pooled bool // owned by the execution: returns to the pool when dead
}

// execState is one execution of an Executable.
type execState struct {
	e      *Executable
	pool   *pool
	values []*store // by node idx
	// stores[i] is the store of node i's own value, kept with the pool so
	// that a step allocates none (values[i] may instead point at an
	// input's store: an alias, or an op in place).
	stores []store
	pos    int // position in e.order of the node running
}

// Execute implements compute.Executable. Inputs are never modified unless
// donated: a donated buffer may be overwritten in place by an elementwise
// op (e.g. a KV cache updated by a select) or reused once dead.
func (e *Executable) Execute(inputs []compute.Buffer, donate []bool, device compute.DeviceNum) (outs []compute.Buffer, err error) {
	if device != 0 {
		return nil, errors.Errorf("backend %q has only device 0, got %d", Name, device)
	}
	if len(inputs) != len(e.params) {
		return nil, errors.Errorf("executable %q takes %d inputs, got %d", e.name, len(e.params), len(inputs))
	}
	e.mu.Lock()
	p := e.pool
	e.pool = nil
	e.mu.Unlock()
	if p == nil { // a concurrent execution holds it
		p = newPool()
	}
	e.backend.idle.switchTo(e)
	st := p.state(e)
	if memStatsOn {
		p.mem.start(st)
		defer p.mem.report(e)
	}
	defer func() {
		clear(st.values) // hold no buffers between executions
		clear(st.stores)
		e.mu.Lock()
		e.pool = p
		e.mu.Unlock()
	}()
	for i, in := range inputs {
		buf, err := e.backend.buffer(in)
		if err != nil {
			return nil, errors.WithMessagef(err, "executable %q input #%d", e.name, i)
		}
		p := e.params[i]
		if !buf.shape.Equal(p.shape) {
			return nil, errors.Errorf("executable %q input #%d (%q): shape %s, compiled for %s", e.name, i, p.params.(*parameterParams).name, buf.shape, p.shape)
		}
		// A donated input is the execution's to reuse (in place, or
		// through the pool once dead).
		s := &st.stores[p.idx]
		*s = store{flat: buf.flat, refs: 1, pooled: i < len(donate) && donate[i]}
		st.values[p.idx] = s
	}
	defer func() {
		if r := recover(); r != nil {
			err = errors.Errorf("backend %q: executing %q failed at node %d: %v\n%s", Name, e.name, st.pos, r, debug.Stack())
		}
	}()
	for pos, n := range e.order {
		st.pos = pos
		if n.op == compute.OpTypeParameter {
			continue
		}
		var t0 time.Time
		if opStatsOn {
			t0 = time.Now()
		}
		err := st.run(n)
		if opStatsOn {
			recordOp(n, time.Since(t0))
		}
		if err != nil {
			return nil, errors.WithMessagef(err, "executing %q, op %s -> %s", e.name, n.op, n.shape)
		}
		done := n.inputs
		for i, in := range done {
			if e.lastUse[in.idx] == pos && !e.isOutput[in.idx] && !seenBefore(done, i) {
				st.release(in.idx)
			}
		}
	}
	outs = make([]compute.Buffer, len(e.outputs))
	handed := map[*store]bool{}
	for i, o := range e.outputs {
		s := st.values[o.idx]
		flat := s.flat
		if !s.pooled || handed[s] {
			flat = cloneFlat(flat)
		} else {
			handed[s] = true
		}
		outs[i] = &Buffer{backend: e.backend, shape: o.shape.Clone(), flat: flat}
	}
	for s := range handed {
		s.pooled = false
	}
	return outs, nil
}

func seenBefore(ns []*node, i int) bool {
	for j := 0; j < i; j++ {
		if ns[j] == ns[i] {
			return true
		}
	}
	return false
}

func (e *Executable) maxIdx() int {
	m := 0
	for _, n := range e.order {
		m = max(m, n.idx)
	}
	return m
}

func (st *execState) release(idx int) {
	s := st.values[idx]
	st.values[idx] = nil
	if s == nil {
		return
	}
	s.refs--
	if s.refs == 0 && s.pooled {
		st.pool.put(s.flat)
	}
}

// in returns the flat data of n's i-th input.
func (st *execState) in(n *node, i int) any { return st.values[n.inputs[i].idx].flat }

// alloc returns a new pooled store for n's output (not zeroed).
func (st *execState) alloc(n *node) *store {
	s := &st.stores[n.idx]
	*s = store{flat: st.pool.get(n.shape.DType, n.shape.Size()), refs: 1, pooled: true}
	st.values[n.idx] = s
	return s
}

// allocZero is alloc with the values zeroed.
func (st *execState) allocZero(n *node) *store {
	s := st.alloc(n)
	clearFlat(s.flat)
	return s
}

// allocInPlace returns n's output store, taking over the memory of one of
// the inputs listed in candidates if that input is dead after n, owned by
// this execution, not shared, and of n's exact shape. Elementwise kernels
// read element i before writing element i, so this is safe for them.
func (st *execState) allocInPlace(n *node, candidates ...int) *store {
	for _, c := range candidates {
		in := n.inputs[c]
		s := st.values[in.idx]
		if s == nil || !s.pooled || s.refs != 1 || st.e.isOutput[in.idx] || st.e.lastUse[in.idx] != st.pos {
			continue
		}
		if !in.shape.Equal(n.shape) {
			continue
		}
		// The input's slot keeps pointing at the store so the kernel can
		// read it; the release after n drops the input's reference and
		// leaves the output's.
		s.refs++
		st.values[n.idx] = s
		return s
	}
	return st.alloc(n)
}

// alias makes n's value share the memory of its input i (Reshape, Identity).
func (st *execState) alias(n *node, i int) {
	s := st.values[n.inputs[i].idx]
	s.refs++
	st.values[n.idx] = s
}

// pool recycles float32 buffers between nodes and between executions, and
// the execution state of the execution holding it. The buffers are kept
// as the interface values the stores hold ([]float32 inside), so that
// handing one out again allocates nothing.
type pool struct {
	f32   map[int][]any
	bytes int // of the free buffers in f32
	st    *execState
	mem   memTrace // only when memStatsOn
}

// state returns the pool's execState, reset for an execution of e (kept
// with the pool so that executions do not allocate it).
func (p *pool) state(e *Executable) *execState {
	n := e.maxIdx() + 1
	if p.st == nil || cap(p.st.values) < n {
		p.st = &execState{values: make([]*store, n), stores: make([]store, n)}
	}
	st := p.st
	*st = execState{e: e, pool: p, values: st.values[:n], stores: st.stores[:n]}
	clear(st.values)
	clear(st.stores)
	return st
}

func newPool() *pool { return &pool{f32: map[int][]any{}} }

func (p *pool) get(dt dtypes.DType, n int) any {
	if memStatsOn {
		p.mem.got(p, dt, n)
	}
	if dt == dtypes.Float32 {
		if l := p.f32[n]; len(l) > 0 {
			s := l[len(l)-1]
			p.f32[n] = l[:len(l)-1]
			p.bytes -= 4 * n
			return s
		}
		return newF32(n)
	}
	f, err := makeFlat(dt, n)
	if err != nil {
		panic(err)
	}
	return f
}

func (p *pool) put(flat any) {
	if memStatsOn {
		p.mem.put(flat)
	}
	if f, ok := flat.([]float32); ok && len(f) > 0 {
		p.f32[len(f)] = append(p.f32[len(f)], flat)
		p.bytes += 4 * len(f)
	}
}

func clearFlat(flat any) {
	switch f := flat.(type) {
	case []float32:
		clear(f)
	case []float64:
		clear(f)
	case []int32:
		clear(f)
	case []int64:
		clear(f)
	case []int8:
		clear(f)
	case []int16:
		clear(f)
	case []uint8:
		clear(f)
	case []uint16:
		clear(f)
	case []uint32:
		clear(f)
	case []uint64:
		clear(f)
	case []bool:
		clear(f)
	case []bfloat16.BFloat16:
		clear(f)
	default:
		panic(fmt.Sprintf("clearFlat: unsupported %T", flat))
	}
}

func cloneFlat(flat any) any {
	dt, n, err := flatInfo(flat)
	if err != nil {
		panic(err)
	}
	dst, _ := makeFlat(dt, n)
	copyFlat(dst, flat)
	return dst
}

// foldBroadcasts lets an elementwise node read the operand of a
// BroadcastInDim input directly (its kernels broadcast size-1 axes), so
// the broadcast is never materialised when nothing else needs it.
func foldBroadcasts(n *node) {
	if !opTable[n.op].foldsBroadcast {
		return
	}
	for i, in := range n.inputs {
		if in.op != compute.OpTypeBroadcastInDim || !in.shape.EqualDimensions(n.shape) {
			continue
		}
		x := in.inputs[0]
		axes := in.params.(*broadcastInDimParams).axes
		if !slices.IsSorted(axes) {
			continue
		}
		view := n.shape.Clone()
		view.DType = x.shape.DType
		for a := range view.Dimensions {
			view.Dimensions[a] = 1
		}
		for j, a := range axes {
			view.Dimensions[a] = x.shape.Dimensions[j]
		}
		if x.shape.IsScalar() {
			view = x.shape
		}
		if n.views == nil {
			n.views = make([]shapes.Shape, len(n.inputs))
			for k, in2 := range n.inputs {
				n.views[k] = in2.shape
			}
		}
		n.views[i] = view
		n.inputs[i] = x
	}
}
