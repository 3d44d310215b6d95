package gemm

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
)

// naive computes rows of op(A)·op(B) (those with rowWanted(i)) with float64
// accumulation.
func naive(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, rowWanted, colWanted func(int) bool) []float64 {
	out := make([]float64, m*n)
	for i := 0; i < m; i++ {
		if !rowWanted(i) {
			continue
		}
		for j := 0; j < n; j++ {
			if !colWanted(j) {
				continue
			}
			var s float64
			for p := 0; p < k; p++ {
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
				s += float64(av) * float64(bv)
			}
			out[i*n+j] = s
		}
	}
	return out
}

func randSlice(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64())
	}
	return s
}

// forEachKernel runs f once per micro-kernel available on this CPU (always
// including the pure-Go fallback).
func forEachKernel(t *testing.T, f func(t *testing.T)) {
	saved, savedNarrow := kernel, narrowKernel
	defer func() { kernel, narrowKernel = saved, savedNarrow }()
	// As configured at init (wide kernel plus the narrow one for narrow
	// products, on CPUs that have both).
	t.Run("auto", f)
	narrowKernel = nil
	for _, kern := range availableKernels() {
		kernel = kern
		t.Run(kern.name, f)
	}
}

type shape struct{ m, n, k int }

var testShapes = []shape{
	{1, 1, 1}, {1, 1, 7}, {2, 3, 4}, {7, 13, 5}, {6, 16, 1}, {6, 16, 256},
	{12, 32, 257}, {13, 33, 3}, {100, 1, 17}, {1, 100, 17}, {17, 1, 100},
	{65, 31, 129}, {64, 64, 64}, {96, 80, 300}, {193, 47, 513},
	{50, 2100, 9}, {4096, 128, 128}, {128, 512, 4096}, {4096, 128, 512},
}

func checkOne(t *testing.T, transA, transB bool, s shape, pad int, r *rand.Rand) {
	t.Helper()
	m, n, k := s.m, s.n, s.k
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	lda, ldb, ldc := ac+pad, bc+2*pad, n+3*pad
	a := randSlice(r, (ar-1)*lda+ac)
	b := randSlice(r, (br-1)*ldb+bc)
	c := make([]float32, (m-1)*ldc+n)
	const sentinel = float32(12345.5)
	for i := range c {
		c[i] = sentinel // must be overwritten inside, untouched in padding
	}
	SgemmT(transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
	// For big problems the float64 reference is the slow part of the test:
	// check the first and last 13 rows and 33 columns (covering the edge
	// tiles of every kernel), every 11th row and every 7th column.
	small := m*n*k <= 1<<22
	rowWanted := func(i int) bool { return small || i < 13 || i >= m-13 || i%11 == 0 }
	colWanted := func(j int) bool { return small || j < 33 || j >= n-33 || j%7 == 0 }
	want := naive(transA, transB, m, n, k, a, lda, b, ldb, rowWanted, colWanted)
	// Tolerance: relative 1e-4 of the magnitude scale of the dot product.
	scale := math.Sqrt(float64(k))
	for i := 0; i < m; i++ {
		for j := 0; j < ldc && i*ldc+j < len(c); j++ {
			if j < n && !(rowWanted(i) && colWanted(j)) {
				continue
			}
			got := c[i*ldc+j]
			if j >= n {
				if got != sentinel {
					t.Fatalf("%v tA=%v tB=%v pad=%d: padding C[%d,%d] overwritten: %v", s, transA, transB, pad, i, j, got)
				}
				continue
			}
			w := want[i*n+j]
			if d := math.Abs(float64(got) - w); d > 1e-4*math.Max(math.Abs(w), scale) {
				t.Fatalf("%v tA=%v tB=%v pad=%d: C[%d,%d] = %v, want %v", s, transA, transB, pad, i, j, got, w)
			}
		}
	}
}

func TestSgemm(t *testing.T) {
	forEachKernel(t, func(t *testing.T) {
		r := rand.New(rand.NewSource(1))
		for _, s := range testShapes {
			for _, pad := range []int{0, 3} {
				checkOne(t, false, false, s, pad, r)
			}
		}
	})
}

func TestSgemmTransposed(t *testing.T) {
	forEachKernel(t, func(t *testing.T) {
		r := rand.New(rand.NewSource(2))
		for _, s := range testShapes {
			if s.m*s.n*s.k > 1<<22 {
				continue // the big model shapes are covered by TestSgemm
			}
			for _, tr := range [][2]bool{{true, false}, {false, true}, {true, true}} {
				for _, pad := range []int{0, 5} {
					checkOne(t, tr[0], tr[1], s, pad, r)
				}
			}
		}
		// Gradient shapes of the model, once each.
		checkOne(t, true, false, shape{128, 512, 4096}, 0, r) // dW = Xᵀ·dY
		checkOne(t, false, true, shape{4096, 128, 512}, 0, r) // dX = dY·Wᵀ
	})
}

func TestSgemmSliceAPI(t *testing.T) {
	// Sgemm equals SgemmT(false, false, ...) and k == 0 zeroes C.
	r := rand.New(rand.NewSource(3))
	a, b := randSlice(r, 5*7), randSlice(r, 7*9)
	c1, c2 := make([]float32, 45), make([]float32, 45)
	Sgemm(5, 9, 7, a, 7, b, 9, c1, 9)
	SgemmT(false, false, 5, 9, 7, a, 7, b, 9, c2, 9)
	if fmt.Sprint(c1) != fmt.Sprint(c2) {
		t.Fatal("Sgemm != SgemmT")
	}
	for i := range c1 {
		c1[i] = 1
	}
	Sgemm(5, 9, 0, nil, 0, nil, 9, c1, 9)
	for _, v := range c1 {
		if v != 0 {
			t.Fatal("k == 0 must zero C")
		}
	}
}

func TestSgemmPanicsOnShortSlice(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("expected panic")
		}
	}()
	Sgemm(4, 4, 4, make([]float32, 15), 4, make([]float32, 16), 4, make([]float32, 16), 4)
}
