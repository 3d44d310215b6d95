package core

import "math"

// LossPPO is PPO's clipped surrogate, train.policy_loss: ppo (the
// default), with GSPO's sequence ratio and the dual clip as options. Per
// valid token, with rho = exp(log-ratio) at the configured level:
//
//	pg = max(-A*rho, -A*clip(rho, 1 - clip_low, 1 + clip_high))
//	if A < 0 and clip_ratio_c > 1: pg = min(pg, -A*clip_ratio_c)      (dual clip)
//
// Its derivative with respect to the new log-prob is d pg / d rho * rho:
// zero where the clipped branch holds with rho outside the clip range, the
// dual clip's constant holds, or the log-ratio was clamped.
const LossPPO = "ppo"

func init() {
	RegisterPolicyLoss(LossPPO, func(*Params) (PolicyLossDef, error) {
		return PolicyLossDef{Token: ppoToken, SequenceRatio: true, DualClip: true}, nil
	})
}

func ppoToken(t LossToken) (pg, dNew float64, clipped bool) {
	lo, hi := 1-t.ClipLow, 1+t.ClipHigh
	rho := math.Exp(t.LogRatio)
	loss1 := -t.A * rho
	loss2 := -t.A * math.Min(math.Max(rho, lo), hi)
	pg = loss1
	grad := -t.A // d pg / d rho
	if loss2 > loss1 {
		pg, clipped = loss2, true
		if rho <= lo || rho >= hi {
			grad = 0
		}
	}
	if t.A < 0 && t.ClipRatioC > 1 && pg >= -t.A*t.ClipRatioC {
		pg = -t.A * t.ClipRatioC
		grad = 0
	}
	if t.Clamped {
		grad = 0
	}
	return pg, grad * rho, clipped
}
