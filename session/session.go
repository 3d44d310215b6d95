// Package session turns a resolved config into a ready run: the task, its
// tokenizer, the backend, the algorithm and the strategies (in-tree ones
// and plugin entries), the base policy, and the run directory. cde-run is a
// thin layer of flags over it; Go programs use it directly:
//
//	cfg, _ := trainer.LoadConfig(trainer.LoadOptions{Sets: []string{"train.steps=50"}})
//	err := session.Train(ctx, session.TrainOptions{Config: cfg, RunDir: "runs/mine"})
package session

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/rs/zerolog"

	_ "github.com/cde-rl/cde/algos/all" // every in-tree algorithm
	"github.com/cde-rl/cde/backends/xla"
	"github.com/cde-rl/cde/backends/xla/hf"
	"github.com/cde-rl/cde/backends/xla/peft"
	"github.com/cde-rl/cde/backends/xla/safetensors"
	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/plugins"
	"github.com/cde-rl/cde/rollout"
	_ "github.com/cde-rl/cde/strategies/all" // every in-tree strategy
	"github.com/cde-rl/cde/tasks"
	"github.com/cde-rl/cde/trainer"
)

// Session is everything a command needs, built from a Config: no
// checkpoint is loaded yet.
type Session struct {
	Cfg        *trainer.Config
	Task       core.Task
	Algo       core.Algorithm
	Strategies []core.Strategy
	Backend    *xla.Backend
	Trainer    *trainer.Trainer
	Log        zerolog.Logger
	// arena holds each step's columns where the shared-memory plugins
	// read them (nil without such a plugin).
	arena *plugins.Arena
}

// Output is where long work shows its progress: a progress bar on a
// terminal (TTY) or plain lines, on W (nil for none).
type Output struct {
	W   io.Writer
	TTY bool
}

// New builds task, algorithm, strategies and backend from cfg, and checks
// that every prompt of the task fits the model. On error, every plugin
// process already started is stopped.
func New(cfg *trainer.Config, log zerolog.Logger) (_ *Session, err error) {
	s, needs, err := buildRun(cfg, log)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	task := s.Task
	tok := task.Tokenizer()
	policy := WithModelOptions(cfg, xla.ModelConfig{Vocab: tok.VocabSize(), Layers: cfg.Model.Layers, DModel: cfg.Model.DModel,
		Heads: cfg.Model.Heads, FF: cfg.Model.FF, MaxLen: cfg.Model.MaxLen})
	var weights *safetensors.Set
	var adapter *peft.Adapter
	if cfg.Model.HF != "" {
		var stops []int32
		if policy, weights, stops, err = hfPolicy(cfg, tok, log); err != nil {
			return nil, err
		}
		if adapter, err = readAdapter(cfg, log); err != nil {
			if weights != nil {
				weights.Close()
			}
			return nil, err
		}
		if weights != nil {
			defer weights.Close()
		}
		s.Trainer.StopTokens = stops
	}
	if cfg.Preset != "none" {
		log.Info().Str("preset", cfg.Preset).Strs("set", cfg.PresetApplied).Msg("preset: these keys took the preset's values (every other key is as configured)")
	}
	// The memory estimate, before anything of the run's size is allocated.
	est := estimateRun(cfg, s.Trainer, policy, needs.ValueHeads)
	limit, limitWhat, err := MemoryLimit()
	if err != nil {
		return nil, err
	}
	log.Info().Float64("estimate_gb", est.Total()/1e9).Float64("limit_gb", limit/1e9).Str("largest_pass", est.Largest().Name).
		Msg("memory estimate: " + est.String())
	if err := CheckMemory(est, limit, limitWhat); err != nil {
		return nil, err
	}
	s.Backend, err = xla.New(xla.Options{
		Engine: cfg.Backend.Engine, PJRTPlugin: cfg.Backend.PJRTPlugin, Policy: policy, HFWeights: weights, Adapter: adapter,
		ValueHeads: needs.ValueHeads, Seed: cfg.Seed, ActorLR: cfg.Train.ActorLR, CriticLR: cfg.Train.CriticLR,
		MaxGradNorm: cfg.Train.MaxGradNorm, PAD: tok.PAD(), EOS: tok.EOS(), GenBF16: cfg.Rollout.BF16(),
	})
	if err != nil {
		return nil, err
	}
	s.Trainer.Backend = s.Backend
	if err := core.CheckPromptLengths(task, s.Backend, cfg.Rollout.MaxResponseTokens, false); err != nil {
		return nil, err
	}
	if len(cfg.Rollout.Servers) > 0 {
		if s.Trainer.Gen, err = remoteGenerator(cfg, s.Backend, s.Strategies, policy.Vocab, tok.EOS(), log); err != nil {
			return nil, err
		}
	}
	log.Info().Str("engine", s.Backend.Engine()).Int("value_heads", needs.ValueHeads).Msg("backend")
	return s, nil
}

