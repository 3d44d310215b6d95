package workpool

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// check runs Run(workers) and verifies that every worker index ran once.
func check(t *testing.T, workers int) {
	t.Helper()
	counts := make([]atomic.Int32, workers)
	Run(workers, func(w int) { counts[w].Add(1) })
	for w := range counts {
		if n := counts[w].Load(); n != 1 {
			t.Fatalf("Run(%d): worker %d ran %d times", workers, w, n)
		}
	}
}

func TestRun(t *testing.T) {
	for workers := 1; workers <= runtime.GOMAXPROCS(0)+2; workers++ {
		for range 1000 {
			check(t, workers)
		}
		// Helpers park after spinFor; the next call must wake them.
		time.Sleep(2 * spinFor)
		check(t, workers)
	}
}

func TestRunNestedAndConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 300 {
				var inner atomic.Int32
				Run(2, func(int) {
					Run(2, func(int) { inner.Add(1) })
				})
				if n := inner.Load(); n != 4 {
					t.Errorf("nested Run: %d inner calls, want 4", n)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestRunWaitsForSlowHelpers makes the helpers outlast the caller's spin,
// so Run must sleep and be woken by the last helper, and must not return
// before every worker has finished.
func TestRunWaitsForSlowHelpers(t *testing.T) {
	workers := runtime.GOMAXPROCS(0)
	if workers < 2 {
		t.Skip("needs GOMAXPROCS >= 2 for a pool helper")
	}
	for rep := range 200 {
		finished := make([]atomic.Bool, workers)
		delay := time.Duration(rep%4) * minWaitSpin // 0 to 3 times the shortest spin
		Run(workers, func(w int) {
			if w > 0 {
				time.Sleep(delay)
			}
			finished[w].Store(true)
		})
		for w := range finished {
			if !finished[w].Load() {
				t.Fatalf("rep %d (helpers sleep %v): Run returned before worker %d finished", rep, delay, w)
			}
		}
	}
}

// busy spins for d without yielding, as a compute loop would.
func busy(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

// BenchmarkImbalance times Runs whose helpers take longer than the caller
// by more than the caller's spin (minWaitSpin: the caller's share is
// shorter), so every Run ends with the caller asleep and woken by the last
// helper; ns/op over the helpers' 500 µs is the cost of that wake-up.
func BenchmarkImbalance(b *testing.B) {
	workers := runtime.GOMAXPROCS(0)
	if workers < 2 {
		b.Skip("needs GOMAXPROCS >= 2 for a pool helper")
	}
	for b.Loop() {
		Run(workers, func(w int) {
			if w == 0 {
				busy(100 * time.Microsecond)
			} else {
				busy(500 * time.Microsecond)
			}
		})
	}
}
