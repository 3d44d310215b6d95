package threefry

import (
	"math"
	"testing"
)

// Known-answer vectors of threefry2x32_20 from the Random123 library's
// kat_vectors (key, counter, result); JAX's test of its threefry_2x32 uses
// the third.
func TestBlockKnownAnswers(t *testing.T) {
	cases := []struct{ k0, k1, c0, c1, r0, r1 uint32 }{
		{0, 0, 0, 0, 0x6b200159, 0x99ba4efe},
		{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x1cb996fc, 0xbb002be7},
		{0x13198a2e, 0x03707344, 0x243f6a88, 0x85a308d3, 0xc4923a9c, 0x483df7a0},
	}
	for _, c := range cases {
		r0, r1 := Block(c.k0, c.k1, c.c0, c.c1)
		if r0 != c.r0 || r1 != c.r1 {
			t.Errorf("Block(%#x, %#x, %#x, %#x) = %#x, %#x, want %#x, %#x", c.k0, c.k1, c.c0, c.c1, r0, r1, c.r0, c.r1)
		}
	}
}

func TestUniform(t *testing.T) {
	cases := []struct {
		w    uint32
		want float64
	}{
		{0, 1.0 / (1 << 24)},          // the smallest: 2^-24, never 0
		{0xffffffff, 1 - 1.0/(1<<24)}, // the largest: 1 - 2^-24, never 1
		{1 << 31, 0.5 + 1.0/(1<<24)},  // (2 * 2^22 + 1) / 2^24
		{0x1ff, 1.0 / (1 << 24)},      // the low 9 bits are dropped
		{0x200, 3.0 / (1 << 24)},      // one step of the kept bits
	}
	for _, c := range cases {
		if got := Uniform(c.w); float64(got) != c.want {
			t.Errorf("Uniform(%#x) = %v, want %v", c.w, got, c.want)
		}
	}
	// Gumbel of u = 1/2: -log(log 2) = 0.36651292058166435.
	if got, want := Gumbel(1<<31-0x200+0x1ff), float32(-math.Log(-math.Log(0.5-1.0/(1<<24)))); got != want {
		t.Errorf("Gumbel = %v, want %v", got, want)
	}
}

// Fill on several cores, with an odd vocabulary (a block's second word
// unused at each row's end), equals the value-by-value definition.
func TestFillMatchesDefinition(t *testing.T) {
	for _, vocab := range []int{7, 40000} {
		seed := uint64(0x0123456789abcdef)
		keys := make([][2]uint32, 3)
		for r := range keys {
			keys[r][0], keys[r][1] = RowKey(seed, uint32(r+5))
		}
		out := make([]float32, len(keys)*vocab)
		Fill(out, nil, keys, 11, vocab)
		for r := range keys {
			for v := 0; v < vocab; v++ {
				w0, w1 := Block(keys[r][0], keys[r][1], uint32(v/2), 11)
				w := w0
				if v%2 == 1 {
					w = w1
				}
				want := float32(-math.Log(-math.Log(float64(2*(w>>9)+1) / (1 << 24))))
				if got := out[r*vocab+v]; got != want {
					t.Fatalf("vocab %d row %d v %d: %v, want %v", vocab, r, v, got, want)
				}
			}
		}
	}
}

// RowKey is Block of (lo32(seed), hi32(seed)) on (r, RowTag).
func TestRowKey(t *testing.T) {
	k0, k1 := RowKey(0x13198a2e_0000beef, 3)
	w0, w1 := Block(0x0000beef, 0x13198a2e, 3, 0x6e6f6973)
	if k0 != w0 || k1 != w1 {
		t.Fatalf("RowKey = %#x %#x, want %#x %#x", k0, k1, w0, w1)
	}
}

// BenchmarkFill is one decode step's noise at batch 32 and Qwen3's
// vocabulary, on every core.
func BenchmarkFill(b *testing.B) {
	const rows, vocab = 32, 151936
	keys := make([][2]uint32, rows)
	for r := range keys {
		keys[r][0], keys[r][1] = RowKey(1, uint32(r))
	}
	out := make([]float32, rows*vocab)
	u := make([]float64, rows*vocab)
	b.SetBytes(4 * rows * vocab)
	for i := 0; b.Loop(); i++ {
		Fill(out, u, keys, uint32(i), vocab)
	}
}

// The written-out Block is the loop, on many inputs.
func TestBlockMatchesLoop(t *testing.T) {
	x := uint32(12345)
	next := func() uint32 { x ^= x << 13; x ^= x >> 17; x ^= x << 5; return x }
	for range 100000 {
		k0, k1, c0, c1 := next(), next(), next(), next()
		a0, a1 := Block(k0, k1, c0, c1)
		b0, b1 := blockLoop(k0, k1, c0, c1)
		if a0 != b0 || a1 != b1 {
			t.Fatalf("Block(%#x, %#x, %#x, %#x) = %#x %#x, the loop %#x %#x", k0, k1, c0, c1, a0, a1, b0, b1)
		}
	}
}
