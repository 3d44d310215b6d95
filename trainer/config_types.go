package trainer

import "time"

// This file holds the run configuration's types: Config, its sections and
// the upper bounds of their size keys.

// Config is a resolved, validated run configuration (docs/config.md).
// Task, Algorithm and Strategies stay raw: their factories read them
// strictly (tasks.New, NewAlgorithm, NewStrategy).
type Config struct {
	Seed       uint64
	Task       map[string]any
	Model      ModelConfig
	Backend    BackendConfig
	Rollout    RolloutConfig
	Train      TrainConfig
	Algorithm  map[string]any
	Strategies []map[string]any
	Eval       EvalConfig
	Pretrain   PretrainConfig
	// Preset is the top-level `preset` (none, paper): named settings that
	// fill the keys the user left at their defaults (applyPreset).
	Preset string
	// PresetApplied lists the keys the preset set, for the run's log.
	PresetApplied []string
	// Raw is the merged key tree the values were read from (saved as the
	// run's resolved config), with the preset's values filled in.
	Raw map[string]any
}

// ModelConfig sizes the policy (and the critic, which has the same shape).
type ModelConfig struct {
	Layers int // model.layers (2)
	DModel int // model.d_model (64)
	Heads  int // model.heads (4)
	FF     int // model.ff, feed-forward width (0 = 4 d_model)
	MaxLen int // model.max_len, longest prompt + response (64)
	// Checkpoint is the base policy: "auto" finds or makes the supervised
	// base for this task and model (with HF set: the model's own weights);
	// "" starts from random weights; a path loads that directory's
	// policy.gob.
	Checkpoint string
	// HF is model.hf: a Hugging Face model directory (config.json,
	// safetensors weights, tokenizer files) whose architecture replaces
	// cde's own transformer; "" for none. Its config.json sizes the model,
	// so layers, d_model, heads and ff must not be set with it. Omitted from
	// JSON when empty, so the keys of bases made before it existed (the
	// shipped one included) stay the same.
	HF string `json:"HF,omitempty"`
	// LoRA is model.lora: low-rank adapters on model.hf's projections with
	// its weights frozen; nil when model.lora.rank is 0 (full
	// fine-tuning, the default), and then omitted from JSON.
	LoRA *LoRAConfig `json:"LoRA,omitempty"`
	// Adapter is model.adapter: a PEFT LoRA adapter directory; with
	// model.lora the adapters start from it, without it is merged into
	// the weights ("" = none).
	Adapter string `json:"Adapter,omitempty"`
	// Recompute is model.recompute: the training passes recompute each
	// transformer block's activations in the backward pass instead of
	// keeping them (gradient checkpointing per block). Omitted from JSON
	// when false.
	Recompute bool `json:"Recompute,omitempty"`
}

// LoRAConfig is model.lora (docs/config.md#lora).
type LoRAConfig struct {
	Rank          int      // model.lora.rank r (0 = off)
	Alpha         float64  // model.lora.alpha: the update is scaled by alpha / r (16)
	Dropout       float64  // model.lora.dropout (0; only 0 is implemented)
	TargetModules []string // model.lora.target_modules (all seven projections)
	// BaseDType is model.lora.base_dtype, the storage of the frozen base
	// weights: "" for float32 (the default, omitted from JSON so the
	// manifests of runs made before the key compare equal) or "bfloat16".
	BaseDType string `json:"BaseDType,omitempty"`
}

// BackendConfig chooses the compute engine.
type BackendConfig struct {
	Engine string // backend.engine: auto | cpu | go | xla:cpu | xla:cuda | xla:tpu (auto)
	// PJRTPlugin is the PJRT plugin library the xla:* engines load
	// (backend.pjrt_plugin, "" = PJRT_PLUGIN_LIBRARY_PATH, then the standard
	// install locations); cde never downloads one.
	PJRTPlugin string
}

// RolloutConfig controls sampling.
type RolloutConfig struct {
	N                 int     // rollout.n: responses per prompt (8)
	Temperature       float64 // rollout.temperature (1.0)
	MaxResponseTokens int     // rollout.max_response_tokens (48)
	// Servers are the base URLs of OpenAI-compatible completions servers
	// (vLLM, SGLang, cde-run serve) that generate the training batches
	// (rollout.servers, [] = in-process; see package rollout).
	Servers []string
	// ServerModel is the "model" field of each request (rollout.server_model,
	// "" = omitted: the server's own).
	ServerModel string
	// ServerTimeout bounds one request (rollout.server_timeout, 120s);
	// ServerRetries is how many times a failed request is retried on the
	// same server before the server is dropped (rollout.server_retries, 2).
	ServerTimeout time.Duration
	ServerRetries int
	WeightSync    WeightSyncConfig // rollout.weight_sync
	// TISCap is the truncated importance-sampling cap C (rollout.tis_cap,
	// 0 = off, else > 1; see TISWeights).
	TISCap float64
	// MaxRows is rollout.max_rows: in-process generation decodes at most
	// this many responses of the training batch at once
	// (GenerateRequest.Slots; 0 = the whole batch at once). The responses
	// are those of the whole batch at once.
	MaxRows int
	// DType is rollout.dtype: "float32", or "bfloat16" to generate with
	// bfloat16 copies of a Hugging Face policy's weight matrices; the
	// trainer then rescores every response in float32 (Rollout.RolloutLogProbs
	// keeps the sampler's), as after remote generation.
	DType string
}

