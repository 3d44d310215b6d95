package core

import (
	"fmt"
	"math"
)

// Loss aggregation modes (train.loss_agg_mode), verl's names. Each gives
// every valid token t of sequence i a weight w_i, and a per-token loss l_i,t
// aggregates to sum_i sum_t w_i * l_i,t over the B sequences of the
// minibatch, T_i valid tokens each, N = sum_i T_i:
//
//	token-mean               w_i = 1 / N
//	seq-mean-token-mean      w_i = 1 / (B * T_i)
//	seq-mean-token-sum       w_i = 1 / B
//	seq-mean-token-sum-norm  w_i = 1 / (B * Lmax), Lmax = rollout.max_response_tokens
//
// seq-mean-token-sum-norm is Dr. GRPO's constant normaliser (Liu et al. 2025,
// arXiv 2503.20783). verl divides the token sum by the padded response
// length instead (which moves with the batch) and not by B; DESIGN section 3
// fixes B * max_response_tokens, which stays constant through a run.
const (
	AggTokenMean           = "token-mean"
	AggSeqMeanTokenMean    = "seq-mean-token-mean"
	AggSeqMeanTokenSum     = "seq-mean-token-sum"
	AggSeqMeanTokenSumNorm = "seq-mean-token-sum-norm"
)

// LossAggModes lists the loss aggregation modes.
var LossAggModes = []string{AggTokenMean, AggSeqMeanTokenMean, AggSeqMeanTokenSum, AggSeqMeanTokenSumNorm}

// Importance-ratio levels (train.ratio_level).
const (
	// RatioToken is PPO's per-token ratio pi(o_t)/pi_old(o_t).
	RatioToken = "token"
	// RatioSequence is GSPO's length-normalised sequence ratio (Zheng et
	// al. 2025, arXiv 2507.18071), in its GSPO-token form (see PolicyLoss).
	RatioSequence = "sequence"
)

// Policy losses (train.policy_loss).
const (
	// LossPPO is PPO's clipped surrogate (with GSPO's sequence ratio and
	// the dual clip as options).
	LossPPO = "ppo"
	// LossCISPO is MiniMax-M1's clipped importance-sampling policy
	// optimisation (arXiv 2506.13585, its equations 4 and 5): per token
	// -sg[clip(rho, 1 - clip_low, 1 + clip_high)] * A * log pi(o_t), so
	// every token keeps its gradient, scaled by the clipped ratio.
	LossCISPO = "cispo"
	// LossGMPO is geometric-mean policy optimisation (Zhao et al. 2025,
	// arXiv 2507.20673; verl's "geo_mean" loss): per sequence, the
	// geometric mean of the token ratios, each clipped in log space to
	// [-clip_low, clip_high] on the side its advantage's sign makes
	// pessimistic, times the sequence's mean advantage; the mean over
	// sequences (loss_agg_mode does not apply to it).
	LossGMPO = "gmpo"
)

// PolicyLosses lists the policy losses.
var PolicyLosses = []string{LossPPO, LossCISPO, LossGMPO}

// KL estimators (train.kl_estimator), from J. Schulman, "Approximating KL
// Divergence" (2020): with log r = log pi_ref(o_t) - log pi(o_t), samples
// from pi,
//
//	k1 = -log r                    (unbiased, high variance, can be < 0)
//	k2 = (log r)^2 / 2             (biased, low variance, >= 0)
//	k3 = (r - 1) - log r           (unbiased, low variance, >= 0)
var KLEstimators = []string{"k1", "k2", "k3"}

// MaxLogRatio bounds every log-ratio of the actor loss (log pi/pi_old, the
// sequence's mean log-ratio, log pi_ref/pi) before exp: exp(20) is about
// 4.9e8, far past any clip range and finite in float32. A clamped log-ratio
// passes no gradient.
const MaxLogRatio = 20

// PolicyLossOptions are the actor-loss settings of the train section.
type PolicyLossOptions struct {
	ClipLow, ClipHigh float64 // train.clip_low, train.clip_high
	// ClipRatioC is the dual-clip constant c (train.clip_ratio_c, > 1; 0 is off).
	ClipRatioC float64
	AggMode    string // train.loss_agg_mode (token-mean when empty)
	RatioLevel string // train.ratio_level (token when empty)
	// MaxResponseTokens is Lmax of seq-mean-token-sum-norm.
	MaxResponseTokens int
	KLEstimator       string // train.kl_estimator (k3 when empty)
	Loss              string // train.policy_loss (ppo when empty)
}

