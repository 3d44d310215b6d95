package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/assets"
	"github.com/cde-rl/cde/backends/xla/safetensors"
	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/internal/graceful"
	"github.com/cde-rl/cde/tasks"
	"github.com/cde-rl/cde/trainer"
)

// pretrainSeed is the seed of the warm start: pretrain.seed, or the run seed.
func pretrainSeed(cfg *trainer.Config) uint64 {
	if cfg.Pretrain.Seed != 0 {
		return cfg.Pretrain.Seed
	}
	return cfg.Seed
}

// BaseKey identifies a supervised base: the task config and a sample of its
// problems (so a change of solution format makes a new base), the model
// sizes, the pretrain settings and seed, and the eval temperature of its
// stopping checks. model.checkpoint: auto keeps it in pretrain.dir/<key>.
func BaseKey(cfg *trainer.Config) string {
	pre := cfg.Pretrain
	pre.Dir = "" // where bases are kept is not what they are
	// The seed it was made with counts once, as "seed" below: pretrain.seed
	// 1 and a run of seed 1 without it make the same base (the shipped one,
	// for train's default task and model).
	pre.Seed = 0
	raw := map[string]any{"task": cfg.Task, "model": cfg.Model, "pretrain": pre,
		"eval_temperature": cfg.Eval.Temperature, "seed": pretrainSeed(cfg)}
	if task, err := tasks.New(core.NewParams("task", cfg.Task)); err == nil {
		raw["sample"] = task.SampleTrain(rand.New(rand.NewPCG(1, 1)), 8)
	}
	data, _ := json.Marshal(raw)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:6])
}

// BaseAvailable reports whether the model.checkpoint: auto base of cfg is
// already there (made before in pretrain.dir) or shipped in the binary
// (assets/base), so that ResolveBase will not run the warm start.
func BaseAvailable(cfg *trainer.Config) bool {
	if cfg.Model.Checkpoint != "auto" || cfg.Model.HF != "" {
		return true
	}
	key := BaseKey(cfg)
	if _, err := os.Stat(filepath.Join(cfg.Pretrain.Dir, key, "policy.gob")); err == nil {
		return true
	}
	return assets.HasBase(key)
}

// ResolveBase returns the directory of the base policy for
// model.checkpoint: "" for none, a path as given (checked against its
// manifest when it has one), or for "auto" pretrain.dir/<key>: made there
// from the copy embedded in the binary when cde ships that base
// (assets/base), else with the supervised warm start when missing.
func ResolveBase(ctx context.Context, cfg *trainer.Config, log zerolog.Logger, out Output) (string, error) {
	switch cfg.Model.Checkpoint {
	case "":
		return "", nil
	case "auto":
		if cfg.Model.HF != "" {
			log.Info().Str("model", cfg.Model.HF).Msg("base policy: the Hugging Face model's own weights")
			return "", nil
		}
	default:
		if _, err := os.Stat(filepath.Join(cfg.Model.Checkpoint, "policy.gob")); err != nil {
			return "", fmt.Errorf("config: model.checkpoint: %w", err)
		}
		if err := trainer.VerifyIfManifest(cfg.Model.Checkpoint); err != nil {
			return "", fmt.Errorf("config: model.checkpoint: %w", err)
		}
		return cfg.Model.Checkpoint, nil
	}
	key := BaseKey(cfg)
	dir := filepath.Join(cfg.Pretrain.Dir, key)
	if _, err := os.Stat(filepath.Join(dir, "policy.gob")); err == nil {
		if err := trainer.VerifyIfManifest(dir); err != nil {
			return "", fmt.Errorf("base policy: %w", err)
		}
		log.Info().Str("base", dir).Msg("using pretrained base policy")
		return dir, nil
	}
	if assets.HasBase(key) {
		if err := assets.ExtractBase(key, dir); err != nil {
			return "", err
		}
		if err := trainer.VerifyIfManifest(dir); err != nil {
			return "", fmt.Errorf("shipped base policy: %w", err)
		}
		log.Info().Str("base", dir).Msg("using the shipped base policy (assets/base)")
		return dir, nil
	}
	log.Info().Str("base", dir).Msg("no base policy yet: running the supervised warm start (cde-run pretrain)")
	if err := Pretrain(ctx, cfg, dir, log, out); err != nil {
		return "", err
	}
	return dir, nil
}

