package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"gopkg.in/yaml.v3"

	_ "github.com/cde-rl/cde/algos/grpo"
	_ "github.com/cde-rl/cde/algos/ppo"
	"github.com/cde-rl/cde/assets"
	"github.com/cde-rl/cde/backends/xla"
	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/tasks"
)

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func stderrIsTTY() bool {
	return isatty.IsTerminal(os.Stderr.Fd()) || isatty.IsCygwinTerminal(os.Stderr.Fd())
}

// newLogger writes human-readable lines on a terminal (info and above,
// each clearing the progress bar's line first) and JSON elsewhere.
func newLogger(w io.Writer, tty bool) zerolog.Logger {
	if tty {
		out := zerolog.ConsoleWriter{Out: clearLine{w}, TimeFormat: time.TimeOnly}
		return zerolog.New(out).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	}
	return zerolog.New(w).With().Timestamp().Logger()
}

// clearLine erases the terminal line (where a progress bar may stand)
// before each write; the bar is redrawn on its next update.
type clearLine struct{ w io.Writer }

func (c clearLine) Write(p []byte) (int, error) {
	if _, err := io.WriteString(c.w, "\r\x1b[K"); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// session is everything a command needs, built from a Config.
type session struct {
	cfg     *core.Config
	task    core.Task
	algo    core.Algorithm
	strats  []core.Strategy
	backend *xla.Backend
	trainer *core.Trainer
	log     zerolog.Logger
}

// buildAlgorithm reads the `algorithm:` mapping (name plus its keys).
func buildAlgorithm(cfg *core.Config) (core.Algorithm, error) {
	p := core.NewParams("algorithm", cfg.Algorithm)
	name := p.String("name", "grpo")
	if err := p.Err(); err != nil {
		return nil, err
	}
	return core.NewAlgorithm(name, p)
}

// buildStrategies builds every `strategies:` entry in order.
func buildStrategies(cfg *core.Config, algo core.Algorithm, log zerolog.Logger) (out []core.Strategy, err error) {
	defer func() {
		if err != nil { // stop any plugin process already started
			for _, s := range out {
				if c, ok := s.(core.Closer); ok {
					c.Close()
				}
			}
			out = nil
		}
	}()
	for i, entry := range cfg.Strategies {
		if path, ok := entry["plugin"]; ok {
			s, err := pluginStrategy(fmt.Sprint(path), entry, i, algo, log)
			if err != nil {
				return out, err
			}
			out = append(out, s)
			continue
		}
		p := core.NewParams(fmt.Sprintf("strategies[%d]", i), entry)
		name := p.String("name", "")
		if err := p.Err(); err != nil {
			return nil, err
		}
		if name == "" {
			return nil, fmt.Errorf("config: strategies[%d].name: required (known: %s)", i, strings.Join(core.Strategies(), ", "))
		}
		s, err := core.NewStrategy(name, p, algo)
		if err != nil {
			return out, err
		}
		out = append(out, s)
	}
	return out, nil
}

// newSession builds task, algorithm, strategies and backend. It does not
// load any checkpoint.
func newSession(cfg *core.Config, log zerolog.Logger) (_ *session, err error) {
	task, err := tasks.New(core.NewParams("task", cfg.Task))
	if err != nil {
		return nil, err
	}
	if _, err := (&core.Trainer{Cfg: cfg, Task: task}).EvalSets(); err != nil {
		return nil, err
	}
	algo, err := buildAlgorithm(cfg)
	if err != nil {
		return nil, err
	}
	strats, err := buildStrategies(cfg, algo, log)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil { // stop the plugin processes already started
			(&session{strats: strats}).Close()
		}
	}()
	tr := &core.Trainer{Cfg: cfg, Task: task, Algo: algo, Strategies: strats, Log: log}
	needs, err := tr.Needs()
	if err != nil {
		return nil, err
	}
	heads := needs.ValueHeads
	tok := task.Tokenizer()
	be, err := xla.New(xla.Options{
		Engine: cfg.Backend.Engine,
		Policy: xla.ModelConfig{Vocab: tok.VocabSize(), Layers: cfg.Model.Layers, DModel: cfg.Model.DModel,
			Heads: cfg.Model.Heads, FF: cfg.Model.FF, MaxLen: cfg.Model.MaxLen},
		ValueHeads: heads, Seed: cfg.Seed, ActorLR: cfg.Train.ActorLR, CriticLR: cfg.Train.CriticLR,
		MaxGradNorm: cfg.Train.MaxGradNorm, PAD: tok.PAD(), EOS: tok.EOS(),
	})
	if err != nil {
		return nil, err
	}
	tr.Backend = be
	if err := core.CheckPromptLengths(task, be, cfg.Rollout.MaxResponseTokens, false); err != nil {
		be.Close()
		return nil, err
	}
	log.Info().Str("engine", be.Engine()).Int("value_heads", heads).Msg("backend")
	return &session{cfg: cfg, task: task, algo: algo, strats: strats, backend: be, trainer: tr, log: log}, nil
}

func (s *session) Close() {
	for _, st := range s.strats {
		if c, ok := st.(core.Closer); ok {
			c.Close()
		}
	}
	if s.backend != nil {
		s.backend.Close()
	}
}

