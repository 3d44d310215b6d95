package core

// GenerateRequest asks the backend to sample one response per prompt.
type GenerateRequest struct {
	Prompts     [][]int32
	Temperature float64
	MaxTokens   int
	// Seed fixes the sampling noise: the same request and weights give the
	// same tokens.
	Seed uint64
	// Pooling, when set, asks for pooled last-layer embeddings.
	Pooling string
}

// Generation is one sampled response.
type Generation struct {
	Tokens    []int32 // response tokens, EOS included when emitted
	Truncated bool    // no EOS within MaxTokens
	LogProbs  []float64
	Entropies []float64
	Embedding []float64
}

// ActorUpdate parameterises one actor update (the PPO clipped surrogate).
type ActorUpdate struct {
	Epochs      int
	Minibatches int
	ClipLow     float64
	ClipHigh    float64
	EntropyCoef float64
	KLCoef      float64
	Temperature float64
	Seed        uint64
}

// CriticUpdate parameterises one critic update (masked MSE per head).
type CriticUpdate struct {
	Epochs      int
	Minibatches int
	Seed        uint64
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
	// (actor/pg_loss, actor/pg_clipfrac, ...).
	UpdateActor(r *Rollout, u ActorUpdate) (map[string]float64, error)
	// UpdateCritic regresses every head on Returns (HeadMask-weighted).
	UpdateCritic(r *Rollout, u CriticUpdate) (map[string]float64, error)
	// Save writes model and optimiser state under dir; Load restores it.
	Save(dir string) error
	Load(dir string) error
	Close() error
}
