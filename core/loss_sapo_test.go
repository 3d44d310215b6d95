package core

import (
	"math"
	"testing"
)

// SAPO worked by hand, token-mean. With tau_pos = 2 and tau_neg = 4 the
// ratios are picked so that tau * (rho - 1) = +-ln 3, where the sigmoid is
// 3/4 or 1/4:
//
//	t0: A = +1, rho = 1 + ln3/2 (tau 2): s = 3/4, pg = -(4/2)(3/4) = -1.5,
//	    d = -4 (3/4)(1/4) rho = -0.75 rho
//	t1: A = -2, rho = 1 - ln3/4 (tau 4): s = 1/4, pg = -(4/4)(1/4)(-2) = 0.5,
//	    d = -4 (1/4)(3/4)(-2) rho = 1.5 rho
//	t2: A = -1, rho = 1 (tau 4): s = 1/2, pg = 0.5, d = -4 (1/4)(-1) = 1
//	t3: A = +1, log-ratio 25, clamped to 20 (tau 2): s = 1, pg = -2, d = 0
//
// Sum -2.5 over N = 4 tokens. At the defaults (tau_pos 1, tau_neg 1.05),
// at rho = 1: A = +1 gives pg = -4/1 * 1/2 = -2, d = -1; A = -1 gives
// 2/1.05, d = 1; A = 0 gives 0. No token counts as clipped.
func TestSAPOByHand(t *testing.T) {
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-12 }
	ln3 := math.Log(3)
	rho0, rho1 := 1+ln3/2, 1-ln3/4
	cases := []struct {
		name   string
		params map[string]any
		seq    LossSeq
		loss   float64
		coef   []float64
	}{
		{"tau_pos 2, tau_neg 4", map[string]any{"tau_pos": 2, "tau_neg": 4.0},
			LossSeq{OldLogProbs: []float64{-1, -1, -1, -1}, NewLogProbs: []float64{-1 + math.Log(rho0), -1 + math.Log(rho1), -1, 24}, Advantages: []float64{1, -2, -1, 1}},
			-2.5 / 4, []float64{-0.75 * rho0 / 4, 1.5 * rho1 / 4, 1.0 / 4, 0}},
		{"defaults", nil,
			LossSeq{OldLogProbs: []float64{-2, -2, -2}, NewLogProbs: []float64{-2, -2, -2}, Advantages: []float64{1, -1, 0}},
			(-2 + 2/1.05) / 3, []float64{-1.0 / 3, 1.0 / 3, 0}},
	}
	for _, c := range cases {
		res, err := PolicyLoss([]LossSeq{c.seq}, PolicyLossOptions{Loss: LossSAPO, LossParams: c.params, ClipLow: 0.2, ClipHigh: 0.2})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !near(res.PGLoss, c.loss) || res.ClipFrac != 0 {
			t.Errorf("%s: loss %v clipfrac %v, want %v, 0", c.name, res.PGLoss, res.ClipFrac, c.loss)
		}
		for tk, w := range c.coef {
			if !near(res.PGCoef[0][tk], w) {
				t.Errorf("%s: token %d: d loss / d new = %v, want %v", c.name, tk, res.PGCoef[0][tk], w)
			}
		}
	}
}