// buildRun builds what New builds before the backend: the task (its eval
// sets checked), the algorithm (checked against rollout.n and told the
// verifier's reward levels), the strategies and the trainer, and the run's
// needs. On error nothing is left running.
func buildRun(cfg *trainer.Config, log zerolog.Logger) (_ *Session, _ core.Needs, err error) {
	var needs core.Needs
	task, err := tasks.New(core.NewParams("task", cfg.Task))
	if err != nil {
		return nil, needs, err
	}
	if _, err := (&trainer.Trainer{Cfg: cfg, Task: task}).EvalSets(); err != nil {
		return nil, needs, err
	}
	algo, err := BuildAlgorithm(cfg)
	if err != nil {
		return nil, needs, err
	}
	if err := CheckAlgorithmFits(cfg, algo); err != nil {
		return nil, needs, err
	}
	if u, ok := algo.(core.RewardLevelsUser); ok {
		if lv, ok := task.Verifier().(core.RewardLevels); ok {
			if err := u.UseRewardLevels(lv.Rewards()); err != nil {
				return nil, needs, err
			}
		}
	}
	strats, strategyWeights, err := BuildStrategies(cfg, algo, log)
	if err != nil {
		return nil, needs, err
	}
	s := &Session{Cfg: cfg, Task: task, Algo: algo, Strategies: strats, Log: log}
	s.Trainer = &trainer.Trainer{Cfg: cfg, Task: task, Algo: algo, Strategies: strats, Weights: strategyWeights, Log: log}
	// Shared-memory plugins read the step's columns in place: the trainer
	// allocates them in one arena every such plugin maps.
	arena := plugins.NewArena()
	for _, st := range strats {
		if p, ok := plugins.Of(st); ok && p.UseArena(arena) {
			s.arena, s.Trainer.Alloc = arena, arena
		}
	}
	if needs, err = s.Trainer.Needs(); err != nil {
		s.Close()
		return nil, needs, err
	}
	// A strategy's least group size (a plugin's too: the protocol carries
	// it) binds as the algorithm's does.
	if err = needs.CheckGroupSize(cfg.Rollout.N); err != nil {
		s.Close()
		return nil, needs, err
	}
	return s, needs, nil
}

// CheckConfig checks cfg as New does before it builds the backend: the
// task and its eval sets, the algorithm and its keys, every strategy entry
// (a plugin is started to check its params, and stopped), and what they
// need of each other, so that a config train would refuse is refused
// without building a model (train --print-config).
func CheckConfig(cfg *trainer.Config, log zerolog.Logger) error {
	s, _, err := buildRun(cfg, log)
	if err != nil {
		return err
	}
	s.Close()
	return nil
}

// estimateRun is EstimateMemory for a run of cfg whose trainer t holds
// its task: the largest eval pass is its largest eval set (up to
// eval.max_problems) times eval.k, or the chunk of eval.max_rows that
// goes through at once.
func estimateRun(cfg *trainer.Config, t *trainer.Trainer, policy xla.ModelConfig, valueHeads int) MemoryEstimate {
	evalRows := 0
	if sets, err := t.EvalSets(); err == nil {
		for _, set := range sets {
			n := len(set.Problems)
			if cfg.Eval.MaxProblems > 0 {
				n = min(n, cfg.Eval.MaxProblems)
			}
			for _, k := range []int{cfg.Eval.KFor(set.Name), cfg.Eval.KAt(set.Name, true)} {
				evalRows = max(evalRows, min(n, cfg.Eval.EvalChunk(k))*k)
			}
		}
	}
	return EstimateMemory(cfg, policy, valueHeads, evalRows)
}

