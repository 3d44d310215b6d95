package gemm

// The pure-Go dot tiles: the kernel path "go" (and every path off amd64)
// computes each output of C = A·Bᵀ in the dot tiles' one summation order
// (dottile.go) with FMA32 for every multiply-add (its common case inline,
// FMA32Quick), so its bits equal the AVX-512 and AVX2 kernels'. (Never
// x*y + z in float32 here: Go may fuse it on arm64, ppc64 and s390x, and
// does not on amd64.)

// dotTileBlockGo computes columns [j0, j1) of C: one row of B at a time
// against every row of A.
func (g *gemmArgs) dotTileBlockGo(j0, j1 int) {
	k := g.k
	for j := j0; j < j1; j++ {
		if g.b16 != nil {
			b := g.b16[j*g.ldb : j*g.ldb+k]
			for i := range g.m {
				g.c[i*g.ldc+j] = dotGoBF16(g.a[i*g.lda:i*g.lda+k], b)
			}
			continue
		}
		b := g.b[j*g.ldb : j*g.ldb+k]
		for i := range g.m {
			g.c[i*g.ldc+j] = dotGo(g.a[i*g.lda:i*g.lda+k], b)
		}
	}
}

// dotGo returns Σ a[p]·b[p] in the one order: 16 lanes of FMA chains over
// the first len(a) &^ 15 values, the halving tree, then the tail chained
// on the sum.
func dotGo(a, b []float32) float32 {
	b = b[:len(a)]
	k16 := len(a) &^ 15
	var x [16]float32
	for p := 0; p < k16; p += 16 {
		aa, bb := (*[16]float32)(a[p:p+16]), (*[16]float32)(b[p:p+16])
		for l := range 16 {
			if v, ok := FMA32Quick(aa[l], bb[l], x[l]); ok {
				x[l] = v
			} else {
				x[l] = FMA32(aa[l], bb[l], x[l])
			}
		}
	}
	s := dotTileTree(&x)
	for p := k16; p < len(a); p++ {
		if v, ok := FMA32Quick(a[p], b[p], s); ok {
			s = v
		} else {
			s = FMA32(a[p], b[p], s)
		}
	}
	return s
}

// dotGoBF16 is dotGo with b holding bfloat16 values, each widened exactly.
func dotGoBF16(a []float32, b []uint16) float32 {
	b = b[:len(a)]
	k16 := len(a) &^ 15
	var x [16]float32
	for p := 0; p < k16; p += 16 {
		aa, bb := (*[16]float32)(a[p:p+16]), (*[16]uint16)(b[p:p+16])
		for l := range 16 {
			bv := bf16ToFloat32(bb[l])
			if v, ok := FMA32Quick(aa[l], bv, x[l]); ok {
				x[l] = v
			} else {
				x[l] = FMA32(aa[l], bv, x[l])
			}
		}
	}
	s := dotTileTree(&x)
	for p := k16; p < len(a); p++ {
		bv := bf16ToFloat32(b[p])
		if v, ok := FMA32Quick(a[p], bv, s); ok {
			s = v
		} else {
			s = FMA32(a[p], bv, s)
		}
	}
	return s
}

// dotTileTree sums the 16 lanes by the halving tree: lane l with lane
// l+8, then l+4, then l+2, then the last two.
func dotTileTree(x *[16]float32) float32 {
	var y [8]float32
	for l := range 8 {
		y[l] = x[l] + x[l+8]
	}
	z0, z1, z2, z3 := y[0]+y[4], y[1]+y[5], y[2]+y[6], y[3]+y[7]
	w0, w1 := z0+z2, z1+z3
	return w0 + w1
}
