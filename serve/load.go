package serve

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/backends/xla"
	"github.com/cde-rl/cde/backends/xla/hf"
	"github.com/cde-rl/cde/backends/xla/peft"
	"github.com/cde-rl/cde/backends/xla/safetensors"
	"github.com/cde-rl/cde/session"
	"github.com/cde-rl/cde/tasks"
	"github.com/cde-rl/cde/tokenizer"
	"github.com/cde-rl/cde/trainer"
)

// LoadOptions names the model to serve: a Hugging Face model directory
// (Model) or a cde checkpoint (Checkpoint), exactly one of them.
type LoadOptions struct {
	// Model is a Hugging Face model directory: config.json, the
	// safetensors weights, tokenizer.json and tokenizer_config.json (its
	// eos_token is where sampling stops).
	Model string
	// Adapter, with Model, is a PEFT LoRA adapter directory merged into
	// its weights ("" = none).
	Adapter string
	// Checkpoint is one of
	//   - a run directory (config.yaml, checkpoints/step-N/): its newest
	//     complete checkpoint, or step Step;
	//   - a checkpoint directory of a run (RUN/checkpoints/step-N, holding
	//     policy.gob), read with RUN/config.yaml;
	//   - any directory holding a policy.gob of cde's own transformer
	//     (a pretrained base, say): the sizes are those recorded in the
	//     file, the tokenizer is the character tokenizer.
	Checkpoint string
	Step       int    // with a run directory: the checkpoint step (< 0: the newest)
	Engine     string // backend.engine: auto, cpu, go, xla:...
	// MaxLen, for Model, is the longest prompt + completion served (0:
	// max_position_embeddings, at most 8192).
	MaxLen int
	// Log takes the warnings of loading (a tokenizer larger than the
	// model's vocabulary, a chat template cde does not recognise).
	Log zerolog.Logger
}

// Load builds the model o names.
func Load(o LoadOptions) (*Model, error) {
	if (o.Model == "") == (o.Checkpoint == "") {
		return nil, errors.New("give exactly one of --model DIR (Hugging Face) and --checkpoint DIR (cde)")
	}
	if o.Model != "" {
		if o.Step >= 0 {
			return nil, errors.New("--step applies to --checkpoint RUN_DIR")
		}
		return loadHF(o)
	}
	if o.Adapter != "" {
		return nil, errors.New("--adapter applies to --model (a LoRA run's adapters are in its checkpoint)")
	}
	return loadCheckpoint(o)
}

// loadHF builds a Hugging Face model directory's policy with its weights.
func loadHF(o LoadOptions) (*Model, error) {
	tok, err := tokenizer.Load(o.Model)
	if err != nil {
		return nil, err
	}
	if tok.EOS() < 0 {
		return nil, fmt.Errorf("%s names no eos_token in tokenizer_config.json", o.Model)
	}
	hc, err := hf.LoadConfig(o.Model)
	if err != nil {
		return nil, err
	}
	maxLen := o.MaxLen
	if maxLen == 0 {
		maxLen = min(hc.MaxPositions, 8192)
	}
	pc := xla.HFModelConfig(hc, maxLen)
	if err := pc.Validate(); err != nil {
		return nil, fmt.Errorf("--max-len: %w", err)
	}
	set, err := safetensors.OpenDir(o.Model)
	if err != nil {
		return nil, err
	}
	defer set.Close()
	var ad *peft.Adapter
	if o.Adapter != "" {
		if ad, err = peft.Read(o.Adapter); err != nil {
			return nil, err
		}
	}
	pad := tok.PAD()
	if pad < 0 {
		pad = tok.EOS()
	}
	b, err := xla.New(xla.Options{Engine: o.Engine, Policy: pc, Seed: 1, PAD: pad, EOS: tok.EOS(), HFWeights: set, Adapter: ad})
	if err != nil {
		return nil, err
	}
	m := &Model{Engine: b, Tokenizer: tok, Vocab: hc.Vocab, MaxLen: maxLen, EOS: tok.EOS(),
		ExtraEOS: extraEOS(hc, tok.EOS()), TextBOS: tok.BOS(), Close: b.Close}
	m.Template, m.TemplateErr = tasks.DetectChatTemplate(o.Model)
	m.warn(o.Log)
	return m, nil
}

