package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/cde-rl/cde/internal/summary"
	"github.com/cde-rl/cde/session"
	"github.com/cde-rl/cde/trainer"
)

// configFlags are the flags every config-driven command shares.
type configFlags struct {
	file           string
	sets           stringList
	engine, plugin string
}

func (c *configFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.file, "config", "", "YAML config file (layered: defaults < file < CDE_* env < --set)")
	fs.Var(&c.sets, "set", "override one key, e.g. --set train.steps=50 (repeatable; value parsed as YAML)")
}

// registerEngine adds --engine and --pjrt-plugin, for the commands that
// run a model.
func (c *configFlags) registerEngine(fs *flag.FlagSet) {
	c.register(fs)
	fs.StringVar(&c.engine, "engine", "", "compute engine, as on score, generate and serve: the same as --set backend.engine=E (a --set of that key wins)")
	fs.StringVar(&c.plugin, "pjrt-plugin", "", "the xla:* engines' PJRT plugin: the same as --set backend.pjrt_plugin=P")
}

// given reports whether any flag that changes the config was given.
func (c *configFlags) given() bool {
	return c.file != "" || len(c.sets) > 0 || c.engine != "" || c.plugin != ""
}

func (c *configFlags) load() (*trainer.Config, error) {
	return trainer.LoadConfig(trainer.LoadOptions{File: c.file, Sets: c.allSets()})
}

// allSets are --engine and --pjrt-plugin as --set lines, then the --set
// lines (which win).
func (c *configFlags) allSets() []string {
	var sets []string
	if c.engine != "" {
		sets = append(sets, "backend.engine="+c.engine)
	}
	if c.plugin != "" {
		sets = append(sets, "backend.pjrt_plugin="+c.plugin)
	}
	return append(sets, c.sets...)
}

func newFlagSet(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: cde-run %s\n\n", synopsis)
		fs.PrintDefaults()
		fmt.Fprintf(fs.Output(), "\nEnvironment: CDE_SECTION__KEY=value overrides a config key (e.g. CDE_TRAIN__STEPS=50).\nConfig keys and defaults: docs/config.md\n")
	}
	return fs
}

// parse returns (exit code, done): done when --help was shown or flags failed.
func parse(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, true
		}
		return 2, true
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "cde-run %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return 2, true
	}
	return 0, false
}

// signalContext is cancelled by the first SIGINT or SIGTERM, which lets a
// run finish its step and write a checkpoint; the handler is then removed,
// so a second signal ends the process at once (a step that hangs can
// always be stopped without SIGKILL).
func signalContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case sig := <-ch:
			signal.Stop(ch)
			fmt.Fprintf(os.Stderr, "cde-run: %v: stopping after the current step (send it again to quit at once)\n", sig)
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel()
	}
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if errors.Is(err, context.Canceled) {
		return 130
	}
	return 1
}

func cmdTrain(args []string) int {
	fs := newFlagSet("train", "train [--config FILE] [--set key=value]... [--engine E] [--pjrt-plugin P] [--run-dir DIR [--overwrite]] [--resume DIR] [--dump-rollouts DIR]")
	var cf configFlags
	cf.registerEngine(fs)
	runDir := fs.String("run-dir", "", "run directory, new or empty (default runs/<time>-<random>-<algorithm>)")
	overwrite := fs.Bool("overwrite", false, "with --run-dir: delete the run already in DIR (config, metrics, checkpoints) and start afresh")
	resume := fs.String("resume", "", "continue the run in DIR from its newest complete checkpoint (uses DIR/config.yaml)")
	dump := fs.String("dump-rollouts", "", "write every step's batch as DIR/rollout-<step>.json (DESIGN section 4)")
	usage := fs.Usage
	fs.Usage = func() {
		usage()
		fmt.Fprint(fs.Output(), memoryHelp())
	}
	if code, done := parse(fs, args); done {
		return code
	}
	tty := stderrIsTTY()
	log := newLogger(os.Stderr, tty)
	ctx, stop := signalContext()
	defer stop()
	o := session.TrainOptions{RunDir: *runDir, Overwrite: *overwrite, Resume: *resume, DumpRollouts: *dump,
		Output: session.Output{W: os.Stderr, TTY: tty}, Log: log}
	var err error
	if *resume != "" {
		if cf.given() {
			err = fmt.Errorf("--resume uses %s/config.yaml: --config, --set and --engine cannot change a run being resumed (edit that file instead; see docs/config.md)", *resume)
		}
	} else {
		o.Config, err = cf.load()
	}
	if err == nil {
		err = session.Train(ctx, o)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		log.Error().Err(err).Msg("train failed")
	}
	return exitCode(err)
}

