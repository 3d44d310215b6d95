package trainer

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/internal/readcap"
	"github.com/cde-rl/cde/internal/tensorboard"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"
)

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
	// PolicyLoss is train.policy_loss: ppo | cispo | gmpo (ppo).
	PolicyLoss      string
	DynamicSampling DynamicSamplingConfig // train.dynamic_sampling
	Overlong        OverlongConfig        // train.overlong
	MaxGradNorm     float64               // train.max_grad_norm (1.0)
	ValueHeads      int                   // train.value_heads: critic heads K (1; strategies may ask for more)
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

// DefaultConfigYAML holds every default; it is the bottom layer, and the
// only place a default is stated: the decode functions read every key of
// Config without a fallback (section), so a key missing here is an error
// naming it (TestEveryDecodedKeyHasADefault). eval.max_rows' 16384 lets
// the default model's evaluation of 300 problems x 64 samples (19200) go
// in two chunks.
const DefaultConfigYAML = `
seed: 1
preset: none
task: {name: arith}
model: {layers: 2, d_model: 64, heads: 4, ff: 0, max_len: 64, checkpoint: auto, hf: "", adapter: "", recompute: false,
        lora: {rank: 0, alpha: 16, dropout: 0, target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj], base_dtype: float32}}
backend: {engine: auto, pjrt_plugin: ""}
rollout: {n: 8, temperature: 1.0, max_response_tokens: 48, max_rows: 0,
          servers: [], server_model: "", server_timeout: 120s, server_retries: 2,
          weight_sync: {dir: "", every: 1, endpoint: /update_weights_from_disk, token_env: CDE_SERVE_TOKEN},
          tis_cap: 0.0}
train: {steps: 200, prompts_per_step: 16, actor_lr: 1.0e-4, critic_lr: 1.0e-3,
        ppo_epochs: 1, minibatches: 1, micro_batch_size: 0, clip_low: 0.2, clip_high: 0.2,
        entropy_coef: 0.0, kl_coef: 0.0, kl_estimator: k3, kl_mode: loss,
        loss_agg_mode: token-mean, clip_ratio_c: 0.0, ratio_level: token, policy_loss: ppo,
        dynamic_sampling: {enabled: false, max_extra_batches: 4},
        overlong: {buffer: 0, penalty: 1.0},
        max_grad_norm: 1.0, value_heads: 1, critic_init: policy, critic_warmup: 0,
        checkpoint_every: 10, keep_checkpoints: 2, logger: [jsonl]}
algorithm: {name: grpo}
strategies: []
eval: {every: 20, k: 4, set_k: {}, final_k: 0, max_rows: 16384, temperature: 1.0, max_problems: 0, sets: [], at_start: true, details: true}
pretrain: {steps: 3000, batch_size: 64, lr: 1.0e-3, eval_every: 50, stop_acc: 0.35, eval_k: 2,
           eval_max_problems: 64, seed: 0, dir: runs/base}
`

// LoadOptions are the layers above the defaults.
type LoadOptions struct {
	// File is a YAML config file ("" for none).
	File string
	// Env is the environment (KEY=VALUE) to read CDE_* from; nil reads
	// os.Environ. CDE_TRAIN__STEPS=50 sets train.steps (double underscore
	// separates levels; single underscores stay in key names).
	Env []string
	// Sets are flag overrides "key.path=value", applied last; value is
	// parsed as YAML (so 3, 1e-4, true, [1, 2] work).
	Sets []string
	// Base, when set, is a run's resolved config (used by --resume): it is
	// merged over the embedded defaults and every key it holds counts as
	// set by the user (so a preset fills none of them); a key it lacks (a
	// run made before the key existed) keeps its default.
	Base []byte
	// Layers are YAML documents merged in order after File and before the
	// environment and Sets (used by cde-run bench: base < arm < seed). Maps
	// merge key by key; a list replaces the list below it.
	Layers [][]byte
}

// LoadConfig merges defaults < file < layers < env CDE_* < sets and validates every
// key. Errors name the key (and the file).
func LoadConfig(o LoadOptions) (*Config, error) {
	return loadConfig(o, DefaultConfigYAML)
}

