package core

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
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
// length instead (which moves with the batch) and not by B; cde fixes
// B * max_response_tokens, which stays constant through a run
// (docs/algorithms.md, "The policy loss").
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
	// LossParams is train.policy_loss_params, the loss's own keys, read
	// by its factory (NewPolicyLoss); nil leaves each at its default.
	LossParams map[string]any
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

// PolicyLoss is the plain-Go reference of the actor's policy loss
// (docs/algorithms.md, "The policy loss"; docs/rollout-format.md), written
// as a loop over tokens so each line can be checked against the formula;
// backends/xla's graph is tested equal to it. The loss o.Loss is a
// registered policy loss built from o.LossParams (NewPolicyLoss;
// loss_ppo.go, loss_cispo.go, loss_gmpo.go, loss_sapo.go document theirs).
// For a token loss, per valid token t of
// sequence i, with the log-ratio
//
//	token ratio:    clamp(new_t - old_t)
//	sequence ratio: clamp((1/T_i) sum_u (new_u - old_u))   (GSPO)
//
// PGLoss = sum_i sum_t w_i * (g_i,t * pg_i,t + c_i,t * |new_t - old_t|)
// with pg_i,t the loss's Token term, the weights w_i of the loss
// aggregation mode (see AggTokenMean), g the token's PGWeight (1 when nil)
// and c its AbsKLCoef (0 when nil; the unclamped log-ratio, whose
// derivative is sign(new_t - old_t), 0 at 0). clamp is to [-MaxLogRatio,
// MaxLogRatio]. PGCoef[i][t] = w_i * g_i,t * dNew + c_i,t * sign. A sequence
// loss gives PGLoss = (1/B) sum_i pg_i and PGCoef its dNew / B.
//
// The sequence ratio is the paper's GSPO-token variant: its value at
// every token is the sequence ratio s_i, and its gradient with respect to
// new_t is s_i * d new_t, i.e. s_i,t = sg[s_i] * pi(o_t)/sg[pi(o_t)]. With
// one advantage per sequence (every outcome estimator) this is exactly GSPO:
// the T_i tokens' terms sum to the gradient of T_i * w_i * pg(s_i).
//
// The KL term, when reference log-probs are given, is KL = sum_i sum_t w_i
// * k(new_t, ref_t) with the estimator k of KLEstimators and log r clamped
// likewise.
func PolicyLoss(seqs []LossSeq, o PolicyLossOptions) (PolicyLossResult, error) {
	var res PolicyLossResult
	o, def, err := lossOptions(o)
	if err != nil {
		return res, err
	}
	N, withKL, err := checkLossSeqs(seqs)
	if err != nil {
		return res, err
	}
	B := float64(len(seqs))
	res.PGCoef = make([][]float64, len(seqs))
	if withKL {
		res.KLCoef = make([][]float64, len(seqs))
	}
	for i, s := range seqs {
		T := len(s.NewLogProbs)
		var w float64 // the aggregation weight w_i
		switch o.AggMode {
		case AggTokenMean:
			w = 1 / float64(N)
		case AggSeqMeanTokenMean:
			w = 1 / (B * float64(T))
		case AggSeqMeanTokenSum:
			w = 1 / B
		case AggSeqMeanTokenSumNorm:
			w = 1 / (B * float64(o.MaxResponseTokens))
		default:
			return res, fmt.Errorf("policy loss: train.loss_agg_mode %q: unknown", o.AggMode)
		}
		res.PGCoef[i] = make([]float64, T)
		if def.Sequence != nil {
			if s.PGWeight != nil || s.AbsKLCoef != nil {
				return res, fmt.Errorf("policy loss: sequence %d: %s is a sequence-level loss; token-loss strategies cannot weight it", i, o.Loss)
			}
			pg, clipped := def.Sequence(s, o.ClipLow, o.ClipHigh, res.PGCoef[i])
			for t := range res.PGCoef[i] {
				res.PGCoef[i][t] /= B
			}
			res.PGLoss += pg / B
			res.ClipFrac += float64(clipped) / float64(N)
		} else {
			res.addTokenLoss(def, o, s, i, w, N)
		}
		if s.RefLogProbs != nil {
			res.addKL(o.KLEstimator, s, i, w)
		}
	}
	return res, nil
}

