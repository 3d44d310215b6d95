// Package threefry is the counter-based generator behind sampling: the
// Threefry-2x32 block cipher with 20 rounds (Salmon, Moraes, Dror and Shaw,
// "Parallel random numbers: as easy as 1, 2, 3", SC 2011; the Random123
// library's threefry2x32_20), and the Gumbel noise that generation draws
// from it.
//
// A counter-based generator gives the noise of response r, token t and
// vocabulary entry v as a pure function of (seed, r, t, v), computed with
// 32-bit integer additions, rotations and exclusive-ors. The same function
// runs here on the host (the cpu and go engines) and inside the decode graph
// on an accelerator (backends/xla's noise graph), and both give the same
// bits; no stream has to be drawn in order or sent to the device. The
// layout, fixed here and in docs/math.md:
//
//	rowKey(seed, r) = Block((lo32(seed), hi32(seed)), (r, RowTag))
//	(w0, w1)        = Block(rowKey(seed, r), (v / 2, t))
//	word(seed, r, t, v) = w0 if v is even, w1 if odd
//	u = (2 (word >> 9) + 1) / 2^24        in (0, 1), exact in float32
//	g = float32(-log(-log(u)))           the logarithms in float64
package threefry

import (
	"math"
	"math/bits"
	"runtime"
	"sync"

	"github.com/cde-rl/cde/internal/gumbellog"
)

// RowTag is the second counter word of the row-key derivation; it keeps
// rowKey's inputs apart from any other use of the seed's key.
const RowTag uint32 = 0x6e6f6973 // "nois"

// parity is Threefry's key-schedule constant for 32-bit words.
const parity uint32 = 0x1BD11BDA

// Rotations of the 2x32 variant, rounds 0-3 and 4-7 (repeated).
var rot = [8]int{13, 15, 26, 6, 17, 29, 16, 24}

// Block encrypts the counter (c0, c1) under the key (k0, k1): 20 rounds of
// x0 += x1; x1 = rotl(x1, R); x1 ^= x0, with the key injected before the
// first round and after every fourth. Written out round by round, with
// constant rotations (blockLoop is the same cipher as a loop, for the
// tests): the noise of a decode step is a block per two vocabulary
// entries.
func Block(k0, k1, c0, c1 uint32) (uint32, uint32) {
	k2 := k0 ^ k1 ^ parity
	x0, x1 := c0+k0, c1+k1
	x0 += x1
	x1 = x1<<13 | x1>>19
	x1 ^= x0
	x0 += x1
	x1 = x1<<15 | x1>>17
	x1 ^= x0
	x0 += x1
	x1 = x1<<26 | x1>>6
	x1 ^= x0
	x0 += x1
	x1 = x1<<6 | x1>>26
	x1 ^= x0
	x0 += k1
	x1 += k2 + 1
	x0 += x1
	x1 = x1<<17 | x1>>15
	x1 ^= x0
	x0 += x1
	x1 = x1<<29 | x1>>3
	x1 ^= x0
	x0 += x1
	x1 = x1<<16 | x1>>16
	x1 ^= x0
	x0 += x1
	x1 = x1<<24 | x1>>8
	x1 ^= x0
	x0 += k2
	x1 += k0 + 2
	x0 += x1
	x1 = x1<<13 | x1>>19
	x1 ^= x0
	x0 += x1
	x1 = x1<<15 | x1>>17
	x1 ^= x0
	x0 += x1
	x1 = x1<<26 | x1>>6
	x1 ^= x0
	x0 += x1
	x1 = x1<<6 | x1>>26
	x1 ^= x0
	x0 += k0
	x1 += k1 + 3
	x0 += x1
	x1 = x1<<17 | x1>>15
	x1 ^= x0
	x0 += x1
	x1 = x1<<29 | x1>>3
	x1 ^= x0
	x0 += x1
	x1 = x1<<16 | x1>>16
	x1 ^= x0
	x0 += x1
	x1 = x1<<24 | x1>>8
	x1 ^= x0
	x0 += k1
	x1 += k2 + 4
	x0 += x1
	x1 = x1<<13 | x1>>19
	x1 ^= x0
	x0 += x1
	x1 = x1<<15 | x1>>17
	x1 ^= x0
	x0 += x1
	x1 = x1<<26 | x1>>6
	x1 ^= x0
	x0 += x1
	x1 = x1<<6 | x1>>26
	x1 ^= x0
	x0 += k2
	x1 += k0 + 5
	return x0, x1
}

