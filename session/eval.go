package session

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/internal/readcap"
	"github.com/cde-rl/cde/trainer"
)

// EvalOptions say what cde-run eval evaluates.
type EvalOptions struct {
	// Checkpoint is the checkpoint directory (policy.gob); empty: Run's
	// latest checkpoint, else model.checkpoint (auto: the base policy,
	// made if missing; with model.hf, the model's own weights).
	Checkpoint string
	// Run is a run directory: its config.yaml is the config (Sets still
	// apply) and its latest checkpoint the default Checkpoint.
	Run string
	// ConfigFile and Sets make the config when Run is empty, layered as
	// cde-run's --config and --set.
	ConfigFile string
	Sets       []string
	// SeedStep draws the evaluation's samples with this step's seeds; < 0:
	// the checkpoint's own step (from its step-N name, 0 for other names),
	// so a run's logged figure is reproduced.
	SeedStep int
	Log      zerolog.Logger
	Output   Output
}

// EvalResult is what Eval measured, and on what.
type EvalResult struct {
	Checkpoint string
	SeedStep   int
	Metrics    map[string]float64
}

// Eval evaluates a checkpoint on the config's evaluation sets, as the
// trainer's periodic evaluation does. ctx cancels the making of a missing
// base policy.
func Eval(ctx context.Context, o EvalOptions) (EvalResult, error) {
	var cfg *trainer.Config
	var err error
	dir := o.Checkpoint
	if o.Run != "" {
		data, err := readcap.Config.ReadFile(filepath.Join(o.Run, "config.yaml"))
		if err != nil {
			return EvalResult{}, err
		}
		if cfg, err = trainer.LoadConfig(trainer.LoadOptions{Base: data, Sets: o.Sets}); err != nil {
			return EvalResult{}, err
		}
		if dir == "" {
			if dir, err = trainer.LatestCheckpoint(o.Run); err != nil {
				return EvalResult{}, err
			}
			if dir == "" {
				return EvalResult{}, fmt.Errorf("eval: %s has no checkpoint", o.Run)
			}
		}
	} else if cfg, err = trainer.LoadConfig(trainer.LoadOptions{File: o.ConfigFile, Sets: o.Sets}); err != nil {
		return EvalResult{}, err
	}
	if dir == "" {
		if dir, err = ResolveBase(ctx, cfg, o.Log, o.Output); err != nil {
			return EvalResult{}, err
		}
		if dir == "" && cfg.Model.HF == "" {
			return EvalResult{}, fmt.Errorf("eval: give --checkpoint DIR, --run DIR or model.checkpoint")
		}
	}
	s, err := New(cfg, o.Log)
	if err != nil {
		return EvalResult{}, err
	}
	defer s.Close()
	// With model.hf and no checkpoint, the policy is the model's own
	// weights, as a run from it starts.
	label := cfg.Model.HF + " (its own weights)"
	if dir != "" {
		if err := s.LoadPolicy(dir); err != nil {
			return EvalResult{}, err
		}
		label = dir
	}
	step := o.SeedStep
	if step < 0 {
		step, _ = trainer.CheckpointStep(dir) // 0 when dir is no step-N
	}
	m := map[string]float64{}
	if err := s.Trainer.Evaluate(step, m); err != nil {
		return EvalResult{}, err
	}
	return EvalResult{Checkpoint: label, SeedStep: step, Metrics: m}, nil
}
