package core

import "errors"

// GenerateRequest asks the backend to sample one response per prompt.
type GenerateRequest struct {
	Prompts     [][]int32
	Temperature float64
	MaxTokens   int
	// Seed fixes the sampling noise: the same request and weights give the
	// same tokens.
	Seed uint64
	// StopTokens end a row as EOS does: a row stops after it samples any
	// of these ids (kept as its last token, Truncated false). Nil: EOS only.
	StopTokens []int32
	// Pooling, when set, asks for pooled last-layer embeddings.
	Pooling string
	// Slots, when > 0 and below len(Prompts), is how many responses are
	// decoded at once: the memory of Slots rows, not of every prompt. A
	// response that stops frees its slot for the next prompt (continuous
	// batching) where the engine keeps its loop on the device; elsewhere
	// the prompts go Slots at a time. The tokens are the same either way
	// and the same as with every prompt at once: response i's noise
	// depends on (Seed, i, token) alone.
	Slots int
	// Done, when not nil, stops generation between decode steps once it
	// is closed (a server's request context: the client went away or the
	// request's deadline passed); Generate then returns ErrGenerateStopped.
	Done <-chan struct{}
}

// ErrGenerateStopped is what Generate returns when GenerateRequest.Done
// was closed before every row finished.
var ErrGenerateStopped = errors.New("generation stopped: the request was cancelled")

// Generation is one sampled response.
type Generation struct {
	Tokens    []int32 // response tokens, EOS included when emitted
	Truncated bool    // no EOS within MaxTokens
	LogProbs  []float64
	Entropies []float64
	Embedding []float64
}

// ActorUpdate parameterises one actor update: the policy loss of
// PolicyLoss (clipped surrogate, dual clip, ratio level, aggregation), minus
// EntropyCoef times the aggregated entropy, plus KLCoef times the
// aggregated KL estimate to the frozen reference (KLEstimator; 0 turns it
// off, as it is with train.kl_mode: reward).
type ActorUpdate struct {
	Epochs      int
	Minibatches int
	// MicroBatchSize is how many responses one forward and backward pass
	// holds (train.micro_batch_size): a minibatch of more goes through in
	// parts whose gradients are summed before its one optimiser step.
	// 0 is the whole minibatch at once.
	MicroBatchSize int
	ClipLow        float64
	ClipHigh       float64
	// ClipRatioC is the dual-clip constant (0 = off, else > 1).
	ClipRatioC float64
	// LossAggMode is one of LossAggModes ("" = token-mean); RatioLevel is
	// RatioToken or RatioSequence ("" = token); MaxResponseTokens is Lmax
	// of seq-mean-token-sum-norm.
	LossAggMode       string
	RatioLevel        string
	MaxResponseTokens int
	EntropyCoef       float64
	KLCoef            float64
	KLEstimator       string // k1 | k2 | k3 ("" = k3)
	// PolicyLoss is one of PolicyLosses ("" = ppo); PolicyLossParams are
	// its own keys, train.policy_loss_params (nil: its defaults), which
	// the backend resolves with NewPolicyLoss as PolicyLoss does.
	PolicyLoss       string
	PolicyLossParams map[string]any
	Temperature      float64
	Seed             uint64
}

// ReferenceScorer is an optional Backend capability: the per-token
// log-probs of the frozen reference policy (the KL reference, the starting
// policy), under temperature, for every sequence of r. The trainer uses it
// for train.kl_mode: reward, before advantages are computed.
type ReferenceScorer interface {
	ReferenceLogProbs(r *Rollout, temperature float64) ([][]float64, error)
}

// CriticUpdate parameterises one critic update (masked MSE per head).
type CriticUpdate struct {
	Epochs         int
	Minibatches    int
	MicroBatchSize int // as in ActorUpdate
	Seed           uint64
}

// Backend is the model side: a policy that samples and learns, and an
// optional K-head critic. Methods are not safe for concurrent use.
type Backend interface {
	// Engine names the compute engine in use (for logs).
	Engine() string
	Generate(req GenerateRequest) ([]Generation, error)
	// ScoreValues fills Sequence.Values (T x K) with the critic's values.
	ScoreValues(r *Rollout) error
	// UpdateActor runs the clipped-surrogate update and returns metrics
	// (actor/pg_loss, actor/pg_clipfrac, ...). The per-token weights
	// Sequence.PGWeight and Sequence.AbsKLCoef (TokenLossHook; nil = 1
	// and 0) enter the loss as PolicyLoss documents.
	UpdateActor(r *Rollout, u ActorUpdate) (map[string]float64, error)
	// UpdateCritic regresses every head on Returns (HeadMask-weighted).
	UpdateCritic(r *Rollout, u CriticUpdate) (map[string]float64, error)
	// Save writes model and optimiser state under dir; Load restores it.
	Save(dir string) error
	Load(dir string) error
	Close() error
}
