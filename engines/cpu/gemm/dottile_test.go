package gemm

import (
	"bytes"
	"fmt"
	"math"
	"math/big"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// dotExactFMA computes a·b + c rounded once to float32 from the exact
// value, for the reference of the dot tiles' order (dotRef), independently
// of FMA32 and of the kernels: math/big holds the exact product and sum.
// Its scratch values are reused, so one is not safe for concurrent use.
type dotExactFMA struct {
	x, y, p, s big.Float
	slowOnly   bool // skip the float64 shortcut (TestDotExactFMA)
}

func (e *dotExactFMA) fma(a, b, c float32) float32 {
	// The product of two float32 values is exact in float64: 48
	// significant bits, exponent within [-298, 256].
	pf, cf := float64(a)*float64(b), float64(c)
	if math.IsInf(pf, 0) || math.IsInf(cf, 0) || math.IsNaN(pf) || math.IsNaN(cf) {
		return float32(pf + cf) // IEEE rules for infinities and NaN (payloads unspecified)
	}
	if pf == 0 && cf == 0 {
		// An exact zero sum is +0 unless both addends are -0.
		if math.Signbit(pf) && math.Signbit(cf) {
			return float32(math.Copysign(0, -1))
		}
		return 0
	}
	if !e.slowOnly {
		// Shortcut (most sums of a dot product's chain): when the float64
		// sum is exact (TwoSum's error term is 0), its conversion is the
		// one rounding of the exact value.
		s := pf + cf
		bv := s - pf
		if (pf-(s-bv))+(cf-bv) == 0 && math.Abs(s) <= math.MaxFloat32 {
			return float32(s)
		}
	}
	e.x.SetFloat64(float64(a))
	e.y.SetFloat64(float64(b))
	if e.p.SetPrec(64).Mul(&e.x, &e.y).Acc() != big.Exact {
		panic("dotExactFMA: inexact product")
	}
	e.x.SetFloat64(cf)
	// 1200 bits hold any such sum exactly (it spans 2^257 down to 2^-298).
	if e.s.SetPrec(1200).Add(&e.p, &e.x).Acc() != big.Exact {
		panic("dotExactFMA: inexact sum")
	}
	if e.s.Sign() == 0 {
		return 0 // exact cancellation of nonzero addends: +0
	}
	f, _ := e.s.Float32() // round to nearest, ties to even; overflow to ±Inf
	return f
}

// dotRef is the dot tiles' summation order (dottile.go) spelled out:
// Σ a[p]·b[p], k = len(a), as 16 lane chains of fma over the first k&^15
// products, the halving tree, then the tail chained on the sum.
func dotRef(e *dotExactFMA, a, b []float32) float32 {
	k := len(a)
	k16 := k &^ 15
	var x [16]float32 // +0
	for p := 0; p < k16; p++ {
		x[p%16] = e.fma(a[p], b[p], x[p%16])
	}
	var y [8]float32
	for l := range y {
		y[l] = x[l] + x[l+8]
	}
	var z [4]float32
	for l := range z {
		z[l] = y[l] + y[l+4]
	}
	var w [2]float32
	for l := range w {
		w[l] = z[l] + z[l+2]
	}
	s := w[0] + w[1]
	for p := k16; p < k; p++ {
		s = e.fma(a[p], b[p], s)
	}
	return s
}

// TestDotExactFMA: dotExactFMA's float64 shortcut agrees with its math/big
// path, on random operands of a dot product's sizes and on special and
// extreme values.
func TestDotExactFMA(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	var fast, slow dotExactFMA
	slow.slowOnly = true
	special := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 1.5, 3, -7,
		math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32, 1e-40, 0x1p-126, 1e-20, -3e-25,
		math.MaxFloat32, -math.MaxFloat32, 3e38, 1e19, float32(math.Inf(1)), float32(math.Inf(-1))}
	pick := func() float32 {
		switch r.Intn(4) {
		case 0:
			return special[r.Intn(len(special))]
		case 1:
			return float32(r.NormFloat64() * math.Pow(2, float64(r.Intn(300)-150)))
		}
		return float32(r.NormFloat64())
	}
	for range 200000 {
		a, b, c := pick(), pick(), pick()
		if r.Intn(3) == 0 {
			c = float32(float64(a) * float64(b) * (1 + float64(r.Intn(3)-1)*0x1p-24)) // near cancellation
			c = -c
		}
		got, want := fast.fma(a, b, c), slow.fma(a, b, c)
		if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
			t.Fatalf("fma(%g, %g, %g): shortcut %g (%#08x), math/big %g (%#08x)", a, b, c, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
}

// TestFMA32Quick: when FMA32Quick claims its float64 shortcut, the result
// is the one rounding of a·b + c (dotExactFMA): random operands, sums in
// the subnormal range, and sums whose float64 rounding lands on a float32
// midpoint that the exact value is not on (double rounding), which it must
// leave to FMA32.
func TestFMA32Quick(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	var e dotExactFMA
	check := func(a, b, c float32) bool {
		t.Helper()
		v, ok := FMA32Quick(a, b, c)
		if want := e.fma(a, b, c); ok && !sameFloat32(v, want) {
			t.Fatalf("FMA32Quick(%g, %g, %g) = %g, ok; the exact one rounding is %g", a, b, c, v, want)
		}
		return ok
	}
	// a·b = 2^-24·(1 - 2^-30)·2^s, c = (1 + 2^-23)·2^s: the float64 sum is
	// c + half an ulp of c (a tie, rounded to even: up), the exact sum is
	// below it (rounds down).
	a := float32(1 + 0x1p-15)
	for s := -100; s <= 100; s++ {
		b := float32(math.Ldexp((1-0x1p-15)*0x1p-24, s))
		c := float32(math.Ldexp(1+0x1p-23, s))
		if got := FMA32(a, b, c); got != c {
			t.Fatalf("scale 2^%d: FMA32 = %g, want %g", s, got, c)
		}
		if check(a, b, c) {
			t.Fatalf("scale 2^%d: FMA32Quick takes a double rounding", s)
		}
		check(-a, b, -c)
	}
	for range 200000 {
		a, b := float32(r.NormFloat64()), float32(r.NormFloat64())
		c := float32(r.NormFloat64() * math.Ldexp(1, r.Intn(60)-30))
		if r.Intn(4) == 0 {
			a, b = a*0x1p-64, b*0x1p-64 // products near the subnormal range
			c *= 0x1p-126
		}
		check(a, b, c)
	}
}

// sameFloat32 reports whether got and want have the same bits (any two
// NaNs match: their payloads are not specified).
func sameFloat32(got, want float32) bool {
	return math.Float32bits(got) == math.Float32bits(want) || got != got && want != want
}

// dotCase is one C = A·Bᵀ product for the dot-tile tests: A m×k (row
// stride lda), B n×k (stride ldb), C m×n (stride ldc), and want its
// reference. With b16, B holds bfloat16-representable values and b16 the
// same B as bfloat16.
type dotCase struct {
	m, n, k, lda, ldb, ldc int
	a, b                   []float32
	b16                    []uint16
	want                   []float32
}

// newDotCase draws A and B with val (B rounded to bfloat16 with bf16) and
// computes the reference.
func newDotCase(e *dotExactFMA, m, n, k, pad int, bf16 bool, val func() float32) *dotCase {
	d := &dotCase{m: m, n: n, k: k, lda: k + pad, ldb: k + 2*pad, ldc: n + 3*pad}
	d.a = make([]float32, (m-1)*d.lda+k)
	for i := range d.a {
		d.a[i] = val()
	}
	d.b = make([]float32, (n-1)*d.ldb+k)
	for i := range d.b {
		d.b[i] = val()
	}
	if bf16 {
		d.b16 = make([]uint16, len(d.b))
		for i, v := range d.b {
			d.b16[i] = uint16(math.Float32bits(v) >> 16)
			d.b[i] = math.Float32frombits(uint32(d.b16[i]) << 16)
		}
	}
	d.want = make([]float32, m*n)
	for i := range m {
		for j := range n {
			d.want[i*n+j] = dotRef(e, d.a[i*d.lda:i*d.lda+k], d.b[j*d.ldb:j*d.ldb+k])
		}
	}
	return d
}

// entries are the entry points d runs through: parallel (SgemmT, when
// the product is large enough), serial, and, with a bfloat16 B, SgemmTBF16.
func (d *dotCase) entries() []string {
	if d.b16 == nil {
		return []string{"SgemmT", "SgemmTSerial"}
	}
	return []string{"SgemmT", "SgemmTSerial", "SgemmTBF16"}
}

// run computes d's product through the named entry point into a fresh C
// whose padding holds a sentinel.
func (d *dotCase) run(entry string) []float32 {
	c := make([]float32, (d.m-1)*d.ldc+d.n)
	for i := range c {
		c[i] = dotSentinel
	}
	switch entry {
	case "SgemmT":
		SgemmT(false, true, d.m, d.n, d.k, d.a, d.lda, d.b, d.ldb, c, d.ldc)
	case "SgemmTSerial":
		SgemmTSerial(false, true, d.m, d.n, d.k, d.a, d.lda, d.b, d.ldb, c, d.ldc)
	case "SgemmTBF16":
		SgemmTBF16(false, true, d.m, d.n, d.k, d.a, d.lda, d.b16, d.ldb, c, d.ldc)
	default:
		panic(entry)
	}
	return c
}

const dotSentinel = float32(12345.5)

// check runs every entry point on the kernel path in use and demands the
// reference's bits in C and an untouched padding.
func (d *dotCase) check(t *testing.T, what string) {
	t.Helper()
	for _, entry := range d.entries() {
		c := d.run(entry)
		for i := range d.m {
			for j := range d.ldc {
				if i*d.ldc+j >= len(c) {
					break
				}
				got := c[i*d.ldc+j]
				if j >= d.n {
					if got != dotSentinel {
						t.Fatalf("%s %s m %d n %d k %d: padding C[%d,%d] written: %v", what, entry, d.m, d.n, d.k, i, j, got)
					}
					continue
				}
				if want := d.want[i*d.n+j]; !sameFloat32(got, want) {
					t.Fatalf("%s %s m %d n %d k %d (lda %d ldb %d ldc %d): C[%d,%d] = %v (%#08x), the order gives %v (%#08x)",
						what, entry, d.m, d.n, d.k, d.lda, d.ldb, d.ldc, i, j, got, math.Float32bits(got), want, math.Float32bits(want))
				}
			}
		}
	}
}

// eachDotPath calls f with each kernel path this CPU has installed, then
// restores the path in use.
func eachDotPath(f func(p string)) {
	saved := path
	defer setPath(saved)
	for _, p := range Paths() {
		setPath(p)
		f(p)
	}
}

// TestDotTiles holds every dot-tile product to the one summation order
// (dotRef, exact arithmetic) bit for bit, on every kernel path this CPU
// has: every tile kernel and edge (rows of A not a multiple of 3 or 6,
// rows of B not a multiple of 2, 4 or 8, k below 16, a multiple of 16 or
// with a tail), padded strides, the parallel and serial entry points and
// a bfloat16 B.
func TestDotTiles(t *testing.T) {
	ms := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 32, 64}
	ns := []int{1, 3, 4, 5, 7, 8, 9, 13, 16, 17, 64, 67, 200}
	ks := []int{1, 5, 15, 16, 17, 31, 32, 48, 130, 1024}
	if testing.Short() {
		ms, ks = ms[:13], ks[:9]
	}
	r := rand.New(rand.NewSource(7))
	norm := func() float32 { return float32(r.NormFloat64()) }
	var e dotExactFMA
	pads := []int{0, 3, 1}
	q := 0
	for _, m := range ms {
		for _, n := range ns {
			for _, k := range ks {
				if !DotTiles(false, true, m, k) {
					t.Fatalf("m %d k %d does not take the dot-tile path", m, k)
				}
				// Strides padded by 0, 3 or 1; B float32 or bfloat16
				// (all six pairs in turn).
				d := newDotCase(&e, m, n, k, pads[q%len(pads)], q%2 == 1, norm)
				q++
				eachDotPath(func(p string) { d.check(t, p) })
			}
		}
	}
	if DotTiles(false, true, 257, 1024) || DotTiles(true, true, 1, 16) || DotTiles(false, false, 1, 16) {
		t.Error("DotTiles takes a product it should not")
	}
}

// TestDotTilesSpecial: the order holds with signed zeros and exact
// cancellations, subnormal products and sums (and products that round to
// ±0), and sums near float32's largest value that overflow to ±Inf (and
// NaN, when both infinities meet).
func TestDotTilesSpecial(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	negZero := float32(math.Copysign(0, -1))
	palettes := map[string][]float32{
		"zeros":     {0, negZero, 0, negZero, 0, negZero, 1, -1},
		"subnormal": {0x1p-70, -0x1p-71, 0x1.8p-72, -0x1p-75, 0x1p-64, negZero, 0x1.4p-66, 0x1p-80, -0x1p-78},
		"tiny":      {0x1p-80, -0x1p-78, 0x1p-80, -0x1p-76, 0x1p-66, negZero},
		"overflow":  {1.5e19, -1e19, 0x1.fp63, -0x1.cp63, 1, 0, -3, 0.5, 1e9, -1e9, 0.75, 2, 1e18, -1, 7, -4, 0},
	}
	for _, name := range []string{"zeros", "subnormal", "tiny", "overflow"} {
		pal := palettes[name]
		val := func() float32 {
			v := pal[r.Intn(len(pal))]
			if name == "subnormal" && r.Intn(3) == 0 {
				v *= float32(1 + r.Float64())
			}
			return v
		}
		var e dotExactFMA
		for _, s := range []shape{{4, 7, 1}, {3, 5, 2}, {1, 9, 5}, {3, 8, 16}, {7, 5, 33}, {2, 13, 64}, {13, 4, 47}, {1, 17, 160}} {
			d := newDotCase(&e, s.m, s.n, s.k, 1, name != "subnormal", val)
			eachDotPath(func(p string) { d.check(t, name+" "+p) })
		}
	}
}

// TestDotTilesThreads: the same products at GOMAXPROCS 1, 2, 3 and 8
// (blocks handed out differently, the tail of the split cut or not) give
// the same bits, equal to the reference, on every path; SgemmTMany too.
func TestDotTilesThreads(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	norm := func() float32 { return float32(r.NormFloat64()) }
	var e dotExactFMA
	shapes := []shape{{1, 3072, 1024}, {7, 520, 1024}, {32, 1024, 130}, {13, 1000, 48}, {3, 2048, 1031}}
	if testing.Short() {
		shapes = shapes[1:2]
	}
	saved := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(saved)
	for si, s := range shapes {
		d := newDotCase(&e, s.m, s.n, s.k, 0, si%2 == 1, norm)
		b2 := make([]float32, len(d.b))
		copy(b2, d.b[len(d.b)/2:])
		copy(b2[len(d.b)-len(d.b)/2:], d.b)
		eachDotPath(func(p string) {
			var first [][]float32
			for _, procs := range []int{1, 2, 3, 8} {
				runtime.GOMAXPROCS(procs)
				var outs [][]float32
				entries := d.entries()
				for _, entry := range entries {
					outs = append(outs, d.run(entry))
				}
				ps := []Product{{N: s.n, B: d.b, C: make([]float32, s.m*s.n)}, {N: s.n, B: b2, C: make([]float32, s.m*s.n)}}
				SgemmTMany(s.m, s.k, d.a, ps)
				outs = append(outs, ps[0].C, ps[1].C)
				runtime.GOMAXPROCS(saved)
				if first == nil {
					first = outs
					for x, c := range outs[:len(entries)+1] {
						if i := dotFirstDiff(c, d.want); i >= 0 {
							t.Fatalf("%s %v GOMAXPROCS %d output %d: C[%d] = %v, the order gives %v", p, s, procs, x, i, c[i], d.want[i])
						}
					}
					continue
				}
				for x := range outs {
					if i := dotFirstDiff(outs[x], first[x]); i >= 0 {
						t.Fatalf("%s %v output %d: C[%d] = %v at GOMAXPROCS %d, %v at 1", p, s, x, i, outs[x][i], procs, first[x][i])
					}
				}
			}
		})
	}
}

// dotFirstDiff is the first index where got and want differ in bits, or -1.
func dotFirstDiff(got, want []float32) int {
	for i := range want {
		if !sameFloat32(got[i], want[i]) {
			return i
		}
	}
	return -1
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

// TestSgemmTMany: products sharing A, on every kernel path, bit for bit
// against the one order's reference (dot tiles) and against one SgemmT per
// product; covers the parallel split (decode shapes of a 1024-wide model),
// small serial products, odd widths, and the fallback when A is too large
// for dot tiles (then only against SgemmT).
func TestSgemmTMany(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	var e dotExactFMA
	for _, c := range []struct {
		m, k int
		ns   []int
	}{
		{1, 1024, []int{2048, 1024, 1024}}, // q, k, v
		{1, 1024, []int{3072, 3072}},       // gate, up
		{3, 1024, []int{2048, 1024, 1024}},
		{7, 48, []int{3, 67, 200}}, // small: one core
		{2, 1031, []int{1000, 130, 17, 520, 64}},
		{5, 9, []int{40, 7}},       // no kernel: the tail only
		{512, 1024, []int{64, 96}}, // A over 1 MiB: SgemmT each
	} {
		a := randSlice(r, c.m*c.k)
		var bs, wants [][]float32
		for _, n := range c.ns {
			b := randSlice(r, n*c.k)
			bs = append(bs, b)
			if !DotTiles(false, true, c.m, c.k) {
				wants = append(wants, nil)
				continue
			}
			want := make([]float32, c.m*n)
			for i := range c.m {
				for j := range n {
					want[i*n+j] = dotRef(&e, a[i*c.k:(i+1)*c.k], b[j*c.k:(j+1)*c.k])
				}
			}
			wants = append(wants, want)
		}
		eachDotPath(func(path string) {
			var ps []Product
			for pi, n := range c.ns {
				ps = append(ps, Product{N: n, B: bs[pi], C: make([]float32, c.m*n)})
			}
			SgemmTMany(c.m, c.k, a, ps)
			for pi, p := range ps {
				one := make([]float32, c.m*p.N)
				SgemmT(false, true, c.m, p.N, c.k, a, c.k, p.B, c.k, one, p.N)
				if i := dotFirstDiff(p.C, one); i >= 0 {
					t.Fatalf("%s m %d k %d product %d (n %d): C[%d] = %v, SgemmT alone %v", path, c.m, c.k, pi, p.N, i, p.C[i], one[i])
				}
				if wants[pi] == nil {
					continue
				}
				if i := dotFirstDiff(p.C, wants[pi]); i >= 0 {
					t.Fatalf("%s m %d k %d product %d (n %d): C[%d] = %v, the order gives %v", path, c.m, c.k, pi, p.N, i, p.C[i], wants[pi][i])
				}
			}
		})
	}
}

// SgemmTBF16 equals SgemmT on the widened B bit for bit, on every kernel
// path, on the dot-tile path (the bfloat16 tile kernels, k with and
// without a tail, padded strides) and the packed one (both layouts of B, several depth
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
		eachDotPath(func(p string) {
			want, got := make([]float32, m*n), make([]float32, m*n)
			SgemmT(c.transA, c.transB, m, n, k, a, lda, bf, ldb, want, n)
			SgemmTBF16(c.transA, c.transB, m, n, k, a, lda, b16, ldb, got, n)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s %+v: C[%d] = %v with bfloat16 B, %v with its float32 widening", p, c, i, got[i], want[i])
				}
			}
		})
	}
}
