package trainer

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/cde-rl/cde/internal/readcap"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"
)

// This file loads a run configuration: the defaults (DefaultConfigYAML),
// then the layers above them (LoadOptions: a resumed run's config, the
// config file, bench layers, CDE_* variables, --set flags), merged with
// koanf and handed to decodeConfig.

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
rollout: {n: 8, temperature: 1.0, max_response_tokens: 48, max_rows: 0, dtype: float32,
          servers: [], server_model: "", server_timeout: 120s, server_retries: 2,
          weight_sync: {dir: "", every: 1, endpoint: /update_weights_from_disk, token_env: CDE_SERVE_TOKEN},
          tis_cap: 0.0}
train: {steps: 200, prompts_per_step: 16, actor_lr: 1.0e-4, critic_lr: 1.0e-3,
        ppo_epochs: 1, minibatches: 1, micro_batch_size: 0, clip_low: 0.2, clip_high: 0.2,
        entropy_coef: 0.0, kl_coef: 0.0, kl_estimator: k3, kl_mode: loss,
        loss_agg_mode: token-mean, clip_ratio_c: 0.0, ratio_level: token, policy_loss: ppo, policy_loss_params: {},
        dynamic_sampling: {enabled: false, max_extra_batches: 4},
        overlong: {buffer: 0, penalty: 1.0},
        max_grad_norm: 1.0, value_heads: 1, critic_init: policy, critic_warmup: 0,
        checkpoint_every: 10, keep_checkpoints: 2, logger: [jsonl]}
algorithm: {name: grpo}
strategies: []
eval: {every: 20, every_responses: 0, k: 4, set_k: {}, final_k: 0, max_rows: 16384, temperature: 1.0, max_problems: 0, sets: [], at_start: true, details: true}
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
			return SuggestKey(fmt.Errorf("config: %s: %s: unknown key (known: %s)", file, k, strings.Join(topKeys, ", ")))
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
