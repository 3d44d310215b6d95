package cpu

import (
	"runtime"

	"github.com/cde-rl/cde/engines/cpu/internal/workpool"
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
	per := (n + workers - 1) / workers
	workpool.Run(workers, func(w int) {
		if lo, hi := w*per, min(n, (w+1)*per); lo < hi {
			fn(lo, hi)
		}
	})
}

// parallelWorth reports whether parallelRange(n, grain, ...) would split
// the range across cores; callers with closures that would escape use it
// to run small ranges inline without allocating them.
func parallelWorth(n, grain int) bool {
	return n/max(grain, 1) >= 2 && runtime.GOMAXPROCS(0) > 1
}

// elemGrain is the number of elementwise operations below which splitting
// across cores costs more than it saves.
const elemGrain = 16 << 10