// pretrainSeed is the seed of the warm start: pretrain.seed, or the run seed.
func pretrainSeed(cfg *core.Config) uint64 {
	if cfg.Pretrain.Seed != 0 {
		return cfg.Pretrain.Seed
	}
	return cfg.Seed
}

// baseKey identifies a supervised base: the task config and a sample of its
// problems (so a change of solution format makes a new base), the model
// sizes, the pretrain settings and seed, and the eval temperature of its
// stopping checks.
func baseKey(cfg *core.Config) string {
	pre := cfg.Pretrain
	pre.Dir = "" // where bases are kept is not what they are
	raw := map[string]any{"task": cfg.Task, "model": cfg.Model, "pretrain": pre,
		"eval_temperature": cfg.Eval.Temperature, "seed": pretrainSeed(cfg)}
	if task, err := tasks.New(core.NewParams("task", cfg.Task)); err == nil {
		raw["sample"] = task.SampleTrain(rand.New(rand.NewPCG(1, 1)), 8)
	}
	data, _ := json.Marshal(raw)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:6])
}

// resolveBase returns the directory of the base policy for model.checkpoint:
// "" for none, a path as given, or for "auto" pretrain.dir/<key>: made there
// from the copy embedded in the binary when cde ships that base
// (assets/base), else with the supervised warm start when missing.
func resolveBase(ctx context.Context, cfg *core.Config, log zerolog.Logger, tty bool) (string, error) {
	switch cfg.Model.Checkpoint {
	case "":
		return "", nil
	case "auto":
	default:
		if _, err := os.Stat(filepath.Join(cfg.Model.Checkpoint, "policy.gob")); err != nil {
			return "", fmt.Errorf("config: model.checkpoint: %w", err)
		}
		if err := core.VerifyIfManifest(cfg.Model.Checkpoint); err != nil {
			return "", fmt.Errorf("config: model.checkpoint: %w", err)
		}
		return cfg.Model.Checkpoint, nil
	}
	key := baseKey(cfg)
	dir := filepath.Join(cfg.Pretrain.Dir, key)
	if _, err := os.Stat(filepath.Join(dir, "policy.gob")); err == nil {
		if err := core.VerifyIfManifest(dir); err != nil {
			return "", fmt.Errorf("base policy: %w", err)
		}
		log.Info().Str("base", dir).Msg("using pretrained base policy")
		return dir, nil
	}
	if assets.HasBase(key) {
		if err := assets.ExtractBase(key, dir); err != nil {
			return "", err
		}
		if err := core.VerifyIfManifest(dir); err != nil {
			return "", fmt.Errorf("shipped base policy: %w", err)
		}
		log.Info().Str("base", dir).Msg("using the shipped base policy (assets/base)")
		return dir, nil
	}
	log.Info().Str("base", dir).Msg("no base policy yet: running the supervised warm start (cde-run pretrain)")
	if err := runPretrain(ctx, cfg, dir, log, tty); err != nil {
		return "", err
	}
	return dir, nil
}

// runPretrain makes a base policy in dir (written under a temporary name and
// renamed, so an interrupted warm start leaves nothing half-made).
func runPretrain(ctx context.Context, cfg *core.Config, dir string, log zerolog.Logger, tty bool) error {
	pcfg := *cfg
	pcfg.Algorithm = map[string]any{"name": "grpo"}
	pcfg.Strategies = nil
	pcfg.Model.Checkpoint = ""
	pcfg.Eval.K, pcfg.Eval.MaxProblems = cfg.Pretrain.EvalK, cfg.Pretrain.EvalMaxProblems
	pcfg.Seed = pretrainSeed(cfg)
	s, err := newSession(&pcfg, log)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := core.CheckPromptLengths(s.task, s.backend, cfg.Rollout.MaxResponseTokens, true); err != nil {
		return err
	}
	s.trainer.Progress, s.trainer.TTY = os.Stderr, tty
	start := time.Now()
	res, err := s.trainer.Pretrain(ctx)
	if err != nil {
		return err
	}
	tmp := dir + fmt.Sprintf(".tmp%d", os.Getpid())
	if err := s.backend.Save(tmp); err != nil {
		return err
	}
	info, _ := json.MarshalIndent(map[string]any{"steps": res.Steps, "val_avg": res.Acc, "metrics": res.Metrics,
		"seconds": time.Since(start).Seconds()}, "", "  ")
	if err := os.WriteFile(filepath.Join(tmp, "pretrain.json"), info, 0o644); err != nil {
		return err
	}
	if err := core.WriteManifest(tmp, 0); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, "policy.gob")); statErr == nil {
			os.RemoveAll(tmp) // another process made it first
			return nil
		}
		return err
	}
	log.Info().Str("base", dir).Int("steps", res.Steps).Float64("val_avg", res.Acc).
		Dur("took", time.Since(start).Round(time.Second)).Msg("base policy ready")
	return nil
}

// writeResolvedConfig saves the merged config as RUN/config.yaml.
func writeResolvedConfig(dir string, cfg *core.Config) error {
	data, err := yaml.Marshal(cfg.Raw)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config.yaml"), data, 0o644)
}
