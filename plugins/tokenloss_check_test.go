package plugins

import (
	"reflect"
	"strings"
	"testing"
)

// checkTokenLoss unpacks the wire form by the batch's lengths, checks it,
// and scales AbsKLCoef and EntropyCoef (not PGWeight) by the weight.
func TestCheckTokenLoss(t *testing.T) {
	lens := []int{2, 1}
	tl, err := checkTokenLoss(tokenLossWire{hasPG: true, pg: []float64{0, 1, 0.5}, hasKL: true, kl: []float64{1, 0, 2}, ent: 0.01}, lens, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(tl.PGWeight, [][]float64{{0, 1}, {0.5}}) || !reflect.DeepEqual(tl.AbsKLCoef, [][]float64{{0.5, 0}, {1}}) || tl.EntropyCoef != 0.005 {
		t.Fatalf("got %+v", tl)
	}
	tl, err = checkTokenLoss(tokenLossWire{ent: 0.02}, lens, 1)
	if err != nil || tl.PGWeight != nil || tl.AbsKLCoef != nil || tl.EntropyCoef != 0.02 {
		t.Fatalf("absent weights: %+v %v", tl, err)
	}
	for _, c := range []struct {
		w    tokenLossWire
		want string
	}{
		{tokenLossWire{hasPG: true, pg: []float64{1, 1}}, "pg_weight: 2 entries for 3 tokens"},
		{tokenLossWire{kl: []float64{1, 1, 1}}, "abs_kl_coef: 3 entries but has_abs_kl_coef is false"},
		{tokenLossWire{hasPG: true, pg: []float64{1, -1, 1}}, "PGWeight: sequence 0 token 1: -1 is not a finite weight >= 0"},
		{tokenLossWire{hasKL: true, kl: []float64{1, 1, 1e308}}, ""},
	} {
		_, err := checkTokenLoss(c.w, lens, 1)
		if c.want == "" {
			if err != nil {
				t.Errorf("%+v: %v", c.w, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", c.w, err, c.want)
		}
	}
	if _, err := checkTokenLoss(tokenLossWire{hasKL: true, kl: []float64{1, 1, 1e308}}, lens, 10); err == nil || !strings.Contains(err.Error(), "not finite") {
		t.Errorf("overflow by the weight: %v", err)
	}
}

// FuzzCheckTokenLoss holds checkTokenLoss to the rules restated here: each
// array absent (has_* false and no entries) or of sum(lens) entries, every
// entry finite and >= 0, the entropy coefficient finite, w finite, and the
// weighted abs_kl_coef and entropy_coef finite; accepted answers come back
// as rows of the batch's lengths, pg_weight unscaled, the rest times w.
func FuzzCheckTokenLoss(f *testing.F) {
	f.Add([]byte{2, 2, 1, 1, 0, 1, 0}, []byte{0, 1, 2, 2, 0, 1}, 1.0)
	f.Add([]byte{3, 1, 1, 1, 1, 1, 1, 0x81}, []byte{2, 3, 0, 1, 1, 1, 4}, 0.5)
	f.Add([]byte{1, 4, 0, 1, 1}, []byte{8, 0, 0, 0, 0}, 1e308)
	f.Fuzz(func(t *testing.T, shape, vals []byte, w float64) {
		in := &fuzzInput{shape: shape, vals: vals}
		lens := in.seqLens()
		total := 0
		for _, l := range lens {
			total += l
		}
		var wire tokenLossWire
		wire.hasPG, wire.hasKL = in.byte()%2 == 1, in.byte()%2 == 1
		npg, nkl := 0, 0
		if wire.hasPG {
			npg = total
		}
		if wire.hasKL {
			nkl = total
		}
		wire.pg = in.values(in.deviate(npg))
		wire.kl = in.values(in.deviate(nkl))
		wire.ent = in.value()
		pg := append([]float64(nil), wire.pg...) // checkTokenLoss scales abs_kl_coef in place
		valid := isFinite(w) && isFinite(wire.ent) && isFinite(w*wire.ent) && len(wire.pg) == npg && len(wire.kl) == nkl
		for _, x := range wire.pg {
			valid = valid && isFinite(x) && x >= 0
		}
		for _, x := range wire.kl {
			valid = valid && isFinite(x) && x >= 0 && isFinite(w*x)
		}
		got, err := checkTokenLoss(wire, lens, w)
		verdict(t, "TokenLoss", valid, err)
		if err != nil {
			return
		}
		if (got.PGWeight != nil) != wire.hasPG || (got.AbsKLCoef != nil) != wire.hasKL {
			t.Fatalf("TokenLoss: presence %v %v, want %v %v", got.PGWeight != nil, got.AbsKLCoef != nil, wire.hasPG, wire.hasKL)
		}
		off := 0
		for i, l := range lens {
			if wire.hasPG && len(got.PGWeight[i]) != l || wire.hasKL && len(got.AbsKLCoef[i]) != l {
				t.Fatalf("TokenLoss: sequence %d: rows of the wrong length", i)
			}
			for j := range l {
				if wire.hasPG && !same(got.PGWeight[i][j], pg[off+j]) {
					t.Fatalf("TokenLoss: pg_weight %v, want %v (unscaled)", got.PGWeight[i][j], pg[off+j])
				}
			}
			off += l
		}
		if !same(got.EntropyCoef, w*wire.ent) && !(w == 1 && same(got.EntropyCoef, wire.ent)) {
			t.Fatalf("TokenLoss: entropy coefficient %v, want %v * %v", got.EntropyCoef, w, wire.ent)
		}
	})
}
