package gemm

import (
	"fmt"
	"math"
	"math/rand"
	"runtime"
	"strings"
	"testing"
)

// chainRef is the packed path's contract spelled out: every element of
// op(A)·op(B) is one chain of single-rounding multiply-adds over p = 0 ..
// k-1, from +0 (FMA32, itself held to exact arithmetic by TestFMA32).
func chainRef(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int) []float32 {
	out := make([]float32, m*n)
	for i := range m {
		for j := range n {
			var s float32
			for p := range k {
				var av, bv float32
				if transA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if transB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				s = FMA32(av, bv, s)
			}
			out[i*n+j] = s
		}
	}
	return out
}

// forEachPath runs f with each kernel path this CPU has installed.
func forEachPath(t *testing.T, f func(t *testing.T)) {
	saved := path
	defer setPath(saved)
	for _, p := range Paths() {
		setPath(p)
		t.Run(p, f)
	}
}

// TestPackedOrder holds the packed products (every shape that is not a
// dot-tile product) to chainRef bit for bit, on every kernel path and at
// GOMAXPROCS 1, 2, 3 and 8: full and edge tiles, several depth blocks
// (k > 256), row and column splits, padded strides, bfloat16 B.
func TestPackedOrder(t *testing.T) {
	shapes := []shape{{1, 1, 1}, {2, 3, 4}, {7, 13, 5}, {6, 16, 256}, {12, 32, 257},
		{13, 33, 3}, {100, 1, 17}, {1, 100, 17}, {65, 31, 129}, {64, 64, 64},
		{25, 47, 600}, {50, 130, 9}, {200, 70, 40}}
	if testing.Short() {
		shapes = shapes[:10]
	}
	forEachPath(t, func(t *testing.T) {
		r := rand.New(rand.NewSource(11))
		for _, s := range shapes {
			for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
				transA, transB := tr[0], tr[1]
				m, n, k := s.m, s.n, s.k
				if DotTiles(transA, transB, m, k) {
					continue // the dot-tile contract (TestDotTiles*)
				}
				ar, ac, br, bc := m, k, k, n
				if transA {
					ar, ac = k, m
				}
				if transB {
					br, bc = n, k
				}
				lda, ldb := ac+1, bc+3
				a, b := randSlice(r, (ar-1)*lda+ac), randSlice(r, (br-1)*ldb+bc)
				b16 := make([]uint16, len(b))
				for i, v := range b {
					b16[i] = uint16(math.Float32bits(v) >> 16)
					b[i] = math.Float32frombits(uint32(b16[i]) << 16)
				}
				want := chainRef(transA, transB, m, n, k, a, lda, b, ldb)
				for _, procs := range []int{1, 2, 3, 8} {
					old := runtime.GOMAXPROCS(procs)
					c := make([]float32, m*n)
					SgemmT(transA, transB, m, n, k, a, lda, b, ldb, c, n)
					c16 := make([]float32, m*n)
					SgemmTBF16(transA, transB, m, n, k, a, lda, b16, ldb, c16, n)
					cs := make([]float32, m*n)
					SgemmTSerial(transA, transB, m, n, k, a, lda, b, ldb, cs, n)
					runtime.GOMAXPROCS(old)
					for name, got := range map[string][]float32{"SgemmT": c, "SgemmTBF16": c16, "SgemmTSerial": cs} {
						if i := firstDiff(got, want); i >= 0 {
							t.Fatalf("%s %v tA=%v tB=%v GOMAXPROCS=%d: C[%d] = %v (%#08x), the chain gives %v (%#08x)",
								name, s, transA, transB, procs, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
						}
					}
				}
			}
		}
	})
}

// firstDiff is the first index where got and want differ in bits, or -1.
func firstDiff(got, want []float32) int {
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			return i
		}
	}
	return -1
}

// TestPathsListed: the pure-Go path is always there, last, and the path
// in use is one of them.
func TestPathsListed(t *testing.T) {
	ps := Paths()
	if len(ps) == 0 || ps[len(ps)-1] != PathGo {
		t.Fatalf("Paths() = %v, want it to end with %q", ps, PathGo)
	}
	found := false
	for _, p := range ps {
		found = found || p == Path()
	}
	if !found {
		t.Fatalf("Path() = %q is not among %v", Path(), ps)
	}
	for _, v := range []string{"sse", "avx-512"} {
		func() {
			defer func() {
				if r := recover(); r == nil || !containsAll(fmt.Sprint(r), KernelEnv, v) {
					t.Errorf("choosePath(%q): panic %v, want one naming %s and the value", v, r, KernelEnv)
				}
			}()
			choosePath(v)
		}()
	}
	setPath(path)
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}

// TestSgemmTDotSerialAllocatesNothing: the attention products of a decode
// step (one per sequence, head and layer) go through SgemmTDotSerial,
// which must not allocate (a decode token of the Qwen3-0.6B shape at batch
// 32 would otherwise allocate 14,336 times), and gives SgemmT's bits.
func TestSgemmTDotSerialAllocatesNothing(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	m, n, k := 1, 40, 128
	a, b := randSlice(r, m*k), randSlice(r, n*k)
	c1, c2 := make([]float32, m*n), make([]float32, m*n)
	if allocs := testing.AllocsPerRun(20, func() { SgemmTDotSerial(m, n, k, a, k, b, k, c1, n) }); allocs != 0 {
		t.Errorf("SgemmTDotSerial allocates %v times a call", allocs)
	}
	SgemmT(false, true, m, n, k, a, k, b, k, c2, n)
	if i := firstDiff(c1, c2); i >= 0 {
		t.Fatalf("C[%d]: SgemmTDotSerial %v, SgemmT %v", i, c1[i], c2[i])
	}
}
