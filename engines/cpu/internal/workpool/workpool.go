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

// A caller that has finished its own share spins for the helpers as long
// as its share took, and at least minWaitSpin, and then sleeps until the
// last one wakes it. On an idle machine the helpers finish within that
// spin: their shares are the same size as the caller's, so the caller
// almost never sleeps and pays no wake-up. When another process shares the
// cores, a helper may be descheduled for a whole time slice (milliseconds),
// and a caller spinning all that time would take a core from the very
// thread it waits on; a long spin is cut at one share's time, half the
// op's cost at worst. Measured on a 2-core machine: two trainings side by
// side finish in 0.72 times the wall time of the unbounded spin, and decode
// on an idle machine is unchanged (docs/engine.md).
const minWaitSpin = 200 * time.Microsecond

// call is one Run; immutable once published, except for done.
type call struct {
	f       func(w int)
	n       int          // workers, the caller included
	pending atomic.Int64 // helpers still running f
	// done is set by a caller that stopped spinning; the helper that
	// brings pending to zero then sends on it (buffered, one send).
	done atomic.Pointer[chan struct{}]
}

// finish records that one helper has returned from f, waking a caller
// that sleeps if it was the last. The helper then yields its processor:
// the woken caller is next in that processor's queue and runs at once on
// this thread, instead of waiting for the runtime to wake another thread to
// take it (BenchmarkImbalance measures the wake-up).
func (c *call) finish() {
	if c.pending.Add(-1) != 0 {
		return
	}
	if ch := c.done.Load(); ch != nil {
		*ch <- struct{}{}
		runtime.Gosched()
	}
}

// wait returns when every helper has returned from f: it spins for spin,
// then sleeps. The caller publishes done before it looks at
// pending again, and a helper decrements pending before it looks at done
// (both sequentially consistent), so at least one of them sees the other:
// either the caller sees zero and returns, or the last helper sends.
func (c *call) wait(spin time.Duration) {
	start := time.Now()
	for spins := 0; c.pending.Load() != 0; spins++ {
		if spins&63 != 63 {
			continue
		}
		if time.Since(start) < spin {
			runtime.Gosched()
			continue
		}
		ch := make(chan struct{}, 1)
		c.done.Store(&ch)
		if c.pending.Load() != 0 {
			<-ch
		}
		return
	}
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
			seen.finish()
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
	start := time.Now()
	f(0)
	c.wait(max(minWaitSpin, time.Since(start)))
}