// LossSeq is one sequence's per-token inputs to the actor loss; all have the
// same length T >= 1. RefLogProbs may be nil (no KL term). PGWeight and
// AbsKLCoef are the strategies' per-token weights (core.TokenLoss); nil
// means 1 and 0 everywhere.
type LossSeq struct {
	OldLogProbs, NewLogProbs, RefLogProbs, Advantages []float64
	PGWeight, AbsKLCoef                               []float64
}

// PolicyLossResult is the reference loss of one minibatch.
type PolicyLossResult struct {
	// PGLoss is the aggregated clipped policy-gradient loss and PGCoef[i][t]
	// = d PGLoss / d NewLogProbs[i][t].
	PGLoss float64
	PGCoef [][]float64
	// ClipFrac is the fraction of valid tokens where the clipped branch was
	// taken (loss2 > loss1), actor/pg_clipfrac (a token mean in every mode).
	ClipFrac float64
	// KL is the aggregated KL estimate (before kl_coef) and KLCoef its
	// gradient; both zero and nil when no sequence has RefLogProbs.
	KL     float64
	KLCoef [][]float64
}

// PolicyLoss is the plain-Go reference of the actor's policy loss (DESIGN
// section 4), written as a loop over tokens so each line can be checked
// against the formula; backends/xla's graph is tested equal to it. Per valid
// token t of sequence i, with A = Advantages[t]:
//
//	token ratio:    rho = exp(clamp(new_t - old_t))
//	sequence ratio: rho = exp(clamp((1/T_i) sum_u (new_u - old_u)))   (GSPO)
//	pg = max(-A*rho, -A*clip(rho, 1 - clip_low, 1 + clip_high))
//	if A < 0 and clip_ratio_c > 1: pg = min(pg, -A*clip_ratio_c)      (dual clip)
//
// and PGLoss = sum_i sum_t w_i * (g_i,t * pg_i,t + c_i,t * |new_t - old_t|)
// with the weights w_i of the loss aggregation mode (see AggTokenMean), g
// the token's PGWeight (1 when nil) and c its AbsKLCoef (0 when nil; the
// unclamped log-ratio, whose derivative is sign(new_t - old_t), 0 at 0). clamp is to [-MaxLogRatio,
// MaxLogRatio].
//
// The sequence ratio is the paper's GSPO-token variant: its value at
// every token is the sequence ratio s_i, and its gradient with respect to
// new_t is s_i * d new_t, i.e. s_i,t = sg[s_i] * pi(o_t)/sg[pi(o_t)]. With
// one advantage per sequence (every outcome estimator) this is exactly GSPO:
// the T_i tokens' terms sum to the gradient of T_i * w_i * pg(s_i).
//
// The gradient PGCoef[i][t] is w_i * d pg_i,t / d rho * rho (zero when the
// log-ratio was clamped, the clipped branch is active with rho outside the
// clip range, or the dual clip's constant is active). The KL term, when
// reference log-probs are given, is KL = sum_i sum_t w_i * k(new_t, ref_t)
// with the estimator k of KLEstimators and log r clamped likewise.
func PolicyLoss(seqs []LossSeq, o PolicyLossOptions) (PolicyLossResult, error) {
	var res PolicyLossResult
	if len(seqs) == 0 {
		return res, fmt.Errorf("policy loss: no sequences")
	}
	agg := o.AggMode
	if agg == "" {
		agg = AggTokenMean
	}
	level := o.RatioLevel
	if level == "" {
		level = RatioToken
	}
	est := o.KLEstimator
	if est == "" {
		est = "k3"
	}
	if level != RatioToken && level != RatioSequence {
		return res, fmt.Errorf("policy loss: train.ratio_level %q: want token or sequence", level)
	}
	loss := o.Loss
	if loss == "" {
		loss = LossPPO
	}
	if err := CheckPolicyLoss(loss, level, o.ClipRatioC); err != nil {
		return res, fmt.Errorf("policy loss: %w", err)
	}
	if agg == AggSeqMeanTokenSumNorm && o.MaxResponseTokens < 1 {
		return res, fmt.Errorf("policy loss: %s needs rollout.max_response_tokens >= 1", agg)
	}
	withKL := false
	N := 0
	for i, s := range seqs {
		T := len(s.NewLogProbs)
		if s.PGWeight != nil && len(s.PGWeight) != T || s.AbsKLCoef != nil && len(s.AbsKLCoef) != T {
			return res, fmt.Errorf("policy loss: sequence %d: %d pg weights and %d abs-KL coefficients for %d tokens", i, len(s.PGWeight), len(s.AbsKLCoef), T)
		}
		if T == 0 || len(s.OldLogProbs) != T || len(s.Advantages) != T || s.RefLogProbs != nil && len(s.RefLogProbs) != T {
			return res, fmt.Errorf("policy loss: sequence %d: %d new log-probs, %d old, %d advantages, %d reference: want equal, >= 1",
				i, T, len(s.OldLogProbs), len(s.Advantages), len(s.RefLogProbs))
		}
		N += T
		withKL = withKL || s.RefLogProbs != nil
	}
	B := float64(len(seqs))
	lo, hi := 1-o.ClipLow, 1+o.ClipHigh
	res.PGCoef = make([][]float64, len(seqs))
	if withKL {
		res.KLCoef = make([][]float64, len(seqs))
	}
	for i, s := range seqs {
		T := len(s.NewLogProbs)
		var w float64
		switch agg {
		case AggTokenMean:
			w = 1 / float64(N)
		case AggSeqMeanTokenMean:
			w = 1 / (B * float64(T))
		case AggSeqMeanTokenSum:
			w = 1 / B
		case AggSeqMeanTokenSumNorm:
			w = 1 / (B * float64(o.MaxResponseTokens))
		default:
			return res, fmt.Errorf("policy loss: train.loss_agg_mode %q: unknown", agg)
		}
		// GSPO: the mean log-ratio over the sequence's tokens.
		seqLogRatio, seqClamped := 0.0, false
		if level == RatioSequence {
			for t := range T {
				seqLogRatio += s.NewLogProbs[t] - s.OldLogProbs[t]
			}
			seqLogRatio /= float64(T)
			seqLogRatio, seqClamped = clampLogRatio(seqLogRatio)
		}
		res.PGCoef[i] = make([]float64, T)
		if loss == LossGMPO {
			if s.PGWeight != nil || s.AbsKLCoef != nil {
				return res, fmt.Errorf("policy loss: sequence %d: gmpo is a sequence-level loss; token-loss strategies cannot weight it", i)
			}
			pg, frac := gmpoSequence(s, lo, hi, res.PGCoef[i], 1/B)
			res.PGLoss += pg / B
			res.ClipFrac += frac / float64(N)
		}
		for t := range T {
			if loss == LossGMPO {
				break
			}
			A := s.Advantages[t]
			logRatio, clamped := seqLogRatio, seqClamped
			if level == RatioToken {
				logRatio, clamped = clampLogRatio(s.NewLogProbs[t] - s.OldLogProbs[t])
			}
			rho := math.Exp(logRatio)
			if loss == LossCISPO {
				// -sg[clip(rho)] * A * new_t: its gradient is -clip(rho) * A
				// whatever rho is (the weight is a constant).
				c := math.Min(math.Max(rho, lo), hi)
				if c != rho {
					res.ClipFrac += 1 / float64(N)
				}
				g := 1.0
				if s.PGWeight != nil {
					g = s.PGWeight[t]
				}
				res.PGLoss += w * g * -c * A * s.NewLogProbs[t]
				res.PGCoef[i][t] = w * g * -c * A
				res.addAbsKL(s, i, t, w)
				continue
			}
			loss1 := -A * rho
			loss2 := -A * math.Min(math.Max(rho, lo), hi)
			pg := loss1
			// d pg / d rho
			grad := -A
			if loss2 > loss1 {
				pg = loss2
				res.ClipFrac += 1 / float64(N)
				if rho <= lo || rho >= hi {
					grad = 0
				}
			}
			if A < 0 && o.ClipRatioC > 1 && pg >= -A*o.ClipRatioC {
				pg = -A * o.ClipRatioC
				grad = 0
			}
			if clamped {
				grad = 0
			}
			g := 1.0
			if s.PGWeight != nil {
				g = s.PGWeight[t]
			}
			res.PGLoss += w * g * pg
			res.PGCoef[i][t] = w * g * grad * rho
			res.addAbsKL(s, i, t, w)
		}
		if s.RefLogProbs == nil {
			continue
		}
		res.KLCoef[i] = make([]float64, T)
		for t := range T {
			logR, clamped := clampLogRatio(s.RefLogProbs[t] - s.NewLogProbs[t])
			kl, dkl := KLEstimate(est, logR) // dkl = d k / d new
			if clamped {
				dkl = 0
			}
			res.KL += w * kl
			res.KLCoef[i][t] = w * dkl
		}
	}
	return res, nil
}