// warn logs what a client of m may trip on: a tokenizer with more tokens
// than the model's vocabulary (a text prompt holding one of those tokens
// is refused), and a chat template cde cannot render.
func (m *Model) warn(log zerolog.Logger) {
	if n := m.Tokenizer.VocabSize(); n > m.Vocab {
		log.Warn().Int("tokenizer", n).Int("model_vocab", m.Vocab).
			Msg("the tokenizer has more tokens than the model's vocabulary: a text prompt holding a token past the vocabulary is refused (400)")
	}
	if m.TemplateErr != nil {
		log.Warn().Err(m.TemplateErr).Msg("/v1/chat/completions is off: the model's chat template is not one cde renders")
	} else if m.Template.Name == tasks.ChatNone {
		log.Info().Msg("/v1/chat/completions is off: the model has no chat template (text and token-id prompts work on /v1/completions)")
	}
}

// extraEOS are the model's stop ids by Hugging Face's rule (hf.Config.StopIDs)
// other than the tokenizer's eos_token, which also end a completion, as in vLLM.
func extraEOS(hc *hf.Config, eos int32) []int32 {
	var out []int32
	stops, _ := hc.StopIDs(int(eos)) // Hugging Face's rule, as training and generate use
	for _, id := range stops {
		if int32(id) != eos && id >= 0 && id < hc.Vocab && !slices.Contains(out, int32(id)) {
			out = append(out, int32(id))
		}
	}
	return out
}

// loadCheckpoint resolves o.Checkpoint (see LoadOptions) and loads it.
func loadCheckpoint(o LoadOptions) (*Model, error) {
	dir := o.Checkpoint
	if _, err := os.Stat(filepath.Join(dir, "config.yaml")); err == nil {
		cfg, err := session.ResumeConfig(dir, nil)
		if err != nil {
			return nil, err
		}
		ckpt := ""
		if o.Step < 0 {
			if ckpt, err = trainer.LatestCheckpoint(dir); err != nil {
				return nil, err
			}
			if ckpt == "" {
				return nil, fmt.Errorf("%s has no complete checkpoint", dir)
			}
		} else {
			ckpt = filepath.Join(dir, "checkpoints", fmt.Sprintf("step-%06d", o.Step))
		}
		if err := trainer.VerifyCheckpoint(ckpt); err != nil {
			return nil, err
		}
		if err := resolveRunPaths(dir, cfg); err != nil {
			return nil, err
		}
		return fromConfig(cfg, o.Engine, ckpt, o.Log)
	}
	if _, err := os.Stat(filepath.Join(dir, "policy.gob")); err != nil {
		return nil, fmt.Errorf("--checkpoint %s: neither a run directory (config.yaml) nor a checkpoint (policy.gob)", dir)
	}
	if o.Step >= 0 {
		return nil, fmt.Errorf("--step applies to a run directory; %s is one checkpoint", dir)
	}
	if err := trainer.VerifyIfManifest(dir); err != nil {
		return nil, err
	}
	run := filepath.Dir(filepath.Dir(filepath.Clean(dir)))
	if filepath.Base(filepath.Dir(filepath.Clean(dir))) == "checkpoints" {
		if _, err := os.Stat(filepath.Join(run, "config.yaml")); err == nil {
			cfg, err := session.ResumeConfig(run, nil)
			if err != nil {
				return nil, err
			}
			if err := resolveRunPaths(run, cfg); err != nil {
				return nil, err
			}
			return fromConfig(cfg, o.Engine, dir, o.Log)
		}
	}
	pc, err := xla.ReadPolicyConfig(dir)
	if err != nil {
		return nil, err
	}
	if pc.HF != nil {
		return nil, fmt.Errorf("%s/policy.gob is a Hugging Face model's: give its run directory (whose config.yaml names the tokenizer) or an exported model directory with --model", dir)
	}
	tok := tasks.NewCharTokenizer()
	if pc.Vocab != tok.VocabSize() {
		return nil, fmt.Errorf("%s/policy.gob has a vocabulary of %d, the character tokenizer %d: give its run directory", dir, pc.Vocab, tok.VocabSize())
	}
	b, err := xla.New(xla.Options{Engine: o.Engine, Policy: pc, Seed: 1, PAD: tok.PAD(), EOS: tok.EOS()})
	if err != nil {
		return nil, err
	}
	if err := b.LoadPolicyWeights(dir); err != nil {
		b.Close()
		return nil, err
	}
	m := &Model{Engine: b, Tokenizer: tok, Vocab: pc.Vocab, MaxLen: pc.MaxLen, EOS: tok.EOS(), TextBOS: tok.BOS(),
		Template: tasks.ChatTemplate{Name: tasks.ChatNone}, Close: b.Close}
	m.warn(o.Log)
	return m, nil
}