// BF16 reports whether in-process generation runs in bfloat16
// (rollout.dtype).
func (c RolloutConfig) BF16() bool { return c.DType == "bfloat16" }

// WeightSyncConfig is rollout.weight_sync: how the trainer's policy reaches
// the generation servers.
type WeightSyncConfig struct {
	// Dir is where the policy is written for the servers to reload
	// (rollout.weight_sync.dir; required with servers and every > 0).
	Dir string
	// Every syncs after every Every-th actor update (rollout.weight_sync.every,
	// 1; 0 = never, the servers keep the weights they have).
	Every int
	// Endpoint is the servers' reload route (rollout.weight_sync.endpoint,
	// /update_weights_from_disk: SGLang's name, which `cde-run serve` serves).
	Endpoint string
	// TokenEnv names the environment variable holding the bearer token sent
	// with each reload (rollout.weight_sync.token_env, CDE_SERVE_TOKEN); an
	// empty variable sends no Authorization header.
	TokenEnv string
}

// TrainConfig controls the RL loop.
type TrainConfig struct {
	Steps          int     // train.steps (200)
	PromptsPerStep int     // train.prompts_per_step (16)
	ActorLR        float64 // train.actor_lr (1e-4)
	CriticLR       float64 // train.critic_lr (1e-3)
	PPOEpochs      int     // train.ppo_epochs (1)
	Minibatches    int     // train.minibatches (1)
	// MicroBatchSize is train.micro_batch_size (0: a minibatch in one pass):
	// responses per forward/backward pass of an update; their gradients are
	// summed into the minibatch's one optimiser step.
	MicroBatchSize int
	ClipLow        float64 // train.clip_low (0.2)
	ClipHigh       float64 // train.clip_high (0.2)
	EntropyCoef    float64 // train.entropy_coef (0): entropy bonus in the actor loss
	KLCoef         float64 // train.kl_coef (0): weight of the KL to the frozen base policy
	// KLEstimator is train.kl_estimator: k1 | k2 | k3 (k3; see KLEstimators).
	KLEstimator string
	// KLMode is train.kl_mode: loss (the KL estimate is a term of the actor
	// loss) | reward (kl_coef * the summed per-token estimate between the
	// sampling and reference policies is subtracted from the reward before
	// advantages) (loss).
	KLMode string
	// LossAggMode is train.loss_agg_mode (token-mean; see AggTokenMean).
	LossAggMode string
	// ClipRatioC is train.clip_ratio_c, the dual-clip constant (0 = off,
	// else > 1).
	ClipRatioC float64
	// RatioLevel is train.ratio_level: token | sequence (GSPO) (token).
	RatioLevel string
	// PolicyLoss is train.policy_loss: ppo | cispo | gmpo | sapo (ppo).
	PolicyLoss string
	// PolicyLossParams is train.policy_loss_params ({}): the loss's own
	// keys as given, checked by its factory when the config is read
	// (core.NewPolicyLoss) and resolved by it again wherever the loss is
	// computed, so the defaults stay in the loss.
	PolicyLossParams map[string]any
	DynamicSampling  DynamicSamplingConfig // train.dynamic_sampling
	Overlong         OverlongConfig        // train.overlong
	MaxGradNorm      float64               // train.max_grad_norm (1.0)
	ValueHeads       int                   // train.value_heads: critic heads K (1; strategies may ask for more)
	// CriticInit is train.critic_init: policy (the critic's trunk starts
	// as the starting policy's, a fresh value head: verl's practice and the
	// paper's) | random (its own random weights) (policy).
	CriticInit string
	// CriticWarmup is train.critic_warmup: the first this many steps
	// update only the critic, not the actor (verl's trainer.critic_warmup;
	// the paper uses 10) (0).
	CriticWarmup    int
	CheckpointEvery int // train.checkpoint_every (10 steps)
	KeepCheckpoints int // train.keep_checkpoints (2)
	// Logger is train.logger ([jsonl]): where the step metrics go besides
	// metrics.jsonl, which is always written (the source of truth);
	// "tensorboard" adds a TensorBoard event file to the run directory.
	Logger []string
}

// DynamicSamplingConfig is DAPO's dynamic sampling (Yu et al. 2025, arXiv
// 2503.14476): groups whose verifier rewards are all equal are dropped and
// more prompts are sampled until prompts_per_step groups are kept or
// MaxExtraBatches more batches were drawn.
type DynamicSamplingConfig struct {
	Enabled         bool // train.dynamic_sampling.enabled (false)
	MaxExtraBatches int  // train.dynamic_sampling.max_extra_batches (4, >= 0)
}

