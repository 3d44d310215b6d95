package session

import (
	"bytes"
	"time"

	"github.com/cde-rl/cde/internal/graceful"
	"github.com/cde-rl/cde/internal/readcap"
	"github.com/cde-rl/cde/internal/summary"
	"github.com/cde-rl/cde/trainer"

	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rs/zerolog"
	"go.yaml.in/yaml/v3"

	"github.com/cde-rl/cde/core"
)

// TrainOptions says what Train runs and where.
type TrainOptions struct {
	// Config is the resolved config of a new run; nil with Resume.
	Config *trainer.Config
	// RunDir is the new run's directory (empty: a fresh name under runs/);
	// Overwrite deletes a run already there first.
	RunDir    string
	Overwrite bool
	// Resume continues the run in this directory from its newest complete
	// checkpoint, with its config.yaml (see ResumeConfig).
	Resume string
	// ResumeSets are "key=value" overrides of a resumed run's config.yaml,
	// of the keys in ResumeSettable only; the run's config.yaml is updated.
	ResumeSets []string
	// DumpRollouts, when set, receives every step's batch (docs/rollout-format.md).
	DumpRollouts string
	// SummaryFileOnly keeps the closing summary table out of Output: it is
	// written to RUN/summary.txt only (a bench's arm-seeds; RUN/summary.txt
	// is written either way).
	SummaryFileOnly bool
	Output          Output
	Log             zerolog.Logger
}

// ResumeConfig loads RUN/config.yaml for a resume. A config override in
// environ (CDE_*, see trainer.ConfigEnvVars) is refused by name: the run's
// config file is the one place to change it.
func ResumeConfig(run string, environ []string) (*trainer.Config, error) {
	return ResumeConfigWith(run, environ, nil)
}

// ResumeSettable are the keys `train --resume RUN --set KEY=VALUE` may
// change: how long the run goes on and its bookkeeping, which change
// neither what a step computes nor what the logged curves measure. Any
// other key is refused by name (edit RUN/config.yaml to change it; the
// keys fixed once a run starts, trainer.FixedConfigKeys, not even then).
var ResumeSettable = []string{"train.steps", "train.checkpoint_every", "train.keep_checkpoints", "train.logger",
	"eval.every", "eval.final_k", "eval.max_rows", "eval.details"}

// ResumeConfigWith is ResumeConfig with sets ("key=value", as --set)
// applied over RUN/config.yaml; a set of a key not in ResumeSettable is
// refused, naming it.
func ResumeConfigWith(run string, environ, sets []string) (*trainer.Config, error) {
	if vars := trainer.ConfigEnvVars(environ); len(vars) > 0 {
		return nil, fmt.Errorf("--resume uses %s/config.yaml: %s cannot change a run being resumed (unset it, or edit that file instead; see docs/config.md)", run, strings.Join(vars, ", "))
	}
	for _, s := range sets {
		key, _, _ := strings.Cut(s, "=")
		if !slices.Contains(ResumeSettable, strings.TrimSpace(key)) {
			return nil, fmt.Errorf("--resume %s: --set %s: %s is not a key a resume may change (those are %s); to change it, edit %s (see docs/config.md)",
				run, s, key, strings.Join(ResumeSettable, ", "), filepath.Join(run, "config.yaml"))
		}
	}
	path := filepath.Join(run, "config.yaml")
	data, err := readcap.Config.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	cfg, err := trainer.LoadConfig(trainer.LoadOptions{Base: data, Env: []string{}, Sets: sets})
	if err != nil {
		return nil, fmt.Errorf("resume: %s: %w", path, err)
	}
	return cfg, nil
}

// saveResumeSets writes a resumed run's config.yaml with its --set
// overrides (ResumeConfigWith applied them to cfg), once the checkpoint at
// step start is restored, so a later resume, eval or board reads them.
func saveResumeSets(run string, cfg *trainer.Config, sets []string, start int, log zerolog.Logger) error {
	steps := false
	for _, s := range sets {
		if key, _, _ := strings.Cut(s, "="); strings.TrimSpace(key) == "train.steps" {
			steps = true
			if cfg.Train.Steps <= start {
				return fmt.Errorf("--resume %s: --set %s: the run is at step %d already; give more steps than that", run, s, start)
			}
		}
	}
	if steps {
		for i, st := range cfg.Strategies {
			if w, ok := st["weight"].(map[string]any); ok && w["schedule"] != nil && w["schedule"] != "constant" {
				log.Warn().Int("strategy", i).Any("schedule", w["schedule"]).Int("train_steps", cfg.Train.Steps).
					Msg("resume: a weight schedule runs over step / train.steps: a new train.steps stretches the rest of it")
			}
		}
	}
	if err := WriteResolvedConfig(run, cfg); err != nil {
		return err
	}
	log.Info().Strs("set", sets).Str("config", filepath.Join(run, "config.yaml")).Msg("resume: config updated")
	return nil
}

