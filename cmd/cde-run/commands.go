package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cde-rl/cde/internal/cli"
	"github.com/cde-rl/cde/internal/summary"
	"github.com/cde-rl/cde/session"
)

func cmdTrain(args []string) int {
	fs := cli.NewFlagSet("train", "train [--config FILE] [--set key=value]... [--engine E] [--pjrt-plugin P] [--run-dir DIR [--overwrite]] [--resume DIR [--set key=value]...] [--dump-rollouts DIR] [--summary stderr|none] [--print-config]")
	var cf cli.ConfigFlags
	cf.RegisterEngine(fs)
	runDir := fs.String("run-dir", "", "run directory, new or empty (default runs/<time>-<random>-<algorithm>)")
	overwrite := fs.Bool("overwrite", false, "with --run-dir: delete the run already in DIR (config, metrics, checkpoints) and start afresh")
	resume := fs.String("resume", "", "continue the run in DIR from its newest complete checkpoint (uses DIR/config.yaml; --set may change only "+
		strings.Join(session.ResumeSettable, ", ")+", and updates that file)")
	printConfig := fs.Bool("print-config", false, "print the resolved config (defaults < --config < CDE_* < --set; with --resume, the run's with its --set) as YAML, as RUN/config.yaml would hold it, and exit without training")
	dump := fs.String("dump-rollouts", "", "write every step's batch as DIR/rollout-<step>.json (format: docs/rollout-format.md)")
	summaryTo := fs.String("summary", "stderr", "where the closing summary table goes besides RUN/summary.txt: stderr, or none (what a bench's arm-seeds use)")
	usage := fs.Usage
	fs.Usage = func() {
		usage()
		fmt.Fprint(fs.Output(), session.MemoryHelp())
	}
	if code, done := cli.Parse(fs, args); done {
		return code
	}
	tty := cli.StderrIsTTY()
	log := cli.NewLogger(os.Stderr, tty)
	// A signal before the run begins (while the config is read, the
	// model built) ends the command at once; then it stops after a step.
	ctx, stop := cli.StagedSignalContext()
	defer stop()
	o := session.TrainOptions{RunDir: *runDir, Overwrite: *overwrite, Resume: *resume, DumpRollouts: *dump,
		SummaryFileOnly: *summaryTo == "none", Output: session.Output{W: os.Stderr, TTY: tty}, Log: log}
	var err error
	if *summaryTo != "stderr" && *summaryTo != "none" {
		err = fmt.Errorf("--summary %q: want stderr or none", *summaryTo)
	} else if *resume != "" {
		if flag := resumeRefused(&cf); flag != "" {
			err = fmt.Errorf("--resume uses %s/config.yaml: %s cannot change a run being resumed (--set may change %s; edit that file for others; see docs/config.md)",
				*resume, flag, strings.Join(session.ResumeSettable, ", "))
		} else if *printConfig {
			o.Config, err = session.ResumeConfigWith(*resume, os.Environ(), cf.Sets)
		}
		o.ResumeSets = cf.Sets
	} else {
		o.Config, err = cf.Load()
	}
	if err == nil && *printConfig {
		// What train would refuse is refused here too, by the same checks
		// (no model is built).
		err = session.CheckConfig(o.Config, log)
		var data []byte
		if err == nil {
			data, err = session.ConfigYAML(o.Config)
		}
		if err == nil {
			_, err = os.Stdout.Write(data)
		}
	} else if err == nil {
		err = session.Train(ctx, o)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		cli.LogFailure(log, os.Stderr, tty, "train", "train failed", err)
	}
	return cli.ExitCode(err)
}

// resumeRefused names the config flag given with --resume that a resume
// does not take ("" when none): a resume's config is its config.yaml,
// and --set is checked key by key (session.ResumeSettable).
func resumeRefused(cf *cli.ConfigFlags) string {
	switch {
	case cf.File != "":
		return "--config"
	case cf.Engine != "":
		return "--engine"
	case cf.Plugin != "":
		return "--pjrt-plugin"
	}
	return ""
}

func cmdPretrain(args []string) int {
	fs := cli.NewFlagSet("pretrain", "pretrain [--config FILE] [--set key=value]... [--engine E] [--pjrt-plugin P] [--out DIR]")
	var cf cli.ConfigFlags
	cf.RegisterEngine(fs)
	out := fs.String("out", "", "where to write the base policy (default pretrain.dir/<key>, where train's model.checkpoint: auto looks)")
	if code, done := cli.Parse(fs, args); done {
		return code
	}
	tty := cli.StderrIsTTY()
	log := cli.NewLogger(os.Stderr, tty)
	ctx, stop := cli.StagedSignalContext()
	defer stop()
	cfg, err := cf.Load()
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
		cli.LogFailure(log, os.Stderr, tty, "pretrain", "pretrain failed", err)
	}
	return cli.ExitCode(err)
}

func cmdEval(args []string) int {
	fs := cli.NewFlagSet("eval", "eval [--config FILE] [--set key=value]... [--engine E] [--pjrt-plugin P] [--checkpoint DIR | --run DIR] [--seed-step N]")
	var cf cli.ConfigFlags
	cf.RegisterEngine(fs)
	ckpt := fs.String("checkpoint", "", "checkpoint directory holding policy.gob (default: model.checkpoint; with model.hf and no checkpoint, the Hugging Face model's own weights)")
	run := fs.String("run", "", "evaluate the latest checkpoint of this run directory, with its config")
	seedStep := fs.Int("seed-step", -1, "draw the evaluation's samples with the seeds of this step (default: the checkpoint's own step, read from its step-N name, so the run's logged figure is reproduced; 0 for other checkpoints)")
	if code, done := cli.Parse(fs, args); done {
		return code
	}
	tty := cli.StderrIsTTY()
	log := cli.NewLogger(os.Stderr, tty)
	began := time.Now()
	ctx, stop := cli.StagedSignalContext()
	defer stop()
	res, err := session.Eval(ctx, session.EvalOptions{Checkpoint: *ckpt, Run: *run, SeedStep: *seedStep, ConfigFile: cf.File, Sets: cf.AllSets(),
		Log: log, Output: session.Output{W: os.Stderr, TTY: tty}})
	if err == nil {
		out, _ := json.MarshalIndent(map[string]any{"checkpoint": res.Checkpoint, "seed_step": res.SeedStep, "metrics": res.Metrics}, "", "  ")
		fmt.Println(string(out))
		summary.Write(os.Stderr, "eval finished", []summary.Fact{{Label: "checkpoint", Value: res.Checkpoint},
			{Label: "seeds of step", Value: strconv.Itoa(res.SeedStep)}, {Label: "wall time", Value: fmt.Sprintf("%.1f s", time.Since(began).Seconds())},
			{Label: "metrics", Value: "also on stdout, as JSON"}}, res.Metrics)
	}
	if err != nil {
		cli.LogFailure(log, os.Stderr, tty, "eval", "eval failed", err)
	}
	return cli.ExitCode(err)
}