// loadConfig is LoadConfig with defaults as the bottom layer (tests pass
// an edited DefaultConfigYAML to see that it is the one source).
func loadConfig(o LoadOptions, defaults string) (*Config, error) {
	k := koanf.New(".")
	if err := k.Load(rawbytes.Provider([]byte(defaults)), yaml.Parser()); err != nil {
		return nil, fmt.Errorf("config: defaults: %w", err)
	}
	defaultTree := k.Raw()
	var userKeys []string
	if o.Base != nil {
		bk := koanf.New(".")
		if err := bk.Load(rawbytes.Provider(o.Base), yaml.Parser()); err != nil {
			return nil, fmt.Errorf("config: defaults: %w", err)
		}
		userKeys = append(userKeys, bk.Keys()...)
		if err := k.Merge(bk); err != nil {
			return nil, err
		}
	}
	if o.File != "" {
		data, err := readcap.Config.ReadFile(o.File)
		if errors.Is(err, readcap.ErrTooLarge) {
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		fk := koanf.New(".")
		if err := fk.Load(rawbytes.Provider(data), yaml.Parser()); err != nil {
			return nil, fmt.Errorf("config: %s: %w", o.File, err)
		}
		if err := checkKnownTop(fk.Raw(), o.File); err != nil {
			return nil, err
		}
		userKeys = append(userKeys, fk.Keys()...)
		if err := k.Merge(fk); err != nil {
			return nil, err
		}
	}
	for i, data := range o.Layers {
		lk := koanf.New(".")
		name := fmt.Sprintf("layer %d", i)
		if err := lk.Load(rawbytes.Provider(data), yaml.Parser()); err != nil {
			return nil, fmt.Errorf("config: %s: %w", name, err)
		}
		if err := checkKnownTop(lk.Raw(), name); err != nil {
			return nil, err
		}
		userKeys = append(userKeys, lk.Keys()...)
		if err := k.Merge(lk); err != nil {
			return nil, err
		}
	}
	environ := o.Env
	if environ == nil {
		environ = os.Environ()
	}
	envMap := map[string]any{}
	origin := map[string]string{} // config key -> the variable or flag that set it
	for _, kv := range environ {
		name, val, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		key, isConfig, err := envConfigKey(name)
		if err != nil {
			return nil, err
		}
		if !isConfig {
			continue
		}
		if !validKeyPath(key) {
			return nil, fmt.Errorf("config: environment variable %s: %q is not a key path (an empty element between double underscores)", name, key)
		}
		v, err := parseScalar(val)
		if err != nil {
			return nil, fmt.Errorf("config: env %s: %w", name, err)
		}
		envMap[key] = v
		origin[key] = "environment variable " + name
	}
	if len(envMap) > 0 {
		if err := k.Load(confmap.Provider(envMap, "."), nil); err != nil {
			return nil, err
		}
	}
	setMap := map[string]any{}
	for _, s := range o.Sets {
		key, val, ok := strings.Cut(s, "=")
		if !ok || !validKeyPath(key) {
			return nil, fmt.Errorf("config: --set %q: want key.path=value (non-empty dot-separated keys)", s)
		}
		v, err := parseScalar(val)
		if err != nil {
			return nil, fmt.Errorf("config: --set %s: %w", key, err)
		}
		setMap[key] = v
		origin[key] = "--set " + s
	}
	if len(setMap) > 0 {
		if err := k.Load(confmap.Provider(setMap, "."), nil); err != nil {
			return nil, err
		}
	}
	// The keys the user set (for a resume, the run's resolved config is
	// complete: every key counts as set), so a preset fills only the rest.
	userSet := map[string]bool{}
	for _, key := range userKeys {
		userSet[key] = true
	}
	for key := range envMap {
		userSet[key] = true
	}
	for key := range setMap {
		userSet[key] = true
	}
	raw := k.Raw()
	applied, err := applyPreset(raw, userSet)
	if err != nil {
		return nil, err
	}
	cfg, err := decodeConfig(raw, defaultTree)
	if cfg != nil {
		cfg.PresetApplied = applied
	}
	if err != nil {
		if src := originOf(err, origin); src != "" {
			return nil, fmt.Errorf("%w (set by %s)", err, src)
		}
		if o.File != "" {
			return nil, fmt.Errorf("%w (in %s or its overrides)", err, o.File)
		}
	}
	return cfg, err
}

// validKeyPath reports whether key is a dotted path without empty
// elements ("train.steps", not "", ".", "train." or "train..steps").
func validKeyPath(key string) bool {
	for _, e := range strings.Split(key, ".") {
		if e == "" {
			return false
		}
	}
	return true
}

// originOf returns the override (variable or --set flag) whose key err
// names ("config: KEY: ..." or "config: KEY.SUB: ..."), or "".
func originOf(err error, origin map[string]string) string {
	msg := err.Error()
	best := ""
	for key := range origin {
		for _, form := range []string{key + ":", key + ".", key + "["} {
			if strings.Contains(msg, " "+form) && len(key) > len(best) {
				best = key
			}
		}
	}
	return origin[best]
}

// envConfigKey maps an environment variable to the config key it
// overrides. CDE_SEED and CDE_SECTION__KEY (double underscores between
// levels, e.g. CDE_TRAIN__STEPS) are overrides; a CDE_X__Y whose X is not
// a config section is an error naming the variable; any other variable,
// including CDE_* ones that tools read (CDE_BENCH_ENGINE, CDE_CPU_OPSTATS),
// is not config.
func envConfigKey(name string) (key string, isConfig bool, err error) {
	if !strings.HasPrefix(name, "CDE_") {
		return "", false, nil
	}
	key = strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(name, "CDE_")), "__", ".")
	top, _, nested := strings.Cut(key, ".")
	for _, t := range topKeys {
		if top == t {
			return key, true, nil
		}
	}
	if nested {
		return "", false, fmt.Errorf("config: environment variable %s: %s is not a config section (known: %s)", name, top, strings.Join(topKeys, ", "))
	}
	return "", false, nil
}