// WriteResolvedConfig saves the merged config as RUN/config.yaml.
func WriteResolvedConfig(dir string, cfg *trainer.Config) error {
	data, err := ConfigYAML(cfg)
	if err != nil {
		return err
	}
	return core.WriteFileAtomic(filepath.Join(dir, "config.yaml"), data)
}

// ConfigYAML is the merged config as YAML, as RUN/config.yaml holds it
// (what train --print-config prints).
func ConfigYAML(cfg *trainer.Config) ([]byte, error) {
	return yaml.Marshal(cfg.Raw)
}

// Train runs a training to its end: a new run (o.Config into o.RunDir) or
// the run in o.Resume. It builds everything before it makes the run
// directory, so a bad key or plugin leaves nothing behind; the directory
// is locked while it runs (trainer.RunDir). On ctx cancellation the run
// writes a checkpoint of its last completed step and returns ctx.Err().
func Train(ctx context.Context, o TrainOptions) (err error) {
	log := o.Log
	cfg := o.Config
	var rd *trainer.RunDir
	if o.Resume != "" {
		if o.RunDir != "" || o.Overwrite || o.Config != nil {
			return fmt.Errorf("resume continues %s with its own config: a run directory, --overwrite or a config do not apply", o.Resume)
		}
		// Lock first: the config and checkpoints read next are this run's.
		if rd, err = trainer.OpenRunDir(o.Resume); err != nil {
			return err
		}
		defer rd.Close()
		if cfg, err = ResumeConfigWith(o.Resume, os.Environ(), o.ResumeSets); err != nil {
			return err
		}
	} else {
		if o.Overwrite && o.RunDir == "" {
			return fmt.Errorf("--overwrite needs --run-dir")
		}
		if len(o.ResumeSets) > 0 {
			return fmt.Errorf("train: ResumeSets apply to a resume only (a new run takes its overrides in Config)")
		}
		if cfg == nil {
			return fmt.Errorf("train: no config")
		}
	}
	start := 0
	var ckpt string
	if rd != nil {
		var skipped []string
		if ckpt, skipped, err = trainer.ResumeCheckpoint(rd.Path); err != nil {
			return err
		}
		for _, s := range skipped {
			log.Warn().Str("skipped", s).Msg("resume: passing over an incomplete checkpoint")
		}
	}
	// Build everything first: a bad key or plugin fails here, before any
	// run directory is made or pretraining starts.
	s, err := New(cfg, log)
	if err != nil {
		return err
	}
	defer s.Close()
	// From here a cancelled ctx stops the run at a step boundary and tidies
	// up (before, a command's first signal may end it at once).
	graceful.Begin(ctx)
	if rd == nil {
		if o.RunDir != "" {
			rd, err = trainer.NewRunDir(o.RunDir, o.Overwrite)
		} else {
			rd, err = trainer.NewRunDirUnder("runs", fmt.Sprint(cfg.Algorithm["name"]))
		}
		if err != nil {
			return err
		}
		// A start that fails before the first step leaves nothing behind.
		defer func() {
			if err != nil {
				rd.Discard()
			} else {
				rd.Close()
			}
		}()
	}
	if o.DumpRollouts != "" {
		if err := os.MkdirAll(o.DumpRollouts, 0o755); err != nil {
			return err
		}
	}
	base := ""
	if ckpt == "" {
		// The config goes first: a run killed while it makes its base
		// policy (minutes) is resumed with --resume, which makes it again.
		if err := WriteResolvedConfig(rd.Path, cfg); err != nil {
			return err
		}
		if base, err = ResolveBase(ctx, cfg, log, o.Output); err != nil {
			return err
		}
	}
	if base != "" {
		if err := s.Backend.Load(base); err != nil {
			return err
		}
		s.Backend.ResetOptimizer()
		log.Info().Str("base", base).Msg("loaded base policy")
	}
	if ckpt == "" && cfg.Train.CriticInit == "policy" && s.Backend.HasCritic() {
		// A new run's critic starts from the starting policy's trunk
		// (train.critic_init: policy); a resumed one restores its own.
		n, err := s.Backend.InitCriticFromPolicy()
		if err != nil {
			return err
		}
		log.Info().Int("variables", n).Msg("critic trunk initialised from the policy")
	}
	if cfg.Train.KLCoef > 0 && ckpt == "" {
		// The k3 KL term's reference is the starting policy; checkpoints
		// carry it (reference.gob), so a resumed run restores it.
		if err := s.Backend.FreezeReference(); err != nil {
			return err
		}
	}
	s.Trainer.RunDir = rd.Path
	if ckpt != "" {
		if start, err = s.Trainer.Restore(ckpt); err != nil {
			return err
		}
		log.Info().Str("checkpoint", ckpt).Int("step", start).Msg("resuming")
		if len(o.ResumeSets) > 0 {
			if err := saveResumeSets(rd.Path, cfg, o.ResumeSets, start, log); err != nil {
				return err
			}
		}
	} else if o.Resume != "" {
		log.Warn().Str("run", rd.Path).Msg("no complete checkpoint yet: starting from step 0")
	}
	s.Trainer.Progress, s.Trainer.TTY = o.Output.W, o.Output.TTY
	s.Trainer.DumpRollouts = o.DumpRollouts
	began := time.Now()
	err = s.Trainer.Run(ctx, start)
	if err == nil && s.Trainer.AlreadyDone {
		// Nothing ran: keep the summary the run finished with (its wall
		// time is the run's) and show it again.
		if o.Output.W != nil && !o.SummaryFileOnly {
			fmt.Fprintf(o.Output.W, "nothing to do: %s finished at step %d (to train on: cde-run train --resume %s --set train.steps=N, N > %d)\n",
				rd.Path, start, rd.Path, start)
			if table, rerr := os.ReadFile(filepath.Join(rd.Path, "summary.txt")); rerr == nil {
				o.Output.W.Write(table)
			}
		}
		return nil
	}
	if err == nil {
		var table bytes.Buffer
		writeTrainSummary(&table, rd.Path, start, cfg.Train.Steps, time.Since(began), s.Trainer)
		if werr := core.WriteFileAtomic(filepath.Join(rd.Path, "summary.txt"), table.Bytes()); werr != nil {
			log.Warn().Err(werr).Msg("could not write the run's summary.txt")
		}
		if !o.SummaryFileOnly && o.Output.W != nil {
			o.Output.W.Write(table.Bytes())
		}
	}
	if errors.Is(err, context.Canceled) {
		// Stopped by a signal after checkpointing: say how to go on.
		if ck, _ := trainer.LatestCheckpoint(rd.Path); ck != "" {
			w := o.Output.W
			if w == nil {
				w = io.Discard
			}
			fmt.Fprintf(w, "stopped at %s; to continue: cde-run train --resume %s\n", filepath.Base(ck), rd.Path)
			log.Info().Str("checkpoint", ck).Str("resume", "cde-run train --resume "+rd.Path).Msg("stopped")
		}
	}
	return err
}