// lossOptions fills o's defaults (token-mean, the token ratio, k3, ppo) and
// checks them, returning the loss's definition built from o.LossParams.
func lossOptions(o PolicyLossOptions) (PolicyLossOptions, PolicyLossDef, error) {
	o.AggMode = cmp.Or(o.AggMode, AggTokenMean)
	o.RatioLevel = cmp.Or(o.RatioLevel, RatioToken)
	o.KLEstimator = cmp.Or(o.KLEstimator, "k3")
	o.Loss = cmp.Or(o.Loss, LossPPO)
	if o.RatioLevel != RatioToken && o.RatioLevel != RatioSequence {
		return o, PolicyLossDef{}, fmt.Errorf("policy loss: train.ratio_level %q: want token or sequence", o.RatioLevel)
	}
	if err := CheckPolicyLoss(o.Loss, o.RatioLevel, o.ClipRatioC); err != nil {
		return o, PolicyLossDef{}, fmt.Errorf("policy loss: %w", err)
	}
	if o.AggMode == AggSeqMeanTokenSumNorm && o.MaxResponseTokens < 1 {
		return o, PolicyLossDef{}, fmt.Errorf("policy loss: %s needs rollout.max_response_tokens >= 1", o.AggMode)
	}
	def, err := NewPolicyLoss(o.Loss, NewParams(PolicyLossParamsKey, o.LossParams))
	if err != nil {
		return o, PolicyLossDef{}, fmt.Errorf("policy loss: %w", err)
	}
	return o, def, nil
}

// checkLossSeqs checks every sequence's lengths and returns N, the valid
// tokens, and whether any sequence has reference log-probs.
func checkLossSeqs(seqs []LossSeq) (N int, withKL bool, err error) {
	if len(seqs) == 0 {
		return 0, false, fmt.Errorf("policy loss: no sequences")
	}
	for i, s := range seqs {
		T := len(s.NewLogProbs)
		if s.PGWeight != nil && len(s.PGWeight) != T || s.AbsKLCoef != nil && len(s.AbsKLCoef) != T {
			return 0, false, fmt.Errorf("policy loss: sequence %d: %d pg weights and %d abs-KL coefficients for %d tokens", i, len(s.PGWeight), len(s.AbsKLCoef), T)
		}
		if T == 0 || len(s.OldLogProbs) != T || len(s.Advantages) != T || s.RefLogProbs != nil && len(s.RefLogProbs) != T {
			return 0, false, fmt.Errorf("policy loss: sequence %d: %d new log-probs, %d old, %d advantages, %d reference: want equal, >= 1",
				i, T, len(s.OldLogProbs), len(s.Advantages), len(s.RefLogProbs))
		}
		N += T
		withKL = withKL || s.RefLogProbs != nil
	}
	return N, withKL, nil
}

// addTokenLoss adds sequence i's terms of a token loss, each token's term
// weighted by w (its aggregation weight) and its PGWeight, plus KL-Cov's
// |log-ratio| term, and counts its clipped tokens out of N.
func (res *PolicyLossResult) addTokenLoss(def PolicyLossDef, o PolicyLossOptions, s LossSeq, i int, w float64, N int) {
	T := len(s.NewLogProbs)
	// GSPO: the mean log-ratio over the sequence's tokens.
	seqLogRatio, seqClamped := 0.0, false
	if o.RatioLevel == RatioSequence {
		for t := range T {
			seqLogRatio += s.NewLogProbs[t] - s.OldLogProbs[t]
		}
		seqLogRatio, seqClamped = ClampLogRatio(seqLogRatio / float64(T))
	}
	for t := range T {
		logRatio, clamped := seqLogRatio, seqClamped
		if o.RatioLevel == RatioToken {
			logRatio, clamped = ClampLogRatio(s.NewLogProbs[t] - s.OldLogProbs[t])
		}
		pg, dNew, clipped := def.Token(LossToken{A: s.Advantages[t], LogRatio: logRatio, Clamped: clamped, NewLogProb: s.NewLogProbs[t],
			ClipLow: o.ClipLow, ClipHigh: o.ClipHigh, ClipRatioC: o.ClipRatioC})
		if clipped {
			res.ClipFrac += 1 / float64(N)
		}
		g := 1.0
		if s.PGWeight != nil {
			g = s.PGWeight[t]
		}
		res.PGLoss += w * g * pg
		res.PGCoef[i][t] = w * g * dNew
		res.addAbsKL(s, i, t, w)
	}
}

