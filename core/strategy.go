package core

// Needs declares the signals a strategy (or algorithm) reads from a Rollout,
// so the backend computes only what is asked.
type Needs struct {
	LogProbs  bool
	Entropies bool
	// Pooling, when non-empty, asks for Sequence.Embedding: the last-layer
	// hidden state pooled over response tokens by "last", "second_last" or "mean".
	Pooling string
	// ValueHeads asks for a critic with at least this many value heads.
	ValueHeads int
	// HeadMasks asks the trainer to request per-head bootstrap masks.
	HeadMasks bool
	// Correct asks for the verifier's verdict on every sequence: a rollout
	// file must say `correct` for each (grpo_passk counts correct subsets).
	Correct bool
	// MinGroup asks every group to hold at least this many responses
	// (rollout.n >= MinGroup); MinGroupKey is the config key that set it,
	// named in the error.
	MinGroup    int
	MinGroupKey string
}

// Merge returns the union of two needs. Two different poolings conflict;
// the first wins and Merge reports ok=false.
func (n Needs) Merge(o Needs) (Needs, bool) {
	ok := true
	n.LogProbs = n.LogProbs || o.LogProbs
	n.Entropies = n.Entropies || o.Entropies
	if n.Pooling == "" {
		n.Pooling = o.Pooling
	} else if o.Pooling != "" && o.Pooling != n.Pooling {
		ok = false
	}
	n.ValueHeads = max(n.ValueHeads, o.ValueHeads)
	n.HeadMasks = n.HeadMasks || o.HeadMasks
	n.Correct = n.Correct || o.Correct
	if o.MinGroup > n.MinGroup {
		n.MinGroup, n.MinGroupKey = o.MinGroup, o.MinGroupKey
	}
	return n, ok
}

// StepInfo is what a hook knows about the step it runs in and the run's
// limits. Everything else a hook reads is in the Rollout, gated by Needs
// (docs/extending.md lists which Sequence fields each flag gates).
type StepInfo struct {
	// Step counts from 0 to TotalSteps - 1; TotalSteps is train.steps.
	Step       int
	TotalSteps int
	// Algorithm is the name of the run's algorithm (algorithm.name).
	Algorithm string
	// Seed is the run seed; strategies derive per-step randomness from it.
	Seed uint64
	// MaxResponseTokens is rollout.max_response_tokens, the longest
	// response the run samples: no Sequence has more tokens, and a
	// truncated one (Sequence.Truncated) has exactly this many. A
	// length-normalised bonus divides by it. 0 when the caller does not
	// know it (a plugin, while the plugin protocol does not carry it); a
	// hook that needs it then returns an error rather than dividing by 0.
	MaxResponseTokens int
}

// Strategy is an exploration strategy. The base interface is tiny; what a
// strategy does is declared by the optional hook interfaces below (the
// database/sql/driver pattern), so the contract can grow without breaking
// existing strategies. Callers never assert those interfaces themselves:
// they ask once with HooksOf, which a HookProvider answers for itself.
//
// Hooks are called from one goroutine, in the order listed in the config.
type Strategy interface {
	// Name is the strategy's registry name (used in metric names
	// explore/<name>/...).
	Name() string
	// Needs declares the rollout signals the strategy reads.
	Needs() Needs
}

// RewardHook adds a per-response bonus to the verifier reward:
// r~_i = r_i + bonus_i. It must return len(r.Seqs) finite numbers and must not
// modify r.
type RewardHook interface {
	RewardBonus(info StepInfo, r *Rollout) ([]float64, error)
}

// AdvantageHook adds a per-token bonus to the advantages computed by the
// algorithm: A^_i,t = A_i,t + bonus_i,t. It must return one slice per
// sequence, each of the sequence's length.
type AdvantageHook interface {
	AdvantageBonus(info StepInfo, r *Rollout) ([][]float64, error)
}

// LossTerms are extra terms of the actor loss.
type LossTerms struct {
	// EntropyCoef c adds -c * mean token entropy to the actor loss.
	EntropyCoef float64
}

// LossHook contributes terms to the actor loss of this step.
type LossHook interface {
	LossTerms(info StepInfo) (LossTerms, error)
}

// TokenLoss is a TokenLossHook's answer for one step: per-token weights of
// the actor loss. Every field is optional; rows are per sequence, each of
// the sequence's length T_i.
type TokenLoss struct {
	// PGWeight[i][t] >= 0 multiplies the policy-gradient term of token t of
	// sequence i inside the aggregation (the aggregation's weights, i.e. its
	// denominators, are unchanged): 0 drops the token's gradient (a loss
	// mask, as Clip-Cov and the forking-token rule do), 1 keeps it. nil
	// means 1 everywhere.
	PGWeight [][]float64
	// AbsKLCoef[i][t] >= 0 adds AbsKLCoef * |log pi(o_t) - log pi_old(o_t)|
	// to token t's policy loss, aggregated like it (KL-Cov's penalty). nil
	// means 0 everywhere.
	AbsKLCoef [][]float64
	// EntropyCoef adds to the actor loss's entropy coefficient, as
	// LossTerms.EntropyCoef does, but may depend on the batch (adaptive
	// entropy control).
	EntropyCoef float64
}

// TokenLossHook sees the shaped batch (final advantages, after every
// reward and advantage hook and the algorithm's finalisation) just before
// the actor update and weights the actor loss per token. It must not
// modify r. With several strategies, PGWeight rows multiply, AbsKLCoef
// rows and EntropyCoef add. The weights hold for every epoch and
// minibatch of the step's update (they are computed once, from the
// sampling policy's log-probs and entropies).
type TokenLossHook interface {
	TokenLoss(info StepInfo, r *Rollout) (TokenLoss, error)
}

// HeadMasker draws the per-head bootstrap masks (Sequence.HeadMask) used by
// the critic update of this step: one per sequence, nil or T*K weights flat
// with the head axis last (token t's K weights at [t*K, (t+1)*K); see
// CheckHeadMasks). r.TokenRows(K) makes them as one column.
type HeadMasker interface {
	HeadMasks(info StepInfo, r *Rollout) ([][]float64, error)
}

// Unweighted is implemented by a strategy that takes no `weight:` because
// no schedule would scale its output meaningfully (a mask, or the
// coefficient of a controller aiming at a target); the run refuses an entry
// that gives it one, naming the key.
type Unweighted interface {
	Unweighted()
}

// Observer sees the finished step (after the updates) and may report metrics.
type Observer interface {
	Observe(info StepInfo, r *Rollout) (map[string]float64, error)
}

// Stateful strategies keep state across steps (e.g. SimHash counts); the
// trainer saves it in every checkpoint and restores it on resume.
type Stateful interface {
	SaveState() ([]byte, error)
	LoadState(data []byte) error
}

// Closer is implemented by strategies holding resources (plugin processes).
type Closer interface {
	Close() error
}

// CellCounter is implemented by count-based strategies (SimHash): the
// visit counts of every occupied cell, largest first. The trainer saves
// them with every checkpoint as RUN/<name>_cells.json, the histogram behind
// the paper's Figure 1 (how visits collapse onto few cells).
type CellCounter interface {
	CellCounts() []int
}