// writeTrainSummary ends a finished training with a table a person reads:
// where the run is, the steps and wall time of this invocation, the final
// evaluation, and the last step's rewards and strategies' explore/*
// metrics, sorted by name.
func writeTrainSummary(w io.Writer, run string, start, steps int, took time.Duration, t *trainer.Trainer) {
	m := map[string]float64{}
	for k, v := range t.Final {
		m[k] = v
	}
	for _, k := range []string{"reward/acc", "reward/mean"} {
		if v, ok := t.LastStep[k]; ok {
			m[k] = v
		}
	}
	// The strategies' own metrics (explore/NAME/...): what the bonuses
	// did on the last step, which the reward alone does not show.
	for k, v := range t.LastStep {
		if strings.HasPrefix(k, "explore/") {
			m[k] = v
		}
	}
	facts := []summary.Fact{{Label: "run", Value: run}, {Label: "steps", Value: fmt.Sprintf("%d to %d", start, steps)},
		{Label: "wall time", Value: fmt.Sprintf("%.1f s", took.Seconds())},
		{Label: "metrics", Value: filepath.Join(run, "metrics.jsonl") + fmt.Sprintf(" (reward/* and explore/* of step %d; the rest: the evaluation after step %d)", steps-1, steps)}}
	summary.Write(w, "train finished", facts, m)
}
