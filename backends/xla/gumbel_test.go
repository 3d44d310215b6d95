package xla

import (
	"math"
	"math/rand/v2"
	"testing"
)

// gumbel gives the same values as drawing each uniform and transforming it
// in turn, for small and large n (the parallel path).
func TestGumbelStream(t *testing.T) {
	for _, n := range []int{5, 1 << 15, 151936} {
		got := gumbel(rand.New(rand.NewPCG(4, 5)), n)
		rng := rand.New(rand.NewPCG(4, 5))
		for i := range n {
			u := rng.Float64()
			for u == 0 {
				u = rng.Float64()
			}
			if want := float32(-math.Log(-math.Log(u))); got[i] != want {
				t.Fatalf("n %d: element %d = %v, want %v", n, i, got[i], want)
			}
		}
	}
}