// OverlongConfig is DAPO's overlong soft punishment: for a response of L
// tokens and Lmax = rollout.max_response_tokens, the reward gains
// min(0, (Lmax - Buffer - L) / Buffer) * Penalty (OverlongPenalty).
type OverlongConfig struct {
	Buffer  int     // train.overlong.buffer: L_cache in tokens (0 = off; < max_response_tokens)
	Penalty float64 // train.overlong.penalty: the penalty factor (1.0, >= 0)
}

// EvalConfig controls held-out evaluation.
type EvalConfig struct {
	Every       int     // eval.every (20 steps; 0 = only at start and end)
	K           int     // eval.k: samples per problem for avg@k / pass@k (4)
	Temperature float64 // eval.temperature (1.0)
	MaxProblems int     // eval.max_problems per set (0 = all)
	// EveryResponses is eval.every_responses: also evaluate before the
	// first step at which the responses generated so far
	// (train/generated_responses_total of the steps before it) reach the
	// next multiple of it, so arms that generate at different rates are
	// evaluated at comparable sample counts (0: off).
	EveryResponses int
	// Sets names the task's eval sets to run (eval.sets, default all).
	Sets []string
	// AtStart is eval.at_start: evaluate before the first step (true).
	// Benches whose arms share a base turn it off and evaluate the base
	// once per seed.
	AtStart bool
	// Details is eval.details: write each evaluation's per-problem correct
	// counts to RUN/evals/<set>/step-N.json (true).
	Details bool
	// SetK is eval.set_k: samples per problem for the eval sets it names
	// (the paper: 1 on MATH, 16 elsewhere); other sets use K ({}).
	SetK map[string]int
	// MaxRows is eval.max_rows: the most responses one evaluation
	// generates at once; a set's problems x k above it go through in
	// chunks of whole problems (16384).
	MaxRows int
	// FinalK is eval.final_k: K at the evaluation after the last step, for
	// the sets SetK does not name (0: K), so a run can end with pass@256
	// without paying for 256 samples at every evaluation.
	FinalK int
}

// EvalChunk is how many problems of k samples each one evaluation chunk
// holds under eval.max_rows (at least one).
func (e EvalConfig) EvalChunk(k int) int {
	return max(1, e.MaxRows/max(k, 1))
}

// KFor is the samples per problem of eval set name: eval.set_k's, else
// eval.k.
func (e EvalConfig) KFor(name string) int {
	if k, ok := e.SetK[name]; ok {
		return k
	}
	return e.K
}

// KAt is KFor at an evaluation, the final one when final is set: there
// eval.final_k (when set) replaces eval.k.
func (e EvalConfig) KAt(name string, final bool) int {
	if _, ok := e.SetK[name]; !ok && final && e.FinalK > 0 {
		return e.FinalK
	}
	return e.KFor(name)
}

// MeanK is the k that names the means over sets (val/mean/avg@k): eval.k,
// or eval.final_k at the final evaluation when set.
func (e EvalConfig) MeanK(final bool) int {
	if final && e.FinalK > 0 {
		return e.FinalK
	}
	return e.K
}

// PretrainConfig controls the supervised warm start (cde-run pretrain and
// model.checkpoint: auto).
type PretrainConfig struct {
	Steps     int     // pretrain.steps: upper bound (3000)
	BatchSize int     // pretrain.batch_size (64)
	LR        float64 // pretrain.lr (1e-3)
	EvalEvery int     // pretrain.eval_every (50)
	// StopAcc ends pretraining once avg@1 on the validation sets reaches it,
	// leaving a deliberately imperfect base (pretrain.stop_acc, 0.35).
	StopAcc float64
	// EvalK and EvalMaxProblems size the pretraining checks
	// (pretrain.eval_k 2, pretrain.eval_max_problems 64 per set).
	EvalK           int
	EvalMaxProblems int
	// Seed seeds the warm start (pretrain.seed, 0 = the run's seed). Set
	// it to share one base across the seeds of a benchmark.
	Seed uint64
	Dir  string // pretrain.dir: where auto bases live (runs/base)
}

// Upper bounds of the size keys, checked when a config is loaded (before
// the memory estimate, which bounds their products; docs/config.md).
const (
	MaxLayers         = 1024    // model.layers
	MaxDModel         = 65536   // model.d_model
	MaxFF             = 1 << 20 // model.ff
	MaxMaxLen         = 1 << 20 // model.max_len
	MaxRolloutN       = 65536   // rollout.n
	MaxPromptsPerStep = 1 << 20 // train.prompts_per_step, pretrain.batch_size
	MaxMicroBatchSize = 1 << 20 // train.micro_batch_size
	MaxPPOEpochs      = 1000    // train.ppo_epochs
	MaxExtraBatches   = 1000    // train.dynamic_sampling.max_extra_batches
	MaxEvalK          = 65536   // eval.k, pretrain.eval_k
)