// EstimateConfig is the memory estimate of a run of cfg, made without
// starting it: the task is built (its problems read) and model.hf's
// config.json read; the critic is the algorithm's (a strategy that asks
// for value heads is not started, so its heads are not counted).
func EstimateConfig(cfg *trainer.Config) (MemoryEstimate, error) {
	task, err := tasks.New(core.NewParams("task", cfg.Task))
	if err != nil {
		return MemoryEstimate{}, err
	}
	algo, err := BuildAlgorithm(cfg)
	if err != nil {
		return MemoryEstimate{}, err
	}
	t := &trainer.Trainer{Cfg: cfg, Task: task, Algo: algo, Log: zerolog.Nop()}
	needs, err := t.Needs()
	if err != nil {
		return MemoryEstimate{}, err
	}
	tok := task.Tokenizer()
	policy := WithModelOptions(cfg, xla.ModelConfig{Vocab: tok.VocabSize(), Layers: cfg.Model.Layers, DModel: cfg.Model.DModel,
		Heads: cfg.Model.Heads, FF: cfg.Model.FF, MaxLen: cfg.Model.MaxLen})
	if cfg.Model.HF != "" {
		hc, err := hf.LoadConfig(cfg.Model.HF)
		if err != nil {
			return MemoryEstimate{}, fmt.Errorf("config: model.hf: %w", err)
		}
		policy = WithModelOptions(cfg, xla.HFModelConfig(hc, cfg.Model.MaxLen))
	}
	return estimateRun(cfg, t, policy, needs.ValueHeads), nil
}

// remoteGenerator builds the client of rollout.servers: requests carry the
// model's EOS among their stop ids, returned ids are checked against the
// vocabulary, and weight sync writes the backend's policy into
// rollout.weight_sync.dir (WriteServeWeights) and sends the token read from
// the variable rollout.weight_sync.token_env with each reload.
func remoteGenerator(cfg *trainer.Config, b *xla.Backend, strats []core.Strategy, vocab int, eos int32, log zerolog.Logger) (core.Generator, error) {
	if err := core.CheckRemoteNeeds(strats, b); err != nil {
		return nil, err
	}
	rc := cfg.Rollout
	ws := rc.WeightSync
	token := os.Getenv(ws.TokenEnv)
	if token == "" && ws.Every > 0 {
		log.Warn().Str("variable", ws.TokenEnv).Msg("rollout.weight_sync.token_env: the variable is empty; reloads carry no Authorization header")
	}
	log.Info().Strs("servers", rc.Servers).Str("weight_sync_dir", ws.Dir).Int("weight_sync_every", ws.Every).
		Float64("tis_cap", rc.TISCap).Msg("remote generation")
	return rollout.New(rollout.Options{Servers: rc.Servers, Model: rc.ServerModel, Timeout: rc.ServerTimeout,
		Retries: rc.ServerRetries, EOS: eos, Vocab: vocab, SyncDir: ws.Dir, SyncEndpoint: ws.Endpoint, SyncToken: token,
		Export: func(dir string) error { return b.WriteServeWeights(dir, cfg.Model.HF) }, Log: log})
}

// Close stops the plugin processes and releases the backend.
func (s *Session) Close() {
	core.CloseAll(s.Strategies)
	s.arena.Close()
	if s.Backend != nil {
		s.Backend.Close()
	}
}

// LoadPolicy loads a checkpoint or base policy directory into the backend,
// after checking its files against its manifest when it has one.
func (s *Session) LoadPolicy(dir string) error {
	if err := trainer.VerifyIfManifest(dir); err != nil {
		return err
	}
	return s.Backend.Load(dir)
}

// BuildAlgorithm reads the `algorithm:` mapping (name plus its keys).
func BuildAlgorithm(cfg *trainer.Config) (core.Algorithm, error) {
	p := core.NewParams("algorithm", cfg.Algorithm)
	name := p.String("name", "grpo")
	if err := p.Err(); err != nil {
		return nil, err
	}
	algo, err := core.NewAlgorithm(name, p)
	return algo, trainer.SuggestKey(err)
}

