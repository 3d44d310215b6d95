package core

import "math"

// LossSAPO is soft adaptive policy optimisation (Gao et al. 2025, "Soft
// Adaptive Policy Optimization", arXiv 2511.20347; verl's "sapo" loss),
// train.policy_loss: sapo: a smooth gate of the token ratio in place of
// PPO's hard clip, with its own temperature for positive and negative
// advantages. Per valid token, at the token ratio rho:
//
//	tau = tau_pos if A > 0, else tau_neg
//	pg  = -(4 / tau) * sigmoid(tau * (rho - 1)) * A
//
// Its derivative with respect to the new log-prob is
//
//	d pg / d new = -4 * sigmoid * (1 - sigmoid) * A * rho
//
// (0 where the log-ratio was clamped): at rho = 1 it is unclipped PPO's,
// -A, and it fades smoothly as rho leaves 1, the faster the larger tau.
// No token is clipped (actor/pg_clipfrac is 0); train.clip_low and
// clip_high do not apply. Its keys, in train.policy_loss_params, are
// tau_pos and tau_neg (the paper's 1.0 and 1.05: a negative advantage's
// gate fades faster), each in [SAPOMinTau, SAPOMaxTau].
const LossSAPO = "sapo"

// The bounds of SAPO's temperatures: below 0.01 its loss value, 2/tau at
// rho = 1, swamps the float32 term that carries the gradient; above 100
// the gate is a hard step of width 1/tau.
const (
	SAPOMinTau = 0.01
	SAPOMaxTau = 100
)

func init() { RegisterPolicyLoss(LossSAPO, newSAPO, "tau_pos", "tau_neg") }

// newSAPO reads SAPO's temperatures: the one place their defaults are.
func newSAPO(p *Params) (PolicyLossDef, error) {
	tauPos, tauNeg := p.Float("tau_pos", 1.0), p.Float("tau_neg", 1.05)
	for _, k := range []struct {
		key string
		v   float64
	}{{"tau_pos", tauPos}, {"tau_neg", tauNeg}} {
		p.Check(k.v >= SAPOMinTau && k.v <= SAPOMaxTau, k.key, "must be in [%v, %v], got %v", SAPOMinTau, SAPOMaxTau, k.v)
	}
	return PolicyLossDef{
		Token:  func(t LossToken) (pg, dNew float64, clipped bool) { return sapoToken(t, tauPos, tauNeg) },
		Values: map[string]float64{"tau_pos": tauPos, "tau_neg": tauNeg},
	}, p.Err()
}

func sapoToken(t LossToken, tauPos, tauNeg float64) (pg, dNew float64, clipped bool) {
	tau := tauNeg
	if t.A > 0 {
		tau = tauPos
	}
	rho := math.Exp(t.LogRatio)
	s := 1 / (1 + math.Exp(-tau*(rho-1))) // sigmoid
	pg = -4 / tau * s * t.A
	if !t.Clamped {
		dNew = -4 * s * (1 - s) * t.A * rho
	}
	return pg, dNew, false
}
