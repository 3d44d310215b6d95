package trainer

import (
	"fmt"
	"maps"
	"math"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/internal/tensorboard"
)

// This file decodes the merged key tree into a Config, section by section,
// validating each key as it is read (section, decodeConfig).

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

// The readers check the value's kind first, so that a wrong one is worded
// for the config's writer (DescribeValue), not by its Go type.
func (s section) Int(k string) int {
	if !s.need(k) || !s.checkKind(k, "integer") {
		return 0
	}
	return s.Params.Int(k, 0)
}

func (s section) Float(k string) float64 {
	if !s.need(k) || !s.checkKind(k, "number") {
		return 0
	}
	return s.Params.Float(k, 0)
}

func (s section) Bool(k string) bool {
	if !s.need(k) || !s.checkKind(k, "boolean") {
		return false
	}
	return s.Params.Bool(k, false)
}

func (s section) String(k string) string {
	if !s.need(k) || !s.checkKind(k, "string") {
		return ""
	}
	return s.Params.String(k, "")
}

func (s section) Duration(k string) time.Duration {
	if !s.need(k) || !s.checkKind(k, "duration") {
		return 0
	}
	return s.Params.Duration(k, 0)
}

func (s section) OneOf(k string, c ...string) string {
	if !s.need(k) || !s.checkKind(k, "string") {
		return ""
	}
	return s.Params.OneOf(k, "", c...)
}

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
	if s.need(k) {
		s.checkMapping(k)
	}
	return section{s.Params.Sub(k)}
}

// Map is core.Params.Map with a wrong value worded by DescribeValue.
func (s section) Map(k string) map[string]any {
	s.checkMapping(k)
	return s.Params.Map(k)
}

// checkMapping records an error naming k when its value is neither a
// mapping nor null.
func (s section) checkMapping(k string) {
	if v, ok := s.Raw(k); ok && v != nil {
		if _, isMap := v.(map[string]any); !isMap {
			s.Fail(k, "want a mapping, got %s", DescribeValue(v))
		}
	}
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
		return nil, SuggestKey(err)
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
		p.Fail(k, "want a list of strings, got %s", DescribeValue(v))
		return nil
	}
	out := make([]string, 0, len(list))
	for i, x := range list {
		s, ok := x.(string)
		if !ok {
			p.Fail(k, "element %d: want a string, got %s", i, DescribeValue(x))
			return nil
		}
		out = append(out, s)
	}
	return out
}

// decodeRolloutSection reads rollout (after model: max_response_tokens must fit max_len).
func decodeRolloutSection(r section, c *Config) {
	c.Rollout = RolloutConfig{N: r.Int("n"), Temperature: r.Float("temperature"), MaxResponseTokens: r.Int("max_response_tokens"),
		MaxRows: r.Int("max_rows"), DType: r.String("dtype")}
	r.Check(c.Rollout.DType == "float32" || c.Rollout.DType == "bfloat16", "dtype", "want float32 or bfloat16, got %q", c.Rollout.DType)
	r.Check(!c.Rollout.BF16() || c.Model.HF != "", "dtype",
		"bfloat16 needs a Hugging Face policy (model.hf): cde's own small model generates in float32")
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
	// The loss's own keys, read by its factory: a refusal names
	// train.policy_loss_params.KEY (recorded on lp, so t.Finish reports it).
	c.Train.PolicyLossParams = t.Params.Map("policy_loss_params")
	if lp := t.Sub("policy_loss_params"); t.Err() == nil {
		if _, err := core.NewPolicyLoss(c.Train.PolicyLoss, lp.Params); err != nil && lp.Err() == nil && lp.Finish() == nil {
			t.Fail("policy_loss_params", "%v", err) // not a key's error: the loss's own
		}
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
			p.Fail("strategies", "want a list of mappings, got %s", DescribeValue(raw))
		}
		for i, item := range list {
			mm, ok := item.(map[string]any)
			if !ok {
				p.Fail(fmt.Sprintf("strategies[%d]", i), "want a mapping, got %s", DescribeValue(item))
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
	c.Eval.EveryResponses = e.Int("every_responses")
	e.Check(c.Eval.EveryResponses >= 0, "every_responses", "must be >= 0 (0 = off), got %d", c.Eval.EveryResponses)
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
			e.Fail("sets", "want a list of eval set names, got %s", DescribeValue(raw))
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
			e.Fail("set_k", "want a mapping of eval set name to k, got %s", DescribeValue(raw))
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

// decodeRolloutServers reads the remote-generation keys of the rollout
// section into c: servers, server_model, server_timeout, server_retries,
// weight_sync and tis_cap.
func decodeRolloutServers(r section, c *RolloutConfig) {
	if raw := r.Value("servers"); raw != nil {
		list, isList := raw.([]any)
		if !isList {
			r.Fail("servers", "want a list of server URLs, got %s", DescribeValue(raw))
		}
		for i, item := range list {
			key := fmt.Sprintf("servers[%d]", i)
			s, isStr := item.(string)
			if !isStr {
				r.Fail(key, "want a URL such as http://127.0.0.1:8000, got %s", DescribeValue(item))
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
	r.Check(c.TISCap == 0 || len(c.Servers) > 0 || c.BF16(), "tis_cap",
		"needs rollout.servers or rollout.dtype bfloat16: in-process float32 generation samples with the trainer's own weights, so there is no mismatch to correct")
	r.Check(!c.BF16() || len(c.Servers) == 0, "dtype",
		"applies to in-process generation; with rollout.servers each server generates in its own dtype")
}