// addKL adds sequence i's KL estimate w * k(new_t, ref_t) and its gradient.
func (res *PolicyLossResult) addKL(est string, s LossSeq, i int, w float64) {
	res.KLCoef[i] = make([]float64, len(s.NewLogProbs))
	for t := range s.NewLogProbs {
		logR, clamped := ClampLogRatio(s.RefLogProbs[t] - s.NewLogProbs[t])
		kl, dkl := KLEstimate(est, logR) // dkl = d k / d new
		if clamped {
			dkl = 0
		}
		res.KL += w * kl
		res.KLCoef[i][t] = w * dkl
	}
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

// ClampLogRatio clamps x to [-MaxLogRatio, MaxLogRatio] and reports whether
// it was outside.
func ClampLogRatio(x float64) (float64, bool) {
	switch {
	case x > MaxLogRatio:
		return MaxLogRatio, true
	case x < -MaxLogRatio:
		return -MaxLogRatio, true
	}
	return x, false
}

// A PolicyLossDef is one train.policy_loss, as its factory
// (PolicyLossFactory, registered by name with RegisterPolicyLoss) builds it
// from the loss's keys: its plain-Go reference, from which PolicyLoss
// computes the loss and its gradient, and the values of its keys. A backend
// registers the graph form under the same name, fed the same Values, and a
// test holds the two equal (backends/xla/policyloss_test.go: loss and
// gradient, every registered loss, at its defaults and at other values of
// its keys). Exactly one of Token and Sequence is set.
type PolicyLossDef struct {
	// Token is a loss summed over tokens with the aggregation weights of
	// train.loss_agg_mode: the term at one valid token, its derivative with
	// respect to the token's new log-prob, and whether the token counts as
	// clipped (actor/pg_clipfrac). PolicyLoss applies the token's
	// PGWeight, KL-Cov's |log-ratio| term and the aggregation weight.
	Token func(t LossToken) (pg, dNew float64, clipped bool)
	// Sequence is a loss per sequence, averaged over the minibatch's
	// sequences (no aggregation mode, no per-token weights): one sequence's
	// term, its derivative with respect to each new log-prob into dNew, and
	// the number of clipped tokens.
	Sequence func(s LossSeq, clipLow, clipHigh float64, dNew []float64) (pg float64, clipped int)
	// SequenceRatio and DualClip say whether the loss takes
	// train.ratio_level: sequence (GSPO's ratio, then LossToken.LogRatio is
	// the sequence's) and train.clip_ratio_c; CheckPolicyLoss refuses them
	// otherwise. They do not depend on the loss's keys.
	SequenceRatio, DualClip bool
	// Values are the loss's keys (train.policy_loss_params) as its factory
	// resolved them: every key its RegisterPolicyLoss call declares, set or
	// at its default, and no other (nil for a loss without keys). Token or
	// Sequence has them bound; a backend's graph of the loss reads these
	// same numbers, so a loss's default is written once, in its factory.
	Values map[string]float64
}

// PolicyLossParamsKey is the config key of a policy loss's own keys, the
// path its factory's errors name (train.policy_loss_params.KEY).
const PolicyLossParamsKey = "train.policy_loss_params"

// A PolicyLossFactory builds a policy loss from its keys, the mapping
// train.policy_loss_params, reading them strictly from p as strategies and
// algorithms read theirs (p.Float, p.Int, p.Check; errors name
// train.policy_loss_params.KEY). Every key has a default: given no keys it
// builds the loss at its defaults, which RegisterPolicyLoss does once. It
// returns the definition with the values it read bound into Token or
// Sequence and listed in Values, and p.Err().
type PolicyLossFactory func(p *Params) (PolicyLossDef, error)

// policyLossEntry is one registered policy loss.
type policyLossEntry struct {
	factory PolicyLossFactory
	keys    []string      // sorted
	def     PolicyLossDef // built with no keys: the defaults
}

// LossToken is what a token loss sees of one valid token: the advantage,
// the log-ratio log pi/pi_old at the configured level, clamped to
// [-MaxLogRatio, MaxLogRatio] (Clamped: it was outside, so no gradient may
// flow through it), the new log-prob itself, and the clip settings.
type LossToken struct {
	A, LogRatio                   float64
	Clamped                       bool
	NewLogProb                    float64
	ClipLow, ClipHigh, ClipRatioC float64
}

var policyLosses = NewRegistry("core: policy loss", func(_ string, e policyLossEntry) string {
	return checkLossDef(e.def, e.keys)
})

// checkLossDef says what is wrong with a definition built for keys ("" if
// nothing): neither or both of Token and Sequence, or Values that are not
// exactly the keys.
func checkLossDef(d PolicyLossDef, keys []string) string {
	if (d.Token == nil) == (d.Sequence == nil) {
		return "want exactly one of Token and Sequence"
	}
	if got := slices.Sorted(maps.Keys(d.Values)); !slices.Equal(got, keys) {
		return fmt.Sprintf("its factory's Values have keys %v, its declared keys are %v", got, keys)
	}
	return ""
}

// RegisterPolicyLoss makes a policy loss available as train.policy_loss:
// name, built by f from keys, the keys of train.policy_loss_params it
// reads (none for a loss without settings). It builds the loss once at its
// defaults, with no keys. Like database/sql.Register it panics on a
// duplicate name, a nil factory, a key declared twice or empty, a factory
// that fails without keys or reads a key it does not declare, and a
// definition with neither or both of Token and Sequence or whose Values
// are not exactly the keys; call it from an init function.
func RegisterPolicyLoss(name string, f PolicyLossFactory, keys ...string) {
	if f == nil {
		panic("core: policy loss " + name + ": nil factory")
	}
	own := slices.Clone(keys)
	sort.Strings(own)
	for i, k := range own {
		if k == "" || i > 0 && own[i-1] == k {
			panic(fmt.Sprintf("core: policy loss %s: key %q declared twice or empty", name, k))
		}
	}
	p := NewParams(PolicyLossParamsKey, nil)
	def, err := f(p)
	if err != nil {
		panic(fmt.Sprintf("core: policy loss %s: its factory fails at its defaults: %v", name, err))
	}
	for _, k := range sortedNames(p.used) {
		if !slices.Contains(own, k) {
			panic(fmt.Sprintf("core: policy loss %s: its factory reads key %q, which it does not declare", name, k))
		}
	}
	policyLosses.Register(name, policyLossEntry{factory: f, keys: own, def: def})
}

// LookupPolicyLoss returns the registered policy loss of that name at its
// defaults (NewPolicyLoss builds it from keys).
func LookupPolicyLoss(name string) (PolicyLossDef, bool) {
	e, ok := policyLosses.Lookup(name)
	return e.def, ok
}

// PolicyLossKeys returns the keys a registered policy loss declared
// (sorted; none for a loss without settings); ok is false for an unknown
// name.
func PolicyLossKeys(name string) (keys []string, ok bool) {
	e, ok := policyLosses.Lookup(name)
	return slices.Clone(e.keys), ok
}

// NewPolicyLoss builds the policy loss name ("" is ppo) from p, the mapping
// train.policy_loss_params (NewParams(PolicyLossParamsKey, m)). An unknown
// name is an error listing the known ones; a key the loss does not declare
// is an error naming the key and the losses it belongs to, or listing the
// loss's keys; a value its factory refuses is an error naming the key.
// The errors about a key are recorded on p too (so a caller reading a
// larger config through p's parent gets them from its Finish). A factory
// reading an undeclared key,
// or building another kind of loss than at its defaults, is an error (a
// bug of the loss, caught by its first test).
func NewPolicyLoss(name string, p *Params) (PolicyLossDef, error) {
	name = cmp.Or(name, LossPPO)
	e, ok := policyLosses.Lookup(name)
	if !ok {
		return PolicyLossDef{}, fmt.Errorf("train.policy_loss %q: unknown (known: %s)", name, strings.Join(PolicyLosses(), ", "))
	}
	err := checkDeclaredKeys(p, name, e.keys, func(k string) []string {
		var owners []string
		policyLosses.Each(func(other string, o policyLossEntry) {
			if slices.Contains(o.keys, k) {
				owners = append(owners, other)
			}
		})
		return owners
	})
	if err != nil {
		return PolicyLossDef{}, err
	}
	def, err := e.factory(p)
	if err == nil {
		err = p.Err()
	}
	if err != nil {
		return PolicyLossDef{}, err
	}
	for _, k := range sortedNames(p.used) {
		if !slices.Contains(e.keys, k) {
			return PolicyLossDef{}, fmt.Errorf("core: policy loss %s reads key %q, which its RegisterPolicyLoss call does not declare", name, k)
		}
	}
	if err := p.Finish(); err != nil {
		return PolicyLossDef{}, err
	}
	if why := checkLossDef(def, e.keys); why != "" {
		return PolicyLossDef{}, fmt.Errorf("core: policy loss %s: %s", name, why)
	}
	if (def.Token == nil) != (e.def.Token == nil) || def.SequenceRatio != e.def.SequenceRatio || def.DualClip != e.def.DualClip {
		return PolicyLossDef{}, fmt.Errorf("core: policy loss %s: its factory built a loss of another kind (token or sequence, SequenceRatio, DualClip) from these keys than at its defaults", name)
	}
	return def, nil
}

// PolicyLosses lists the registered policy losses, sorted.
func PolicyLosses() []string { return policyLosses.Names() }

// CheckPolicyLoss reports a train.policy_loss that is not registered or
// does not combine with the other keys: a loss that does not take GSPO's
// sequence ratio (train.ratio_level: sequence) or the dual clip
// (train.clip_ratio_c) refuses them, naming the losses that take them.
func CheckPolicyLoss(loss, ratioLevel string, clipRatioC float64) error {
	if loss == "" {
		loss = LossPPO
	}
	e, ok := policyLosses.Lookup(loss)
	d := e.def
	if !ok {
		return fmt.Errorf("train.policy_loss %q: unknown (known: %s)", loss, strings.Join(PolicyLosses(), ", "))
	}
	takers := func(takes func(PolicyLossDef) bool) string {
		var out []string
		for _, n := range PolicyLosses() {
			if e, _ := policyLosses.Lookup(n); takes(e.def) {
				out = append(out, n)
			}
		}
		return strings.Join(out, ", ")
	}
	if ratioLevel == RatioSequence && !d.SequenceRatio {
		return fmt.Errorf("train.policy_loss %s: train.ratio_level sequence (GSPO) is not a setting of this loss (losses that take it: %s); set ratio_level: token",
			loss, takers(func(d PolicyLossDef) bool { return d.SequenceRatio }))
	}
	if clipRatioC != 0 && !d.DualClip {
		return fmt.Errorf("train.policy_loss %s: train.clip_ratio_c (the dual clip) is not a setting of this loss (losses that take it: %s); set it to 0",
			loss, takers(func(d PolicyLossDef) bool { return d.DualClip }))
	}
	return nil
}