// CheckAlgorithmFits checks the algorithm's needs (core.AlgorithmNeeds)
// against the rest of the config: a least group size against rollout.n
// (grpo_passk draws subsets of algorithm.k of each group). (cde-run shape
// does not call it: there the file's groups count, and the algorithm
// checks each.)
func CheckAlgorithmFits(cfg *trainer.Config, algo core.Algorithm) error {
	n, err := core.RunNeeds(algo, nil)
	if err != nil {
		return err
	}
	return n.CheckGroupSize(cfg.Rollout.N)
}

// BuildStrategies builds every `strategies:` entry in order: a registered
// strategy by `name`, or an out-of-process one by `plugin` (PluginStrategy),
// and returns with them each entry's `weight:` schedule (nil where the
// entry has none), which the trainer applies (trainer.Trainer.Weights): the
// strategies themselves never see it. On error, plugin processes already
// started are stopped.
func BuildStrategies(cfg *trainer.Config, algo core.Algorithm, log zerolog.Logger) (out []core.Strategy, weights []core.Schedule, err error) {
	defer func() {
		if err != nil {
			core.CloseAll(out)
			out, weights = nil, nil
		}
	}()
	for i, entry := range cfg.Strategies {
		if _, ok := entry["plugin"]; ok {
			s, w, err := PluginStrategy(entry, i, algo, log)
			if err != nil {
				return out, nil, err
			}
			out, weights = append(out, s), append(weights, w)
			continue
		}
		p := core.NewParams(fmt.Sprintf("strategies[%d]", i), entry)
		name := p.String("name", "")
		var w core.Schedule
		if p.Has("weight") {
			w = core.ParseSchedule(p.Sub("weight"))
		}
		if err := p.Err(); err != nil {
			return out, nil, err
		}
		if name == "" {
			return out, nil, fmt.Errorf("config: strategies[%d].name: required (known: %s)", i, strings.Join(core.Strategies(), ", "))
		}
		s, err := core.NewStrategy(name, p, algo)
		if err != nil {
			return out, nil, trainer.SuggestKey(err)
		}
		if core.HooksOf(s).Unweighted && w != nil {
			return out, nil, fmt.Errorf("config: strategies[%d].weight: %s takes no weight (a schedule would not scale its output meaningfully)", i, name)
		}
		out, weights = append(out, s), append(weights, w)
	}
	return out, weights, nil
}

// PluginStrategy builds the plugin-backed strategy of config entry
// strategies[index]:
//
//	{plugin: PATH, params: {...}, weight: {...}, sha256: HEX, start_timeout: 10s, call_timeout: 30s, transport: auto}
//
// Every key is checked (an unknown one is an error naming
// strategies[index].KEY); params go to the plugin's factory, which checks
// them as strategies[index].params.KEY. weight is a schedule as in every
// strategy entry (core.ParseSchedule), returned for the trainer to apply
// (nil when the entry has none), as it does every strategy's. The plugin
// process is started, configured and killed again on any error.
func PluginStrategy(entry map[string]any, index int, algo core.Algorithm, log zerolog.Logger) (core.Strategy, core.Schedule, error) {
	p := core.NewParams(fmt.Sprintf("strategies[%d]", index), entry)
	path := p.String("plugin", "")
	p.Check(path != "", "plugin", "want the path of a plugin executable")
	params := p.Map("params")
	var weight core.Schedule
	if p.Has("weight") {
		weight = core.ParseSchedule(p.Sub("weight"))
	}
	sum := p.String("sha256", "")
	start := p.Duration("start_timeout", plugins.DefaultStartTimeout)
	call := p.Duration("call_timeout", plugins.DefaultCallTimeout)
	transport := p.String("transport", plugins.TransportAuto)
	p.Check(transport == plugins.TransportAuto || transport == plugins.TransportMessages, "transport",
		"want %s (shared memory where the plugin can map it) or %s (always the gRPC messages)", plugins.TransportAuto, plugins.TransportMessages)
	if err := p.Finish(); err != nil {
		return nil, nil, err
	}
	s, err := plugins.Open(plugins.Config{Path: path, Params: params, ParamsPath: fmt.Sprintf("strategies[%d].params", index),
		Algorithm: algo, SHA256: sum, StartTimeout: start, CallTimeout: call, Transport: transport, Log: log})
	if err != nil {
		return nil, nil, err
	}
	return s, weight, nil
}

