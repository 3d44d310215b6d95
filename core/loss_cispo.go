package core

import "math"

// LossCISPO is MiniMax-M1's clipped importance-sampling policy optimisation
// (arXiv 2506.13585, its equations 4 and 5), train.policy_loss: cispo. Per
// valid token, at the token ratio rho:
//
//	pg = -sg[clip(rho, 1 - clip_low, 1 + clip_high)] * A * log pi(o_t)
//
// so every token keeps its gradient, -clip(rho) * A, scaled by the clipped
// ratio (a constant of the gradient, whatever rho is). A token counts as
// clipped where clip(rho) != rho.
const LossCISPO = "cispo"

func init() {
	RegisterPolicyLoss(LossCISPO, func(*Params) (PolicyLossDef, error) { return PolicyLossDef{Token: cispoToken}, nil })
}

func cispoToken(t LossToken) (pg, dNew float64, clipped bool) {
	rho := math.Exp(t.LogRatio)
	c := math.Min(math.Max(rho, 1-t.ClipLow), 1+t.ClipHigh)
	return -c * t.A * t.NewLogProb, -c * t.A, c != rho
}