// ConfigEnvVars lists the variables of environ that override config keys
// (see LoadOptions.Env), sorted.
func ConfigEnvVars(environ []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if _, isConfig, err := envConfigKey(name); isConfig || err != nil {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

var topKeys = []string{"seed", "preset", "task", "model", "backend", "rollout", "train", "algorithm", "strategies", "eval", "pretrain"}

func checkKnownTop(m map[string]any, file string) error {
	for k := range m {
		known := false
		for _, t := range topKeys {
			known = known || k == t
		}
		if !known {
			return fmt.Errorf("config: %s: %s: unknown key (known: %s)", file, k, strings.Join(topKeys, ", "))
		}
	}
	return nil
}

func parseScalar(s string) (any, error) {
	var v any
	k := koanf.New(".")
	if err := k.Load(rawbytes.Provider([]byte("v: "+s)), yaml.Parser()); err != nil {
		return nil, err
	}
	v = k.Get("v")
	return v, nil
}

// section reads a section of the merged key tree strictly (core.Params)
// and without fallbacks: the bottom layer, DefaultConfigYAML, sets every
// key a decode function reads, so a key missing from the tree is an error
// naming it (a key DefaultConfigYAML lacks, or one whose section a layer
// set to null), never a second default.
type section struct{ *core.Params }

// need reports whether key k is in the tree, recording an error naming it
// when it is not.
func (s section) need(k string) bool {
	ok := s.Has(k)
	s.Check(ok, k, "no value (trainer.DefaultConfigYAML gives every key a default: was it or its section set to null?)")
	return ok
}

func (s section) Int(k string) int                   { s.need(k); return s.Params.Int(k, 0) }
func (s section) Float(k string) float64             { s.need(k); return s.Params.Float(k, 0) }
func (s section) Bool(k string) bool                 { s.need(k); return s.Params.Bool(k, false) }
func (s section) String(k string) string             { s.need(k); return s.Params.String(k, "") }
func (s section) Duration(k string) time.Duration    { s.need(k); return s.Params.Duration(k, 0) }
func (s section) OneOf(k string, c ...string) string { s.need(k); return s.Params.OneOf(k, "", c...) }

// Value is k's raw value (nil when set to null).
func (s section) Value(k string) any {
	s.need(k)
	v, _ := s.Raw(k)
	return v
}

// Strings reads a list of strings.
func (s section) Strings(k string) []string {
	if !s.need(k) {
		return nil
	}
	v, _ := s.Raw(k)
	return stringList(s.Params, k, v)
}

// Sub is the section at k (reported through s.Finish, as core.Params.Sub).
func (s section) Sub(k string) section {
	s.need(k)
	return section{s.Params.Sub(k)}
}

// decodeConfig reads raw, the merged key tree, into a Config; defaults is
// the bottom layer's tree.
func decodeConfig(raw, defaults map[string]any) (*Config, error) {
	p := section{core.NewParams("", raw)}
	c := &Config{Raw: raw}
	c.Preset = p.OneOf("preset", Presets...)
	seed := p.Int("seed")
	p.Check(seed >= 0, "seed", "must be >= 0, got %d", seed)
	c.Seed = uint64(seed)
	c.Task = p.Map("task")
	if c.Task == nil {
		p.Fail("task", "required")
	}

	decodeModel(p.Sub("model"), c, defaults)

	b := p.Sub("backend")
	c.Backend.Engine = b.OneOf("engine", "auto", "cpu", "go", "xla:cpu", "xla:cuda", "xla:tpu")
	c.Backend.PJRTPlugin = b.String("pjrt_plugin")

	decodeRolloutSection(p.Sub("rollout"), c)

	decodeTrain(p.Sub("train"), c)

	c.Algorithm = p.Map("algorithm")
	if c.Algorithm == nil {
		p.Fail("algorithm", "required")
	}
	decodeStrategies(p, c)

	decodeEval(p.Sub("eval"), c)

	decodePretrain(p.Sub("pretrain"), c)

	if err := p.Finish(); err != nil {
		return nil, err
	}
	return c, nil
}

// decodeModel reads model: the sizes of cde's transformer or model.hf.
func decodeModel(m section, c *Config, defaults map[string]any) {
	c.Model = ModelConfig{
		Layers: m.Int("layers"), DModel: m.Int("d_model"), Heads: m.Int("heads"),
		FF: m.Int("ff"), MaxLen: m.Int("max_len"), Checkpoint: m.String("checkpoint"),
	}
	m.Check(c.Model.Layers >= 1 && c.Model.Layers <= MaxLayers, "layers", "must be in [1, %d], got %d", MaxLayers, c.Model.Layers)
	m.Check(c.Model.DModel >= 1 && c.Model.DModel <= MaxDModel, "d_model", "must be in [1, %d], got %d", MaxDModel, c.Model.DModel)
	m.Check(c.Model.Heads >= 1 && c.Model.DModel%max(c.Model.Heads, 1) == 0, "heads", "must divide d_model = %d, got %d", c.Model.DModel, c.Model.Heads)
	m.Check(c.Model.FF >= 0 && c.Model.FF <= MaxFF, "ff", "must be in [0, %d], got %d", MaxFF, c.Model.FF)
	m.Check(c.Model.MaxLen >= 8 && c.Model.MaxLen <= MaxMaxLen, "max_len", "must be in [8, %d], got %d", MaxMaxLen, c.Model.MaxLen)
	c.Model.HF = m.String("hf")
	if c.Model.HF != "" {
		// The defaults set these keys, so a value other than the default
		// is what shows a user set one.
		for _, kv := range []struct {
			k string
			v int
		}{{"layers", c.Model.Layers}, {"d_model", c.Model.DModel}, {"heads", c.Model.Heads}, {"ff", c.Model.FF}} {
			def, _ := core.ToFloat(treeValue(defaults, "model."+kv.k))
			m.Check(kv.v == int(def), kv.k, "not with model.hf: the model's config.json sets the sizes (leave it at %v)", def)
		}
	}
	c.Model.Adapter = m.String("adapter")
	c.Model.Recompute = m.Bool("recompute")
	m.Check(c.Model.Adapter == "" || c.Model.HF != "", "adapter", "a PEFT adapter needs the Hugging Face model it adapts (model.hf)")
	decodeLoRA(m.Sub("lora"), c)
}

// decodeLoRA reads model.lora.
func decodeLoRA(l section, c *Config) {
	lc := LoRAConfig{Rank: l.Int("rank"), Alpha: l.Float("alpha"), Dropout: l.Float("dropout")}
	switch bd := l.String("base_dtype"); bd {
	case "float32":
	case "bfloat16":
		lc.BaseDType = bd
	default:
		l.Fail("base_dtype", "%q: want float32 or bfloat16", bd)
	}
	lc.TargetModules = l.Strings("target_modules")
	for _, k := range []struct{ key, what string }{
		{"use_rslora", "rsLoRA (scale alpha / sqrt(r))"}, {"rslora", "rsLoRA (scale alpha / sqrt(r))"},
		{"use_dora", "DoRA (weight-decomposed LoRA)"}, {"dora", "DoRA (weight-decomposed LoRA)"},
	} {
		if v, ok := l.Raw(k.key); ok && v != false {
			l.Fail(k.key, "%s is not implemented; only plain LoRA is", k.what)
		}
	}
	l.Check(lc.Rank >= 0 && lc.Rank <= 4096, "rank", "must be in [0, 4096] (0 = off), got %d", lc.Rank)
	if lc.Rank == 0 {
		l.Check(lc.BaseDType == "", "base_dtype", "bfloat16 stores a LoRA run's frozen base weights: set model.lora.rank too (full fine-tuning trains every weight in float32)")
		return
	}
	l.Check(c.Model.HF != "", "rank", "adapters need a Hugging Face model (model.hf)")
	l.Check(c.Model.Checkpoint == "auto", "rank", "adapters train on model.hf's own weights: model.checkpoint must be auto, got %q", c.Model.Checkpoint)
	l.Check(lc.Alpha > 0, "alpha", "must be > 0, got %v", lc.Alpha)
	l.Check(lc.Dropout == 0, "dropout", "only 0 is implemented (adapter dropout would make the first minibatch's policy ratio differ from 1), got %v", lc.Dropout)
	l.Check(len(lc.TargetModules) > 0, "target_modules", "empty: name the projections to adapt (%s)", strings.Join(loraModules, ", "))
	for _, t := range lc.TargetModules {
		l.Check(slices.Contains(loraModules, t), "target_modules", "%q is not a projection cde can adapt (known: %s)", t, strings.Join(loraModules, ", "))
	}
	c.Model.LoRA = &lc
}

// loraModules are the projections model.lora.target_modules may name
// (PEFT's names; backends/xla/peft.Modules).
var loraModules = []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}

// stringList reads a list of strings at key k of p (value v).
func stringList(p *core.Params, k string, v any) []string {
	list, ok := v.([]any)
	if !ok {
		p.Fail(k, "want a list of strings, got %v (%T)", v, v)
		return nil
	}
	out := make([]string, 0, len(list))
	for i, x := range list {
		s, ok := x.(string)
		if !ok {
			p.Fail(k, "element %d: want a string, got %v (%T)", i, x, x)
			return nil
		}
		out = append(out, s)
	}
	return out
}

// decodeRolloutSection reads rollout (after model: max_response_tokens must fit max_len).
func decodeRolloutSection(r section, c *Config) {
	c.Rollout = RolloutConfig{N: r.Int("n"), Temperature: r.Float("temperature"), MaxResponseTokens: r.Int("max_response_tokens"),
		MaxRows: r.Int("max_rows")}
	r.Check(c.Rollout.MaxRows >= 0 && c.Rollout.MaxRows <= MaxPromptsPerStep, "max_rows", "must be in [0, %d] (0 = the whole batch at once), got %d", MaxPromptsPerStep, c.Rollout.MaxRows)
	r.Check(c.Rollout.N >= 1 && c.Rollout.N <= MaxRolloutN, "n", "must be in [1, %d], got %d", MaxRolloutN, c.Rollout.N)
	r.Check(c.Rollout.Temperature > 0 && c.Rollout.Temperature <= 10, "temperature", "must be in (0, 10], got %v", c.Rollout.Temperature)
	r.Check(c.Rollout.MaxResponseTokens >= 1, "max_response_tokens", "must be >= 1, got %d", c.Rollout.MaxResponseTokens)
	r.Check(c.Rollout.MaxResponseTokens < c.Model.MaxLen, "max_response_tokens", "must be < model.max_len = %d", c.Model.MaxLen)
	decodeRolloutServers(r, &c.Rollout)
}

// decodeTrain reads train (after rollout: minibatches divide the batch, the overlong buffer fits the response).
func decodeTrain(t section, c *Config) {
	c.Train = TrainConfig{
		Steps: t.Int("steps"), PromptsPerStep: t.Int("prompts_per_step"),
		ActorLR: t.Float("actor_lr"), CriticLR: t.Float("critic_lr"),
		PPOEpochs: t.Int("ppo_epochs"), Minibatches: t.Int("minibatches"),
		MicroBatchSize: t.Int("micro_batch_size"),
		ClipLow:        t.Float("clip_low"), ClipHigh: t.Float("clip_high"),
		EntropyCoef: t.Float("entropy_coef"), KLCoef: t.Float("kl_coef"),
		MaxGradNorm: t.Float("max_grad_norm"), ValueHeads: t.Int("value_heads"),
		CheckpointEvery: t.Int("checkpoint_every"), KeepCheckpoints: t.Int("keep_checkpoints"),
		CriticInit: t.OneOf("critic_init", "policy", "random"), CriticWarmup: t.Int("critic_warmup"),
		KLEstimator: t.OneOf("kl_estimator", core.KLEstimators...),
		KLMode:      t.OneOf("kl_mode", "loss", "reward"),
		LossAggMode: t.OneOf("loss_agg_mode", core.LossAggModes...),
		ClipRatioC:  t.Float("clip_ratio_c"),
		RatioLevel:  t.OneOf("ratio_level", core.RatioToken, core.RatioSequence),
		PolicyLoss:  t.OneOf("policy_loss", core.PolicyLosses()...),
	}
	if err := core.CheckPolicyLoss(c.Train.PolicyLoss, c.Train.RatioLevel, c.Train.ClipRatioC); err != nil {
		t.Fail("policy_loss", "%s", strings.TrimPrefix(err.Error(), "train.policy_loss "))
	}
	ds := t.Sub("dynamic_sampling")
	c.Train.DynamicSampling = DynamicSamplingConfig{Enabled: ds.Bool("enabled"), MaxExtraBatches: ds.Int("max_extra_batches")}
	ds.Check(c.Train.DynamicSampling.MaxExtraBatches >= 0 && c.Train.DynamicSampling.MaxExtraBatches <= MaxExtraBatches, "max_extra_batches",
		"must be in [0, %d], got %d", MaxExtraBatches, c.Train.DynamicSampling.MaxExtraBatches)
	ol := t.Sub("overlong")
	c.Train.Overlong = OverlongConfig{Buffer: ol.Int("buffer"), Penalty: ol.Float("penalty")}
	ol.Check(c.Train.Overlong.Buffer >= 0 && c.Train.Overlong.Buffer < c.Rollout.MaxResponseTokens, "buffer",
		"must be in [0, rollout.max_response_tokens = %d), got %d", c.Rollout.MaxResponseTokens, c.Train.Overlong.Buffer)
	ol.Check(c.Train.Overlong.Penalty >= 0 && c.Train.Overlong.Penalty <= 100, "penalty", "must be in [0, 100], got %v", c.Train.Overlong.Penalty)
	tc := c.Train
	t.Check(tc.Steps >= 1, "steps", "must be >= 1, got %d", tc.Steps)
	t.Check(tc.PromptsPerStep >= 1 && tc.PromptsPerStep <= MaxPromptsPerStep, "prompts_per_step", "must be in [1, %d], got %d", MaxPromptsPerStep, tc.PromptsPerStep)
	t.Check(tc.ActorLR > 0 && tc.ActorLR <= 1, "actor_lr", "must be in (0, 1], got %v", tc.ActorLR)
	t.Check(tc.CriticLR > 0 && tc.CriticLR <= 1, "critic_lr", "must be in (0, 1], got %v", tc.CriticLR)
	t.Check(tc.PPOEpochs >= 1 && tc.PPOEpochs <= MaxPPOEpochs, "ppo_epochs", "must be in [1, %d], got %d", MaxPPOEpochs, tc.PPOEpochs)
	t.Check(tc.Minibatches >= 1 && (tc.PromptsPerStep*c.Rollout.N)%max(tc.Minibatches, 1) == 0, "minibatches",
		"must be >= 1 and divide prompts_per_step * rollout.n = %d, got %d", tc.PromptsPerStep*c.Rollout.N, tc.Minibatches)
	t.Check(tc.MicroBatchSize >= 0 && tc.MicroBatchSize <= MaxMicroBatchSize, "micro_batch_size", "must be in [0, %d] (0: each minibatch in one pass), got %d", MaxMicroBatchSize, tc.MicroBatchSize)
	t.Check(tc.ClipLow > 0 && tc.ClipLow < 1, "clip_low", "must be in (0, 1), got %v", tc.ClipLow)
	t.Check(tc.ClipHigh > 0 && tc.ClipHigh <= 1, "clip_high", "must be in (0, 1], got %v", tc.ClipHigh)
	t.Check(tc.EntropyCoef >= 0 && tc.EntropyCoef <= 1, "entropy_coef", "must be in [0, 1], got %v", tc.EntropyCoef)
	t.Check(tc.KLCoef >= 0 && tc.KLCoef <= 10, "kl_coef", "must be in [0, 10], got %v", tc.KLCoef)
	t.Check(tc.ClipRatioC == 0 || tc.ClipRatioC > 1, "clip_ratio_c", "must be 0 (off) or > 1, got %v", tc.ClipRatioC)
	t.Check(tc.MaxGradNorm > 0, "max_grad_norm", "must be > 0, got %v", tc.MaxGradNorm)
	t.Check(tc.ValueHeads >= 1 && tc.ValueHeads <= 64, "value_heads", "must be in 1..64, got %d", tc.ValueHeads)
	t.Check(tc.CheckpointEvery >= 1, "checkpoint_every", "must be >= 1, got %d", tc.CheckpointEvery)
	t.Check(tc.KeepCheckpoints >= 1, "keep_checkpoints", "must be >= 1, got %d", tc.KeepCheckpoints)
	c.Train.Logger = t.Strings("logger")
	for _, l := range c.Train.Logger {
		t.Check(slices.Contains(tensorboard.Names, l), "logger", "%q is not a logger (known: %s)", l, strings.Join(tensorboard.Names, ", "))
	}
	t.Check(tc.CriticWarmup >= 0 && tc.CriticWarmup < tc.Steps, "critic_warmup", "must be in [0, train.steps), got %d", tc.CriticWarmup)
}

// decodeStrategies reads the strategies list: one mapping per entry,
// checked by the strategy it names when the run is built.
func decodeStrategies(p section, c *Config) {
	if raw := p.Value("strategies"); raw != nil {
		list, isList := raw.([]any)
		if !isList {
			p.Fail("strategies", "want a list of mappings, got %v (%T)", raw, raw)
		}
		for i, item := range list {
			mm, ok := item.(map[string]any)
			if !ok {
				p.Fail(fmt.Sprintf("strategies[%d]", i), "want a mapping, got %v (%T)", item, item)
				break
			}
			c.Strategies = append(c.Strategies, mm)
		}
	}
}

// decodeEval reads eval.
func decodeEval(e section, c *Config) {
	c.Eval = EvalConfig{Every: e.Int("every"), K: e.Int("k"), Temperature: e.Float("temperature"), MaxProblems: e.Int("max_problems"),
		AtStart: e.Bool("at_start"), Details: e.Bool("details")}
	e.Check(c.Eval.Every >= 0, "every", "must be >= 0, got %d", c.Eval.Every)
	e.Check(c.Eval.K >= 1 && c.Eval.K <= MaxEvalK, "k", "must be in [1, %d], got %d", MaxEvalK, c.Eval.K)
	c.Eval.MaxRows = e.Int("max_rows")
	e.Check(c.Eval.MaxRows >= 1, "max_rows", "must be >= 1, got %d", c.Eval.MaxRows)
	c.Eval.FinalK = e.Int("final_k")
	e.Check(c.Eval.FinalK >= 0 && c.Eval.FinalK <= MaxEvalK, "final_k", "must be in [0, %d] (0: eval.k), got %d", MaxEvalK, c.Eval.FinalK)
	e.Check(c.Eval.Temperature > 0 && c.Eval.Temperature <= 10, "temperature", "must be in (0, 10], got %v", c.Eval.Temperature)
	e.Check(c.Eval.MaxProblems >= 0, "max_problems", "must be >= 0, got %d", c.Eval.MaxProblems)
	if raw := e.Value("sets"); raw != nil {
		list, isList := raw.([]any)
		if !isList {
			e.Fail("sets", "want a list of eval set names, got %v (%T)", raw, raw)
		}
		for i, item := range list {
			name, isStr := item.(string)
			if !isStr || name == "" {
				e.Fail(fmt.Sprintf("sets[%d]", i), "want an eval set name, got %v", item)
				break
			}
			c.Eval.Sets = append(c.Eval.Sets, name)
		}
	}

	if raw := e.Value("set_k"); raw != nil {
		mm, isMap := raw.(map[string]any)
		if !isMap {
			e.Fail("set_k", "want a mapping of eval set name to k, got %v (%T)", raw, raw)
		}
		for _, name := range slices.Sorted(maps.Keys(mm)) {
			f, isNum := core.ToFloat(mm[name])
			if !isNum || f != math.Trunc(f) || f < 1 || f > MaxEvalK {
				e.Fail("set_k."+name, "want an integer in [1, %d], got %v", MaxEvalK, mm[name])
				break
			}
			if c.Eval.SetK == nil {
				c.Eval.SetK = map[string]int{}
			}
			c.Eval.SetK[name] = int(f)
		}
	}
}

// decodePretrain reads pretrain, the supervised warm start.
func decodePretrain(pt section, c *Config) {
	c.Pretrain = PretrainConfig{Steps: pt.Int("steps"), BatchSize: pt.Int("batch_size"), LR: pt.Float("lr"),
		EvalEvery: pt.Int("eval_every"), StopAcc: pt.Float("stop_acc"), EvalK: pt.Int("eval_k"),
		EvalMaxProblems: pt.Int("eval_max_problems"), Dir: pt.String("dir")}
	pseed := pt.Int("seed")
	pt.Check(pseed >= 0, "seed", "must be >= 0, got %d", pseed)
	c.Pretrain.Seed = uint64(pseed)
	pt.Check(c.Pretrain.EvalK >= 1 && c.Pretrain.EvalK <= MaxEvalK, "eval_k", "must be in [1, %d], got %d", MaxEvalK, c.Pretrain.EvalK)
	pt.Check(c.Pretrain.EvalMaxProblems >= 0, "eval_max_problems", "must be >= 0, got %d", c.Pretrain.EvalMaxProblems)
	pt.Check(c.Pretrain.Steps >= 1, "steps", "must be >= 1, got %d", c.Pretrain.Steps)
	pt.Check(c.Pretrain.BatchSize >= 1 && c.Pretrain.BatchSize <= MaxPromptsPerStep, "batch_size", "must be in [1, %d], got %d", MaxPromptsPerStep, c.Pretrain.BatchSize)
	pt.Check(c.Pretrain.LR > 0 && c.Pretrain.LR <= 1, "lr", "must be in (0, 1], got %v", c.Pretrain.LR)
	pt.Check(c.Pretrain.EvalEvery >= 1, "eval_every", "must be >= 1, got %d", c.Pretrain.EvalEvery)
	pt.Check(c.Pretrain.StopAcc > 0 && c.Pretrain.StopAcc <= 1, "stop_acc", "must be in (0, 1], got %v", c.Pretrain.StopAcc)
}

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

// decodeRolloutServers reads the remote-generation keys of the rollout
// section into c: servers, server_model, server_timeout, server_retries,
// weight_sync and tis_cap.
func decodeRolloutServers(r section, c *RolloutConfig) {
	if raw := r.Value("servers"); raw != nil {
		list, isList := raw.([]any)
		if !isList {
			r.Fail("servers", "want a list of server URLs, got %v (%T)", raw, raw)
		}
		for i, item := range list {
			key := fmt.Sprintf("servers[%d]", i)
			s, isStr := item.(string)
			if !isStr {
				r.Fail(key, "want a URL such as http://127.0.0.1:8000, got %v (%T)", item, item)
				break
			}
			u, err := url.Parse(s)
			if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
				r.Fail(key, "want an http or https URL with a host, such as http://127.0.0.1:8000, got %q", s)
				break
			}
			c.Servers = append(c.Servers, strings.TrimRight(s, "/"))
		}
	}
	c.ServerModel = r.String("server_model")
	c.ServerTimeout = r.Duration("server_timeout")
	c.ServerRetries = r.Int("server_retries")
	r.Check(c.ServerRetries >= 0, "server_retries", "must be >= 0, got %d", c.ServerRetries)
	ws := r.Sub("weight_sync")
	c.WeightSync = WeightSyncConfig{Dir: ws.String("dir"), Every: ws.Int("every"),
		Endpoint: ws.String("endpoint"), TokenEnv: ws.String("token_env")}
	ws.Check(c.WeightSync.Every >= 0, "every", "must be >= 0 (0 = never), got %d", c.WeightSync.Every)
	ws.Check(len(c.Servers) == 0 || c.WeightSync.Every == 0 || c.WeightSync.Dir != "", "dir",
		"required with rollout.servers and rollout.weight_sync.every > 0: the directory the trainer writes its policy into and the servers reload from")
	ws.Check(strings.HasPrefix(c.WeightSync.Endpoint, "/"), "endpoint", "want a path starting with /, got %q", c.WeightSync.Endpoint)
	c.TISCap = r.Float("tis_cap")
	r.Check(c.TISCap == 0 || c.TISCap > 1, "tis_cap", "must be 0 (off) or > 1, got %v", c.TISCap)
	r.Check(c.TISCap == 0 || len(c.Servers) > 0, "tis_cap",
		"needs rollout.servers: in-process generation samples with the trainer's own weights, so there is no mismatch to correct")
}