// Pretrain makes a base policy in dir with the supervised warm start
// (trainer.Trainer.Pretrain). It is written under a temporary name with a
// manifest and renamed, so an interrupted warm start leaves nothing
// half-made; when another process made dir first, that one is kept.
func Pretrain(ctx context.Context, cfg *trainer.Config, dir string, log zerolog.Logger, out Output) error {
	pcfg := *cfg
	pcfg.Algorithm = map[string]any{"name": "grpo"}
	pcfg.Strategies = nil
	pcfg.Model.Checkpoint = ""
	pcfg.Eval.K, pcfg.Eval.MaxProblems, pcfg.Eval.SetK = cfg.Pretrain.EvalK, cfg.Pretrain.EvalMaxProblems, nil
	pcfg.Seed = pretrainSeed(cfg)
	s, err := New(&pcfg, log)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := core.CheckPromptLengths(s.Task, s.Backend, cfg.Rollout.MaxResponseTokens, true); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	s.Trainer.Progress, s.Trainer.TTY = out.W, out.TTY
	start := time.Now()
	// Cancelled from here, the warm start stops at a step and leaves
	// nothing (before, a command's first signal may end it at once).
	graceful.Begin(ctx)
	res, err := s.Trainer.Pretrain(ctx)
	if err != nil {
		return err
	}
	tmp := dir + fmt.Sprintf(".tmp%d", os.Getpid())
	defer os.RemoveAll(tmp) // gone once renamed; a leftover on any error
	if err := s.Backend.Save(tmp); err != nil {
		return err
	}
	info, _ := json.MarshalIndent(map[string]any{"steps": res.Steps, "val_avg": res.Acc, "metrics": res.Metrics,
		"seconds": time.Since(start).Seconds()}, "", "  ")
	if err := os.WriteFile(filepath.Join(tmp, "pretrain.json"), info, 0o644); err != nil {
		return err
	}
	if err := trainer.WriteManifest(tmp, 0); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, "policy.gob")); statErr == nil {
			return nil // another process made it first
		}
		return err
	}
	log.Info().Str("base", dir).Int("steps", res.Steps).Float64("val_avg", res.Acc).
		Dur("took", time.Since(start).Round(time.Second)).Msg("base policy ready")
	return nil
}

// ExportHF writes the policy of run's checkpoint (step, or the newest
// complete one when step < 0) as a Hugging Face model directory out (see
// xla.Backend.ExportHF; a LoRA run's adapters are merged in); the run must
// have trained a model.hf model.
func ExportHF(run string, step int, out string, dtype safetensors.DType, log zerolog.Logger) error {
	s, cfg, err := openRunCheckpoint(run, step, log)
	if err != nil {
		return err
	}
	defer s.Close()
	return s.Backend.ExportHF(cfg.Model.HF, out, dtype)
}

// ExportAdapter writes the adapters of a LoRA run's checkpoint (step, or
// the newest complete one when step < 0) as a PEFT adapter directory out
// (adapter_config.json, adapter_model.safetensors in float32), with
// model.hf as its base_model_name_or_path.
func ExportAdapter(run string, step int, out string, log zerolog.Logger) error {
	s, cfg, err := openRunCheckpoint(run, step, log)
	if err != nil {
		return err
	}
	defer s.Close()
	return s.Backend.ExportAdapter(out, cfg.Model.HF)
}

// IsLoRARun reports whether run trained adapters (model.lora).
func IsLoRARun(run string) (bool, error) {
	cfg, err := ResumeConfig(run, nil)
	if err != nil {
		return false, err
	}
	return cfg.Model.LoRA != nil, nil
}

// openRunCheckpoint builds run's model and loads its checkpoint (step, or
// the newest complete one when step < 0).
func openRunCheckpoint(run string, step int, log zerolog.Logger) (*Session, *trainer.Config, error) {
	cfg, err := ResumeConfig(run, nil)
	if err != nil {
		return nil, nil, err
	}
	if cfg.Model.HF == "" {
		return nil, nil, fmt.Errorf("export: %s trained cde's own transformer (no model.hf); only Hugging Face models export", run)
	}
	ckpt := ""
	if step < 0 {
		if ckpt, err = trainer.LatestCheckpoint(run); err != nil {
			return nil, nil, err
		}
		if ckpt == "" {
			return nil, nil, fmt.Errorf("export: %s has no complete checkpoint", run)
		}
	} else {
		ckpt = filepath.Join(run, "checkpoints", fmt.Sprintf("step-%06d", step))
	}
	if cfg.Model.LoRA == nil {
		cfg.Model.Checkpoint = "" // the checkpoint's weights replace any start
	} // else the checkpoint holds the adapters, and model.hf the frozen weights
	if err := trainer.VerifyCheckpoint(ckpt); err != nil {
		return nil, nil, err
	}
	s, err := New(cfg, log)
	if err != nil {
		return nil, nil, err
	}
	if err := s.Backend.Load(ckpt); err != nil {
		s.Close()
		return nil, nil, err
	}
	return s, cfg, nil
}
