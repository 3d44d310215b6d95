package core

import "math"

// LossGMPO is geometric-mean policy optimisation (Zhao et al. 2025, arXiv
// 2507.20673; verl's "geo_mean" loss), train.policy_loss: gmpo: per
// sequence, the geometric mean of the token ratios, each clipped in log
// space to [-clip_low, clip_high] on the side its advantage's sign makes
// pessimistic, times the sequence's mean advantage; the mean over
// sequences (loss_agg_mode does not apply to it). For one sequence,
//
//	d_t = clamp(new_t - old_t),  c_t = clip(d_t, -clip_low, clip_high)
//	s_t = sgn(A_t) * min(sgn(A_t) d_t, sgn(A_t) c_t)
//	pg  = -mean_t(A_t) * exp(mean_t s_t)
//
// (verl's compute_policy_loss_geo_mean: the log-ratio clipped where
// clipping lowers the objective). d pg / d new_t = pg * (d s_t / d d_t) /
// T: d s_t / d d_t is 1 where the unclipped branch holds and 0 where the
// clipped one does, or sgn(A_t) is 0, or d_t was clamped. The clipped
// tokens are those where the clipped branch holds.
const LossGMPO = "gmpo"

func init() {
	RegisterPolicyLoss(LossGMPO, func(*Params) (PolicyLossDef, error) { return PolicyLossDef{Sequence: gmpoSequence}, nil })
}

func gmpoSequence(s LossSeq, clipLow, clipHigh float64, dNew []float64) (pg float64, clipped int) {
	T := len(s.NewLogProbs)
	sum, adv := 0.0, 0.0
	ds := make([]float64, T)
	for t := range T {
		A := s.Advantages[t]
		adv += A
		d, clamped := ClampLogRatio(s.NewLogProbs[t] - s.OldLogProbs[t])
		c := math.Min(math.Max(d, -clipLow), clipHigh)
		sgn := 0.0
		if A > 0 {
			sgn = 1
		} else if A < 0 {
			sgn = -1
		}
		sum += sgn * math.Min(sgn*d, sgn*c)
		switch {
		case sgn == 0:
		case sgn*c < sgn*d:
			clipped++ // the clipped branch, a constant
		case !clamped:
			ds[t] = 1
		}
	}
	pg = -adv / float64(T) * math.Exp(sum/float64(T))
	for t := range T {
		dNew[t] = pg * ds[t] / float64(T)
	}
	return pg, clipped
}
