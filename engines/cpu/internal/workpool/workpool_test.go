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