// memoryHelp is the memory paragraph of train --help, with the estimate
// of the embedded defaults.
func memoryHelp() string {
	est := "unknown"
	if cfg, err := trainer.LoadConfig(trainer.LoadOptions{Env: []string{}}); err == nil {
		if e, err := session.EstimateConfig(cfg); err == nil {
			est = e.String()
		}
	}
	return `
Memory: before it allocates anything, a run estimates its peak memory from
the config (weights, gradients and optimiser state, the largest generation
or training pass: KV caches, activations, logits), logs the estimate, and
refuses to start when it exceeds this machine's memory (its cgroup limit
when lower), naming the keys that drive it. ` + session.MemoryLimitEnv + `=N sets
the limit to N GB, -1 turns the check off. For the embedded defaults:
` + est + `.
Upper bounds of the size keys: docs/config.md ("Memory").
`
}

func cmdPretrain(args []string) int {
	fs := newFlagSet("pretrain", "pretrain [--config FILE] [--set key=value]... [--engine E] [--pjrt-plugin P] [--out DIR]")
	var cf configFlags
	cf.registerEngine(fs)
	out := fs.String("out", "", "where to write the base policy (default pretrain.dir/<key>, where train's model.checkpoint: auto looks)")
	if code, done := parse(fs, args); done {
		return code
	}
	tty := stderrIsTTY()
	log := newLogger(os.Stderr, tty)
	ctx, stop := signalContext()
	defer stop()
	cfg, err := cf.load()
	if err == nil {
		dir := *out
		if dir == "" {
			dir = filepath.Join(cfg.Pretrain.Dir, session.BaseKey(cfg))
		}
		if _, statErr := os.Stat(dir); statErr == nil {
			err = fmt.Errorf("pretrain: %s already exists (remove it to retrain)", dir)
		} else if err = os.MkdirAll(filepath.Dir(dir), 0o755); err == nil {
			err = session.Pretrain(ctx, cfg, dir, log, session.Output{W: os.Stderr, TTY: tty})
		}
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		log.Error().Err(err).Msg("pretrain failed")
	}
	return exitCode(err)
}

func cmdEval(args []string) int {
	fs := newFlagSet("eval", "eval [--config FILE] [--set key=value]... [--engine E] [--pjrt-plugin P] [--checkpoint DIR | --run DIR] [--seed-step N]")
	var cf configFlags
	cf.registerEngine(fs)
	ckpt := fs.String("checkpoint", "", "checkpoint directory holding policy.gob (default: model.checkpoint)")
	run := fs.String("run", "", "evaluate the latest checkpoint of this run directory, with its config")
	seedStep := fs.Int("seed-step", -1, "draw the evaluation's samples with the seeds of this step (default: the checkpoint's own step, read from its step-N name, so the run's logged figure is reproduced; 0 for other checkpoints)")
	if code, done := parse(fs, args); done {
		return code
	}
	tty := stderrIsTTY()
	log := newLogger(os.Stderr, tty)
	err := func() error {
		var cfg *trainer.Config
		var err error
		dir := *ckpt
		if *run != "" {
			data, rerr := os.ReadFile(filepath.Join(*run, "config.yaml"))
			if rerr != nil {
				return rerr
			}
			if cfg, err = trainer.LoadConfig(trainer.LoadOptions{Base: data, Sets: cf.allSets()}); err != nil {
				return err
			}
			if dir == "" {
				if dir, err = trainer.LatestCheckpoint(*run); err != nil {
					return err
				}
				if dir == "" {
					return fmt.Errorf("eval: %s has no checkpoint", *run)
				}
			}
		} else if cfg, err = cf.load(); err != nil {
			return err
		}
		if dir == "" {
			ctx, stop := signalContext()
			defer stop()
			if dir, err = session.ResolveBase(ctx, cfg, log, session.Output{W: os.Stderr, TTY: tty}); err != nil {
				return err
			}
			if dir == "" {
				return fmt.Errorf("eval: give --checkpoint DIR, --run DIR or model.checkpoint")
			}
		}
		s, err := session.New(cfg, log)
		if err != nil {
			return err
		}
		defer s.Close()
		if err := s.LoadPolicy(dir); err != nil {
			return err
		}
		step := *seedStep
		if step < 0 {
			step, _ = trainer.CheckpointStep(dir) // 0 when dir is no step-N
		}
		m := map[string]float64{}
		began := time.Now()
		if err := s.Trainer.Evaluate(step, m); err != nil {
			return err
		}
		out, _ := json.MarshalIndent(map[string]any{"checkpoint": dir, "seed_step": step, "metrics": m}, "", "  ")
		fmt.Println(string(out))
		summary.Write(os.Stderr, "eval finished", []summary.Fact{{Label: "checkpoint", Value: dir},
			{Label: "seeds of step", Value: strconv.Itoa(step)}, {Label: "wall time", Value: fmt.Sprintf("%.1f s", time.Since(began).Seconds())},
			{Label: "metrics", Value: "also on stdout, as JSON"}}, m)
		return nil
	}()
	if err != nil {
		log.Error().Err(err).Msg("eval failed")
	}
	return exitCode(err)
}