// addAbsKL adds KL-Cov's term w * AbsKLCoef[t] * |new_t - old_t| (the
// unclamped log-ratio; its derivative is sign(new_t - old_t), 0 at 0).
func (res *PolicyLossResult) addAbsKL(s LossSeq, i, t int, w float64) {
	if s.AbsKLCoef == nil {
		return
	}
	d := s.NewLogProbs[t] - s.OldLogProbs[t]
	sign := 0.0
	if d > 0 {
		sign = 1
	} else if d < 0 {
		sign = -1
	}
	res.PGLoss += w * s.AbsKLCoef[t] * math.Abs(d)
	res.PGCoef[i][t] += w * s.AbsKLCoef[t] * sign
}

// gmpoSequence is GMPO's loss of one sequence, pg = -mean_t(A_t) *
// exp(mean_t s_t) with
//
//	d_t = clamp(new_t - old_t),  c_t = clip(d_t, -clip_low, clip_high)
//	s_t = sgn(A_t) * min(sgn(A_t) d_t, sgn(A_t) c_t)
//
// (verl's compute_policy_loss_geo_mean: the log-ratio clipped where
// clipping lowers the objective; lo and hi are 1 - clip_low and 1 +
// clip_high), and fills
// coef[t] = scale * d pg / d new_t: d s_t / d d_t is 1 where the unclipped
// branch holds and 0 where the clipped one does, or sgn(A_t) is 0, or d_t
// was clamped. frac counts the tokens where the clipped branch holds.
func gmpoSequence(s LossSeq, lo, hi float64, coef []float64, scale float64) (pg, frac float64) {
	T := len(s.NewLogProbs)
	low, high := 1-lo, hi-1 // clip_low, clip_high
	sum, adv := 0.0, 0.0
	ds := make([]float64, T)
	for t := range T {
		A := s.Advantages[t]
		adv += A
		d, clamped := clampLogRatio(s.NewLogProbs[t] - s.OldLogProbs[t])
		c := math.Min(math.Max(d, -low), high)
		sgn := 0.0
		if A > 0 {
			sgn = 1
		} else if A < 0 {
			sgn = -1
		}
		st := sgn * math.Min(sgn*d, sgn*c)
		sum += st
		switch {
		case sgn == 0:
		case sgn*c < sgn*d:
			frac++ // the clipped branch, a constant
		case !clamped:
			ds[t] = 1
		}
	}
	ratio := math.Exp(sum / float64(T))
	mean := adv / float64(T)
	pg = -mean * ratio
	for t := range T {
		coef[t] = scale * pg * ds[t] / float64(T)
	}
	return pg, frac
}

