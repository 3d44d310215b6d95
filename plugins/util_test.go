package plugins_test

import (
	"io"
	"math/rand/v2"
	"sync"
)

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 7)) }

type syncWriter struct {
	mu sync.Mutex
	w  interface {
		io.Writer
		String() string
	}
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// String returns what was written so far (under the lock: the plugin's
// log lines arrive from other goroutines).
func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}
