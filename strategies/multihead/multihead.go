// Package multihead implements the multi-head (bootstrapped) critic bonus of
// the CDE paper (docs/algorithms.md, "The exploration bonuses"), registered
// as strategy "multihead". It is valid only with a critic algorithm (ppo).
//
// The critic has K value heads; Values[t][j] is head j's value of the state in
// which token t is chosen. For every response of T valid tokens and every
// token t the advantage bonus is
//
//	B_critic,t = std_j Values[t+1][j]       (population std, divisor K)
//	B_critic,T-1 = 0                         (the last token leads to a terminal state)
//	bonus_t    = w_t * min(|A_t| / kappa, alpha * B_critic,t)
//
// with w_t the weight schedule at the current step and A_t the advantage
// the bonus is placed on. With placement: before_whitening (the default),
// A_t is the raw GAE advantage the algorithm computed (before any bonus)
// and the trainer adds the bonus before the algorithm's batch whitening,
// which then rescales it with the advantages. With placement:
// after_whitening, A_t is the whitened advantage and the bonus is added
// after whitening, unscaled (core.AfterFinalizer): that is where a bonus
// lands when it is added to the advantages verl's compute_advantage
// returns, which GAE whitens. The paper states A^_t = A_t + bonus_t without
// saying which; both are offered. With w_t >= 0 the bonus is nonnegative
// and never larger than w_t * |A_t| / kappa.
//
// For the critic update the strategy draws bootstrap masks (Sequence.HeadMask):
// D is the set of (state, return) pairs of the batch, one per valid token of
// every sequence; for every head j independently a subset D_j of
// max(1, round(zeta * |D|)) pairs is drawn without replacement (uniformly), and
// HeadMask[t][j] = 1 exactly for the pairs in D_j. The draw depends only on the
// run seed and the step (core.Mix(seed, label, step)), so a resumed run draws
// the same masks. With zeta = 1 every mask entry is 1 and no randomness is used.
// Note that with zeta = 1 all heads regress on the same data and their
// disagreement comes only from their different initialisations and the
// nonlinearity of training (the paper's Theorem on linear MDPs gives a
// bootstrap std proportional to sqrt((1 - zeta) / zeta), which vanishes at
// zeta = 1); the paper nonetheless uses zeta = 1 for 2 and 4 heads and 0.5 for
// 8 and 16.
//
// If the critic has more heads than K (train.value_heads larger than heads),
// all of the critic's heads are used, both for the std and for the masks: the
// head count is the width of the Values rows, which must be at least K.
//
// Config keys (defaults in parentheses):
//
//	heads  (4)    K, the number of critic value heads asked for; must be in
//	              2..64. One head is refused: the std over a single head is
//	              always 0, so the bonus would vanish and the bootstrap masks
//	              would only throw data away.
//	zeta   (1)    fraction of the batch's (state, return) pairs each head is
//	              trained on; must be in (0, 1].
//	kappa  (3)    clipping ratio: the bonus is at most w_t*|A_t|/kappa; > 0.
//	alpha  (0.5)  scale of the head std; > 0.
//	weight        the entry's weight schedule w_t ({schedule, w0, w_end,
//	              stairs}, core.ParseSchedule; default constant 1): the
//	              trainer multiplies the bonus by it.
//	placement (before_whitening)  where the bonus enters: before_whitening
//	              or after_whitening (see above).
//
// Metrics (Observe): critic/head_std, the mean over all tokens of the batch of
// the population std over heads of Values[t] (the disagreement of the critic
// that scored the batch, before this step's update). The trainer logs the
// weight w_t of the step as explore/multihead/weight.
package multihead

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/cde-rl/cde/core"
)

// Name is the registry name.
const Name = "multihead"

// Defaults (docs/config.md, strategy multihead).
const (
	DefaultHeads = 4
	DefaultZeta  = 1.0
	DefaultKappa = 3.0
	DefaultAlpha = 0.5
	// MaxHeads matches the range of train.value_heads.
	MaxHeads = 64
)

// maskLabel separates the mask draws from every other use of the run seed.
const maskLabel uint64 = 0x6d68_6d61_736b // "mhmask"

func init() {
	core.RegisterStrategy(Name, New)
}

// Strategy is the multi-head critic bonus. It implements core.AdvantageHook,
// core.HeadMasker and core.Observer.
type Strategy struct {
	Heads int
	Zeta  float64
	Kappa float64
	Alpha float64
	// AfterWhitening is placement: after_whitening (core.AfterFinalizer).
	AfterWhitening bool
}

var (
	_ core.AdvantageHook  = (*Strategy)(nil)
	_ core.HeadMasker     = (*Strategy)(nil)
	_ core.Observer       = (*Strategy)(nil)
	_ core.AfterFinalizer = (*Strategy)(nil)
)