// CheckPolicyLoss reports a train.policy_loss that does not combine with
// the other keys: CISPO and GMPO take the token ratio (train.ratio_level:
// token) and no dual clip (train.clip_ratio_c: 0), which belong to PPO's
// surrogate.
func CheckPolicyLoss(loss, ratioLevel string, clipRatioC float64) error {
	switch loss {
	case "", LossPPO:
		return nil
	case LossCISPO, LossGMPO:
		if ratioLevel == RatioSequence {
			return fmt.Errorf("train.policy_loss %s: train.ratio_level sequence (GSPO) belongs to the ppo loss; set ratio_level: token", loss)
		}
		if clipRatioC != 0 {
			return fmt.Errorf("train.policy_loss %s: train.clip_ratio_c (the dual clip) belongs to the ppo loss; set it to 0", loss)
		}
		return nil
	}
	return fmt.Errorf("train.policy_loss %q: unknown (known: %v)", loss, PolicyLosses)
}

// KLEstimate returns the estimator's value at log r = log pi_ref - log pi
// and its derivative with respect to log pi (see KLEstimators); an unknown
// name gives NaN.
func KLEstimate(estimator string, logR float64) (k, dNew float64) {
	switch estimator {
	case "k1":
		return -logR, 1
	case "k2":
		return logR * logR / 2, -logR
	case "k3":
		return math.Exp(logR) - logR - 1, 1 - math.Exp(logR)
	}
	return math.NaN(), math.NaN()
}

// clampLogRatio clamps x to [-MaxLogRatio, MaxLogRatio] and reports whether
// it was outside.
func clampLogRatio(x float64) (float64, bool) {
	switch {
	case x > MaxLogRatio:
		return MaxLogRatio, true
	case x < -MaxLogRatio:
		return -MaxLogRatio, true
	}
	return x, false
}
