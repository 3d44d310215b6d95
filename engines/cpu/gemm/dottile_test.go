package gemm

import (
	"bytes"
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestDotTiles covers every tile kernel and edge of the dot-product path
// (C = A·Bᵀ, few rows of A) against the float64 loop: rows of A not a
// multiple of 6, rows of B not a multiple of 4 or 8, k with and without a
// tail of k%16, padded strides, and the serial entry point.
func TestDotTiles(t *testing.T) {
	if !dotTilesAVX512 {
		t.Skip("no AVX-512 on this CPU: the dot-tile kernels are not used")
	}
	r := rand.New(rand.NewSource(7))
	for _, m := range []int{1, 2, 3, 4, 5, 6, 7, 11, 12, 13, 32, 64} {
		for _, n := range []int{1, 3, 4, 5, 8, 9, 13, 64, 67, 200} {
			for _, k := range []int{16, 17, 31, 48, 130} {
				s := shape{m, n, k}
				if !(&gemmArgs{transB: true, m: m, n: n, k: k}).useDotTiles() {
					t.Fatalf("%v does not take the dot-tile path", s)
				}
				checkOne(t, false, true, s, 0, r)
				checkOne(t, false, true, s, 3, r)
			}
		}
	}
	// Serial entry point and the decode shapes of a 1024-wide model.
	for _, s := range []shape{{1, 3072, 1024}, {32, 1024, 3072}, {7, 520, 1024}} {
		checkOne(t, false, true, s, 0, r)
		m, n, k := s.m, s.n, s.k
		a, b := randSlice(r, m*k), randSlice(r, n*k)
		c1, c2 := make([]float32, m*n), make([]float32, m*n)
		SgemmTSerial(false, true, m, n, k, a, k, b, k, c1, n)
		useDotTilesSwitch = false
		SgemmTSerial(false, true, m, n, k, a, k, b, k, c2, n)
		useDotTilesSwitch = true
		for i := range c1 {
			if d := c1[i] - c2[i]; d > 1e-3 || d < -1e-3 {
				t.Fatalf("%v serial: dot tiles %v, packed %v at %d", s, c1[i], c2[i], i)
			}
		}
	}
}

// BenchmarkDecodeABt: C = A·Bᵀ at the decode shapes of a Qwen3-0.6B-like
// model (d 1024, ff 3072, 16 query heads of 128), at batch 1, 8 and 32,
// on the dot-tile path and on the packed path.
func BenchmarkDecodeABt(b *testing.B) {
	for _, s := range []struct {
		name string
		n, k int
	}{{"qproj", 2048, 1024}, {"up", 3072, 1024}, {"down", 1024, 3072}} {
		for _, m := range []int{1, 8, 32, 128, 256} {
			for _, dot := range []bool{true, false} {
				path := "packed"
				if dot {
					path = "dottile"
				}
				b.Run(fmt.Sprintf("%s/m%d/%s", s.name, m, path), func(b *testing.B) {
					useDotTilesSwitch = dot
					defer func() { useDotTilesSwitch = true }()
					benchGemm(b, false, true, m, s.n, s.k)
				})
			}
		}
	}
}

// BenchmarkDecodeStream: C = A·Bᵀ at batch 1 and 32 over 1 GiB of
// weights (far more than the L3), so B comes from memory as in a decode
// step; reports the rate at which B is read.
func BenchmarkDecodeStream(b *testing.B) {
	const k = 1024
	r := rand.New(rand.NewSource(1))
	for _, s := range []struct{ n, m int }{{3072, 1}, {1024, 1}, {3072, 32}} {
		n, m := s.n, s.m
		mats := (1 << 30) / (4 * n * k)
		ws := make([][]float32, mats)
		for i := range ws {
			ws[i] = randSlice(r, n*k)
		}
		b.Run(fmt.Sprintf("%dx%d/m%d", n, k, m), func(b *testing.B) {
			a, c := randSlice(r, m*k), make([]float32, m*n)
			for b.Loop() {
				for _, w := range ws {
					SgemmT(false, true, m, n, k, a, k, w, k, c, n)
				}
			}
			b.ReportMetric(float64(4*n*k*mats)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}

// TestDotTilesGenerated: dottile_amd64.s is what gen_dottile.go writes
// (edit the generator, then run go generate).
func TestDotTilesGenerated(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the generator with the go tool")
	}
	out := filepath.Join(t.TempDir(), "dottile.s")
	cmd := exec.Command("go", "run", "gen_dottile.go", "-o", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run gen_dottile.go: %v\n%s", err, b)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("dottile_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("dottile_amd64.s differs from gen_dottile.go's output: run go generate ./engines/cpu/gemm")
	}
}

// TestSplitDotTileRows: the blocks cover [0, n) in order without gaps or
// overlaps; blocks are 64 rows, except the last 2·workers·4 or fewer of
// 16 when a product has more than 4 blocks per worker.
func TestSplitDotTileRows(t *testing.T) {
	for _, c := range []struct {
		n, workers   int
		count, small int // blocks, and how many of them are 16 rows or fewer
	}{
		{1, 2, 1, 1},
		{64, 2, 1, 0},
		{512, 2, 8, 0},        // 8 blocks = 4 per worker: not cut
		{520, 2, 18, 13},      // 9 blocks: 5 big (320 rows), then 200 rows in 13
		{1024, 2, 28, 16},     // 12 big + 4 x 4 small
		{3072, 1, 48, 0},      // serial: not cut
		{3072, 2, 60, 16},     // 44 big + 16 small
		{3072, 4, 72, 32},     // 40 big + 32 small
		{151936, 2, 2386, 16}, // 2370 big + 16 small
	} {
		s := splitDotTileRows(c.n, c.workers)
		next, small := 0, 0
		for i := range s.count {
			j0, j1 := s.rows(i)
			if j0 != next || j1 <= j0 || j1-j0 > 64 {
				t.Fatalf("n %d workers %d: block %d is [%d, %d) after %d", c.n, c.workers, i, j0, j1, next)
			}
			if j1-j0 <= 16 {
				small++
			}
			next = j1
		}
		if next != c.n {
			t.Errorf("n %d workers %d: blocks end at %d", c.n, c.workers, next)
		}
		if s.count != c.count || small != c.small {
			t.Errorf("n %d workers %d: %d blocks (%d small), want %d (%d)", c.n, c.workers, s.count, small, c.count, c.small)
		}
	}
}

// TestSgemmTMany: products sharing A, against a float64 loop over each
// output (every product's every column) and bit for bit against one
// SgemmT per product; covers the parallel split (decode shapes of a
// 1024-wide model), small serial products, odd widths, and the fallback
// when A is too large for dot tiles.
func TestSgemmTMany(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	for _, c := range []struct {
		m, k int
		ns   []int
	}{
		{1, 1024, []int{2048, 1024, 1024}}, // q, k, v
		{1, 1024, []int{3072, 3072}},       // gate, up
		{3, 1024, []int{2048, 1024, 1024}},
		{7, 48, []int{3, 67, 200}}, // small: one core
		{2, 1024, []int{1000, 130, 17, 520, 64}},
		{512, 1024, []int{64, 96}}, // A over 1 MiB: SgemmT each
	} {
		a := randSlice(r, c.m*c.k)
		var ps []Product
		for _, n := range c.ns {
			ps = append(ps, Product{N: n, B: randSlice(r, n*c.k), C: make([]float32, c.m*n)})
		}
		SgemmTMany(c.m, c.k, a, ps)
		for pi, p := range ps {
			one := make([]float32, c.m*p.N)
			SgemmT(false, true, c.m, p.N, c.k, a, c.k, p.B, c.k, one, p.N)
			for i := 0; i < c.m; i++ {
				for j := 0; j < p.N; j++ {
					got := p.C[i*p.N+j]
					if got != one[i*p.N+j] {
						t.Fatalf("m %d k %d product %d (n %d) [%d,%d]: %v, SgemmT alone %v", c.m, c.k, pi, p.N, i, j, got, one[i*p.N+j])
					}
					want := 0.0
					for q := 0; q < c.k; q++ {
						want += float64(a[i*c.k+q]) * float64(p.B[j*c.k+q])
					}
					if d := math.Abs(float64(got) - want); d > 1e-4*math.Sqrt(float64(c.k)) {
						t.Fatalf("m %d k %d product %d [%d,%d]: %v, want %v", c.m, c.k, pi, i, j, got, want)
					}
				}
			}
		}
	}
}

// SgemmTBF16 equals SgemmT on the widened B bit for bit, on the dot-tile
// path (AVX-512: the bfloat16 tile kernels, k with and without a tail,
// padded strides) and the packed one (both layouts of B, several depth
// and column blocks, split by rows and by columns).
func TestSgemmTBF16(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	for _, c := range []struct {
		transA, transB bool
		m, n, k, pad   int
	}{
		{false, true, 1, 67, 130, 0}, {false, true, 5, 13, 31, 3}, {false, true, 13, 200, 48, 0},
		{false, true, 1, 3072, 1024, 0}, {false, true, 64, 300, 300, 5}, {false, false, 40, 300, 300, 0},
		{true, false, 30, 2100, 270, 2}, {false, false, 1, 70, 37, 0}, {true, true, 200, 40, 600, 1},
	} {
		m, n, k := c.m, c.n, c.k
		rowsA, colsA := m, k
		if c.transA {
			rowsA, colsA = k, m
		}
		rowsB, colsB := k, n
		if c.transB {
			rowsB, colsB = n, k
		}
		lda, ldb := colsA+c.pad, colsB+c.pad
		a := randSlice(r, (rowsA-1)*lda+colsA)
		b16 := make([]uint16, (rowsB-1)*ldb+colsB)
		bf := make([]float32, len(b16))
		for i := range b16 {
			b16[i] = uint16(math.Float32bits(float32(r.NormFloat64())) >> 16)
			bf[i] = math.Float32frombits(uint32(b16[i]) << 16)
		}
		want, got := make([]float32, m*n), make([]float32, m*n)
		SgemmT(c.transA, c.transB, m, n, k, a, lda, bf, ldb, want, n)
		SgemmTBF16(c.transA, c.transB, m, n, k, a, lda, b16, ldb, got, n)
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%+v: C[%d] = %v with bfloat16 B, %v with its float32 widening", c, i, got[i], want[i])
			}
		}
	}
}