// New builds the strategy from its config entry. algo must need a critic.
func New(p *core.Params, algo core.Algorithm) (core.Strategy, error) {
	if algo == nil || !algo.NeedsCritic() {
		got := "none"
		if algo != nil {
			got = algo.Name()
		}
		return nil, fmt.Errorf("config: %s: multihead needs a critic algorithm (algorithm.name: ppo), got %s", nameKey(p.Path), got)
	}
	s := &Strategy{
		Heads:          p.Int("heads", DefaultHeads),
		Zeta:           p.Float("zeta", DefaultZeta),
		Kappa:          p.Float("kappa", DefaultKappa),
		Alpha:          p.Float("alpha", DefaultAlpha),
		AfterWhitening: p.OneOf("placement", "before_whitening", "before_whitening", "after_whitening") == "after_whitening",
	}
	p.Check(s.Heads >= 2 && s.Heads <= MaxHeads, "heads", "must be in 2..%d (the std over one head is always 0), got %d", MaxHeads, s.Heads)
	p.Check(s.Zeta > 0 && s.Zeta <= 1, "zeta", "must be in (0, 1], got %v", s.Zeta)
	p.Check(s.Kappa > 0, "kappa", "must be > 0, got %v", s.Kappa)
	p.Check(s.Alpha > 0, "alpha", "must be > 0, got %v", s.Alpha)
	if err := p.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

func nameKey(path string) string {
	if path == "" {
		return "name"
	}
	return path + ".name"
}

// AfterFinalize reports placement: after_whitening.
func (s *Strategy) AfterFinalize() bool { return s.AfterWhitening }

// Name returns "multihead".
func (s *Strategy) Name() string { return Name }

// Needs asks for K value heads and bootstrap masks.
func (s *Strategy) Needs() core.Needs {
	return core.Needs{ValueHeads: s.Heads, HeadMasks: true}
}

// AdvantageBonus returns bonus_t (see the package doc) for every token of
// every sequence. It reads Values and Advantages and does not modify r.
func (s *Strategy) AdvantageBonus(info core.StepInfo, r *core.Rollout) ([][]float64, error) {
	if _, err := s.headCount(r); err != nil {
		return nil, err
	}
	for i := range r.Seqs {
		if seq := &r.Seqs[i]; len(seq.Advantages) != seq.Len() {
			return nil, fmt.Errorf("multihead: sequence %d: %d advantages for %d tokens", i, len(seq.Advantages), seq.Len())
		}
	}
	_, out := r.TokenRows(1) // one column for the batch (core/columns.go)
	for i := range r.Seqs {
		seq := &r.Seqs[i]
		T := seq.Len()
		row := out[i]
		for t := 0; t+1 < T; t++ { // row[T-1] stays 0: terminal next state
			a := seq.Advantages[t]
			if math.IsNaN(a) || math.IsInf(a, 0) {
				return nil, fmt.Errorf("multihead: sequence %d: advantage %v at token %d is not finite", i, a, t)
			}
			row[t] = math.Min(math.Abs(a)/s.Kappa, s.Alpha*core.PopStd(seq.ValueRow(t+1)))
		}
	}
	return out, nil
}

// HeadMasks draws the bootstrap masks of this step's critic update:
// masks[i][t*K+j] = 1 when token t of sequence i is in head j's subset D_j.
// The masks are one column of the batch (pair d of D, the d-th token of the
// batch, has its K weights at block[d*K : (d+1)*K]); a response without
// tokens gets nil, as a plugin's answer of no rows decodes.
func (s *Strategy) HeadMasks(info core.StepInfo, r *core.Rollout) ([][]float64, error) {
	k, err := s.headCount(r)
	if err != nil {
		return nil, err
	}
	n := r.NumTokens()
	block, masks := r.TokenRows(k)
	for i := range masks {
		if r.Seqs[i].Len() == 0 {
			masks[i] = nil
		}
	}
	if n == 0 {
		return masks, nil
	}
	m := SubsetSize(s.Zeta, n)
	if m == n {
		for j := range block {
			block[j] = 1
		}
		return masks, nil
	}
	rng := rand.New(rand.NewPCG(core.Mix(info.Seed, maskLabel, uint64(info.Step)), 0))
	perm := make([]int, n)
	for j := range k {
		for d := range perm {
			perm[d] = d
		}
		// Partial Fisher-Yates: perm[:m] is a uniform m-subset of D.
		for a := range m {
			b := a + rng.IntN(n-a)
			perm[a], perm[b] = perm[b], perm[a]
			block[perm[a]*k+j] = 1
		}
	}
	return masks, nil
}

// SubsetSize is |D_j| = round(zeta * n), at least 1 and at most n (n >= 1).
func SubsetSize(zeta float64, n int) int {
	m := int(math.Round(zeta * float64(n)))
	return min(max(m, 1), n)
}

// Observe reports critic/head_std (the trainer logs the weight,
// explore/multihead/weight).
func (s *Strategy) Observe(info core.StepInfo, r *core.Rollout) (map[string]float64, error) {
	m := map[string]float64{}
	if std, ok := core.HeadStd(r); ok {
		m["critic/head_std"] = std
	}
	return m, nil
}

// headCount checks that every sequence has K values per token (Values
// flat, T*K entries), K the same for all (at least Heads, and r.ValueHeads
// when set), every value finite, and returns K (Heads when the batch has no
// tokens).
func (s *Strategy) headCount(r *core.Rollout) (int, error) {
	k := r.ValueHeads
	for i := range r.Seqs {
		if seq := &r.Seqs[i]; k == 0 && seq.Len() > 0 {
			k = len(seq.Values) / seq.Len()
			if k == 0 {
				return 0, fmt.Errorf("multihead: sequence %d: Values has %d entries for %d tokens, want K >= %d per token", i, len(seq.Values), seq.Len(), s.Heads)
			}
		}
	}
	if k == 0 {
		return s.Heads, nil
	}
	if k < s.Heads {
		return 0, fmt.Errorf("multihead: the rollout has %d value heads, want at least heads = %d", k, s.Heads)
	}
	for i := range r.Seqs {
		seq := &r.Seqs[i]
		if len(seq.Values) != seq.Len()*k {
			return 0, fmt.Errorf("multihead: sequence %d: Values has %d entries, want %d tokens x %d heads", i, len(seq.Values), seq.Len(), k)
		}
		for j, v := range seq.Values {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return 0, fmt.Errorf("multihead: sequence %d: Values[%d][%d] = %v is not finite", i, j/k, j%k, v)
			}
		}
	}
	return k, nil
}
