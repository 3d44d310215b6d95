package cpu

import (
	"runtime"
	"sync"
)

// parallelRange calls fn over [0, n) split into contiguous chunks, one per
// core, when there are at least 2*grain items; otherwise inline. Chunks
// depend only on n and GOMAXPROCS, and every kernel writes disjoint output
// ranges, so results do not depend on scheduling.
func parallelRange(n, grain int, fn func(lo, hi int)) {
	workers := runtime.GOMAXPROCS(0)
	if grain < 1 {
		grain = 1
	}
	if w := n / grain; w < workers {
		workers = w
	}
	if workers <= 1 {
		if n > 0 {
			fn(0, n)
		}
		return
	}
	var wg sync.WaitGroup
	wg.Add(workers - 1)
	per := (n + workers - 1) / workers
	for w := 1; w < workers; w++ {
		lo, hi := w*per, min(n, (w+1)*per)
		go func() {
			defer wg.Done()
			if lo < hi {
				fn(lo, hi)
			}
		}()
	}
	fn(0, min(n, per))
	wg.Wait()
}

// elemGrain is the number of elementwise operations below which splitting
// across cores costs more than it saves.
const elemGrain = 16 << 10
