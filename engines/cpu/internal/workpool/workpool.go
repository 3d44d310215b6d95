// Package workpool runs a function on several cores at once with workers
// that stay awake between calls.
//
// The CPU engine splits every large op across the cores. Starting a
// goroutine for each op wakes an idle OS thread, which on a virtual
// machine takes tens of microseconds (the idle vCPU is halted in the
// hypervisor); a decode step of a 28-layer model runs hundreds of such ops
// of 100-300 µs each, so the wake-ups cost a sizeable share of the step.
// Here the helpers are long-lived goroutines that spin for a short while
// after each call, watching for the next one, and park only when none
// comes (as OpenMP runtimes do).
package workpool

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// spinFor is how long an idle helper keeps watching for the next call
// before it parks.
const spinFor = 200 * time.Microsecond

// call is one Run; immutable once published.
type call struct {
	f       func(w int)
	n       int          // workers, the caller included
	pending atomic.Int64 // helpers still running f
}

type pool struct {
	busy    sync.Mutex // held by the Run in progress
	helpers int
	cur     atomic.Pointer[call] // the latest call
	parked  []atomic.Bool
	wake    []chan struct{}
}

var (
	once   sync.Once
	shared *pool
)

func get() *pool {
	once.Do(func() {
		p := &pool{helpers: runtime.GOMAXPROCS(0) - 1}
		p.parked = make([]atomic.Bool, p.helpers)
		p.wake = make([]chan struct{}, p.helpers)
		for i := range p.wake {
			p.wake[i] = make(chan struct{}, 1)
			go p.helper(i)
		}
		shared = p
	})
	return shared
}

// helper i runs worker i+1 of every call that has more than i+1 workers.
// It starts with no call seen: the first Run may publish before the
// goroutine starts.
func (p *pool) helper(i int) {
	var seen *call
	for {
		last := time.Now()
		for spins := 0; p.cur.Load() == seen; spins++ {
			if spins&63 != 63 || time.Since(last) < spinFor {
				continue
			}
			// Park. Announce it, then look once more: a Run that published
			// before seeing parked set is caught here, and one after it
			// sends a wake-up.
			p.parked[i].Store(true)
			if p.cur.Load() == seen {
				<-p.wake[i]
			}
			p.parked[i].Store(false)
			last = time.Now()
		}
		seen = p.cur.Load()
		if i+1 < seen.n {
			seen.f(i + 1)
			seen.pending.Add(-1)
		}
	}
}

// Run calls f(w) for w in [0, workers) concurrently, f(0) on the calling
// goroutine, and returns when all have returned. When the pool is busy
// with another Run (concurrent executions, or f itself calling Run) or
// has too few helpers, it starts plain goroutines instead.
func Run(workers int, f func(w int)) {
	if workers <= 1 {
		f(0)
		return
	}
	p := get()
	if workers-1 > p.helpers || !p.busy.TryLock() {
		var wg sync.WaitGroup
		wg.Add(workers - 1)
		for w := 1; w < workers; w++ {
			go func() {
				defer wg.Done()
				f(w)
			}()
		}
		f(0)
		wg.Wait()
		return
	}
	defer p.busy.Unlock()
	c := &call{f: f, n: workers}
	c.pending.Store(int64(workers - 1))
	p.cur.Store(c)
	for i := range workers - 1 {
		if p.parked[i].Load() {
			select {
			case p.wake[i] <- struct{}{}:
			default:
			}
		}
	}
	f(0)
	for spins := 0; c.pending.Load() != 0; spins++ {
		if spins&63 == 63 {
			runtime.Gosched()
		}
	}
}