// blockLoop is Block as a loop over the rounds.
func blockLoop(k0, k1, c0, c1 uint32) (uint32, uint32) {
	ks := [3]uint32{k0, k1, k0 ^ k1 ^ parity}
	x0, x1 := c0+ks[0], c1+ks[1]
	for g := range 5 {
		for i := range 4 {
			x0 += x1
			x1 = bits.RotateLeft32(x1, rot[(g%2)*4+i])
			x1 ^= x0
		}
		x0 += ks[(g+1)%3]
		x1 += ks[(g+2)%3] + uint32(g+1)
	}
	return x0, x1
}

// RowKey is the key of response r's noise under seed.
func RowKey(seed uint64, r uint32) (uint32, uint32) {
	return Block(uint32(seed), uint32(seed>>32), r, RowTag)
}

// Uniform maps a word to (0, 1): (2 (w >> 9) + 1) / 2^24, exact in float32.
func Uniform(w uint32) float32 {
	return float32(2*(w>>9)+1) * (1.0 / (1 << 24))
}

// Gumbel is one noise value: float32(-log(-log(Uniform(w)))), the
// logarithms in float64.
func Gumbel(w uint32) float32 {
	return float32(-math.Log(-math.Log(float64(Uniform(w)))))
}

// Words writes word(key, t, v) for v = v0 .. v0+len(out)-1 (v0 even).
func Words(out []uint32, k0, k1 uint32, t uint32, v0 int) {
	n := len(out)
	for i := 0; i < n; i += 2 {
		w0, w1 := Block(k0, k1, uint32((v0+i)/2), t)
		out[i] = w0
		if i+1 < n {
			out[i+1] = w1
		}
	}
}

// Fill writes the Gumbel noise of token t for each row's key into out,
// [len(keys)] rows of vocab values, on every core when it is large. u is
// scratch of at least len(out) values (nil allocates).
func Fill(out []float32, u []float64, keys [][2]uint32, t uint32, vocab int) {
	n := len(keys) * vocab
	out = out[:n]
	if len(u) < n {
		u = make([]float64, n)
	}
	u = u[:n]
	chunk := func(lo, hi int) { // [lo, hi) of the flat [rows, vocab] values; lo at an even v
		var w [2]uint32
		for i := lo; i < hi; {
			r, v := i/vocab, i%vocab
			k := keys[r]
			end := min(hi, (r+1)*vocab)
			for ; i < end; i, v = i+2, v+2 {
				w[0], w[1] = Block(k[0], k[1], uint32(v/2), t)
				u[i] = float64(Uniform(w[0]))
				if i+1 < end {
					u[i+1] = float64(Uniform(w[1]))
				}
			}
			i = end // an odd vocabulary's last value took one step of two
		}
		gumbellog.Transform(out[lo:hi], u[lo:hi])
	}
	workers := runtime.GOMAXPROCS(0)
	if n < 1<<15 || workers < 2 {
		chunk(0, n)
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		// Chunk edges on even vocabulary positions, so each pair of
		// values comes from one block.
		lo, hi := edge(w*n/workers, vocab), edge((w+1)*n/workers, vocab)
		if w == workers-1 {
			hi = n
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			chunk(lo, hi)
		}()
	}
	wg.Wait()
}

// edge rounds a flat index down to an even position within its row.
func edge(i, vocab int) int {
	r, v := i/vocab, i%vocab
	return r*vocab + v&^1
}