// FromConfig builds the policy a run config describes (model.*, the task's
// tokenizer and chat template, model.hf's architecture) on engine, and
// loads the weights of checkpoint ckpt (policy.gob) into it; ckpt "" keeps
// the random initial weights drawn from cfg.seed (tests). The task's
// problems are not read: serving needs only its tokenizer.
func FromConfig(cfg *trainer.Config, engine, ckpt string) (*Model, error) {
	return fromConfig(cfg, engine, ckpt, zerolog.Nop())
}

func fromConfig(cfg *trainer.Config, engine, ckpt string, log zerolog.Logger) (*Model, error) {
	tok, tpl, err := tasks.TokenizerOf(cfg.Task)
	if err != nil {
		return nil, err
	}
	pc := xla.ModelConfig{Vocab: tok.VocabSize(), Layers: cfg.Model.Layers, DModel: cfg.Model.DModel,
		Heads: cfg.Model.Heads, FF: cfg.Model.FF, MaxLen: cfg.Model.MaxLen}
	var extra []int32
	if cfg.Model.HF != "" {
		hc, err := hf.LoadConfig(cfg.Model.HF)
		if err != nil {
			return nil, fmt.Errorf("config: model.hf: %w", err)
		}
		pc = xla.HFModelConfig(hc, cfg.Model.MaxLen)
		extra = extraEOS(hc, tok.EOS())
	}
	var weights *safetensors.Set
	if l := cfg.Model.LoRA; l != nil && cfg.Model.HF != "" {
		// A LoRA run's checkpoint holds its adapters; the frozen weights
		// are model.hf's.
		pc.LoRA = xla.LoRAOf(l.Rank, l.Alpha, l.Dropout, l.TargetModules)
		if weights, err = safetensors.OpenDir(cfg.Model.HF); err != nil {
			return nil, fmt.Errorf("config: model.hf: %w", err)
		}
		defer weights.Close()
	}
	if err := pc.Validate(); err != nil {
		return nil, err
	}
	pad := tok.PAD()
	if pad < 0 {
		pad = tok.EOS()
	}
	b, err := xla.New(xla.Options{Engine: engine, PJRTPlugin: cfg.Backend.PJRTPlugin, Policy: pc, Seed: cfg.Seed,
		PAD: pad, EOS: tok.EOS(), HFWeights: weights})
	if err != nil {
		return nil, err
	}
	if ckpt != "" {
		if err := b.LoadPolicyWeights(ckpt); err != nil {
			b.Close()
			return nil, err
		}
	}
	// A text prompt gets the model's BOS as Hugging Face's tokenizer adds
	// it (add_special_tokens); the task's tokenizer leaves it to the chat
	// template.
	textBOS := tok.BOS()
	if mb, ok := tok.(interface{ ModelBOS() int32 }); ok {
		textBOS = mb.ModelBOS()
	}
	m := &Model{Engine: b, Tokenizer: tok, Vocab: pc.Vocab, MaxLen: pc.MaxLen, EOS: tok.EOS(), ExtraEOS: extra,
		TextBOS: textBOS, Template: tpl, Close: b.Close}
	m.warn(log)
	return m, nil
}

// resolveRunPaths makes the run's relative paths that serving reads
// (task.tokenizer, model.hf) findable from any working directory. A
// relative path in RUN/config.yaml is relative to the directory the run
// was started from, which the file does not record: it is taken as given
// when it exists from the working directory, else from the nearest
// directory above RUN where it exists (a run made in runs/NAME, or a bench
// arm-seed in OUT/runs/ARM/seed-N, lies below where it was started).
func resolveRunPaths(run string, cfg *trainer.Config) error {
	abs, err := filepath.Abs(run)
	if err != nil {
		return err
	}
	find := func(key, p string) (string, error) {
		if p == "" || filepath.IsAbs(p) {
			return p, nil
		}
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		for d := filepath.Dir(abs); ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, p)); err == nil {
				return filepath.Join(d, p), nil
			}
			if d == filepath.Dir(d) {
				break
			}
		}
		return "", fmt.Errorf("%s/config.yaml: %s: %s is relative to the directory the run was started from, and it is found neither from the working directory nor from any directory above the run; serve from that directory, or give the model directory with --model",
			run, key, p)
	}
	if cfg.Model.HF, err = find("model.hf", cfg.Model.HF); err != nil {
		return err
	}
	if tn, ok := cfg.Task["tokenizer"].(string); ok && tn != "char" {
		r, err := find("task.tokenizer", tn)
		if err != nil {
			return err
		}
		task := make(map[string]any, len(cfg.Task))
		for k, v := range cfg.Task {
			task[k] = v
		}
		task["tokenizer"] = r
		cfg.Task = task
	}
	return nil
}