// hfPolicy reads model.hf: the architecture from its config.json and, unless
// model.checkpoint is "" (random weights) or a cde checkpoint path, its
// safetensors weights. The task's tokenizer must fit the model's vocabulary.
func hfPolicy(cfg *trainer.Config, tok core.Tokenizer, log zerolog.Logger) (xla.ModelConfig, *safetensors.Set, []int32, error) {
	dir := cfg.Model.HF
	hc, err := hf.LoadConfig(dir)
	if err != nil {
		return xla.ModelConfig{}, nil, nil, fmt.Errorf("config: model.hf: %w", err)
	}
	if tok.VocabSize() > hc.Vocab {
		return xla.ModelConfig{}, nil, nil, fmt.Errorf("config: model.hf: %s has a vocabulary of %d, the task's tokenizer %d tokens (set task.tokenizer to the model directory)",
			dir, hc.Vocab, tok.VocabSize())
	}
	stops := StopTokens(hc, int(tok.EOS()), log)
	pc := WithModelOptions(cfg, xla.HFModelConfig(hc, cfg.Model.MaxLen))
	if err := pc.Validate(); err != nil {
		return xla.ModelConfig{}, nil, nil, err
	}
	if cfg.Model.Checkpoint != "auto" {
		return pc, nil, stops, nil
	}
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		return xla.ModelConfig{}, nil, nil, fmt.Errorf("config: model.hf: %w", err)
	}
	return pc, set, stops, nil
}

// WithModelOptions is pc with the run's model options that are not sizes:
// model.recompute and model.lora (the adapters, which need a Hugging Face
// pc).
func WithModelOptions(cfg *trainer.Config, pc xla.ModelConfig) xla.ModelConfig {
	pc.Recompute = cfg.Model.Recompute
	if l := cfg.Model.LoRA; l != nil {
		pc.LoRA = xla.LoRAOf(l.Rank, l.Alpha, l.Dropout, l.TargetModules)
		pc.BaseBF16 = l.BaseDType == "bfloat16"
	}
	return pc
}

// readAdapter reads model.adapter (nil when unset) and logs what it does:
// with model.lora the adapters start from it, without it is merged into
// the weights.
func readAdapter(cfg *trainer.Config, log zerolog.Logger) (*peft.Adapter, error) {
	if cfg.Model.Adapter == "" {
		return nil, nil
	}
	ad, err := peft.Read(cfg.Model.Adapter)
	if err != nil {
		return nil, fmt.Errorf("config: model.adapter: %w", err)
	}
	how := "merged into the weights (full fine-tuning from base + adapter)"
	if cfg.Model.LoRA != nil {
		how = "the adapters start from it"
	}
	log.Info().Str("adapter", cfg.Model.Adapter).Int("r", ad.Config.Rank).Float64("alpha", ad.Config.Alpha).
		Strs("target_modules", ad.Config.Targets).Int("modules", len(ad.A)).Msg("PEFT adapter: " + how)
	return ad, nil
}

// StopTokens are a Hugging Face model's stop ids by Hugging Face's rule
// (generation_config.json's eos_token_id, else config.json's, else the
// tokenizer's eos_token; hf.Config.StopIDs), logged with where they came
// from. Training, generate and serve all stop there, as transformers and
// vLLM do. The backend also stops at the tokenizer's eos_token (its EOS),
// which the model's files name among these ids in the checkpoints we know.
func StopTokens(hc *hf.Config, tokenizerEOS int, log zerolog.Logger) []int32 {
	ids, from := hc.StopIDs(tokenizerEOS)
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	log.Info().Ints("stop_ids", ids).Str("from", from).Msg("stop tokens")
	return out
}
