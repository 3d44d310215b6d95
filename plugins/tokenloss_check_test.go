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
