package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/bench"
	"github.com/cde-rl/cde/internal/cli"
)

// cmdBench wires the flags of `cde-run bench` to package bench.
func cmdBench(args []string) int {
	fs := cli.NewFlagSet("bench", "bench -c|--config BENCH.yaml [--out DIR] [--jobs N] [--only ARM]... [--executor local|slurm [--detach]] [--until-conclusive --max-seeds N [--stage-seeds K] [--spending pocock|obf]] [--report-only] [--plan N] [--log-format text|json] [--worker base|N]")
	file := fs.String("c", "", "the bench file (arms x seeds over a base config; docs/bench.md), or a shipped preset by name from any directory: "+strings.Join(bench.Presets(), ", "))
	fs.StringVar(file, "config", "", "same as -c")
	out := fs.String("out", "", "results directory (default bench-results/<bench file stem>)")
	var only cli.StringList
	fs.Var(&only, "only", "run only this arm (repeatable); the report covers every arm with finished runs")
	jobs := fs.Int("jobs", 1, "arm-seeds trained at a time; with more than one, each gets GOMAXPROCS = cores / jobs unless GOMAXPROCS is set")
	reportOnly := fs.Bool("report-only", false, "write the report from the finished runs in DIR; train nothing")
	executor := fs.String("executor", "", "where the arm-seeds train: local (child processes, --jobs at a time) or slurm (a Slurm job array; docs/bench.md); default: the bench file's executor.name, else local")
	detach := fs.Bool("detach", false, "with slurm: submit the jobs, record them in DIR and return; the same command again follows them and writes the report")
	worker := fs.String("worker", "", "internal, what a Slurm job runs: base (the base policies and evaluations) or N (arm-seed number N)")
	untilConclusive := fs.Bool("until-conclusive", false, "sequential seeds: after the registered seeds, add seeds in stages only to the arms of claims still inconclusive after Holm, "+
		"each look at its share of the error (alpha spending), until every claim is decided or --max-seeds is reached (docs/bench.md, Sequential seeds)")
	maxSeeds := fs.Int("max-seeds", 0, "with --until-conclusive: the most seeds an arm runs (required)")
	stageSeeds := fs.Int("stage-seeds", bench.DefaultStageSeeds, "with --until-conclusive: seeds a stage adds to an arm")
	spending := fs.String("spending", bench.SpendPocock, "with --until-conclusive: the alpha-spending function over seeds / max-seeds: pocock (spends early) or obf (O'Brien-Fleming-type: keeps most for the last look)")
	logFormat := fs.String("log-format", bench.LogText, "text: the bench's log and its arm-seeds' log lines as readable lines (an info line cut at 200 characters), on a terminal or not; "+
		"json: JSON log lines, as the arm-seeds write them off a terminal (for a program reading the output)")
	plan := fs.Int("plan", 0, "print a power plan for N seeds from the finished runs in DIR as the pilot (the report's Power table, projected); train nothing")
	if code, done := cli.Parse(fs, args); done {
		return code
	}
	tty := cli.StderrIsTTY()
	var log zerolog.Logger
	switch *logFormat {
	case bench.LogText:
		log = bench.TextLogger(os.Stderr, tty, cli.LogLevel)
	case bench.LogJSON:
		log = cli.NewLogger(os.Stderr, false)
	default:
		fmt.Fprintf(os.Stderr, "cde-run bench: --log-format %q: want %s\n", *logFormat, strings.Join(bench.LogFormats, " or "))
		return 2
	}
	// LogFailure adds a plain last line only where the log is JSON.
	plain := *logFormat == bench.LogText
	if *jobs < 1 {
		fmt.Fprintln(os.Stderr, "cde-run bench: --jobs must be >= 1")
		return 2
	}
	if *file == "" {
		fmt.Fprintln(os.Stderr, "cde-run bench: -c BENCH.yaml is required (see --help)")
		return 2
	}
	if *untilConclusive != (*maxSeeds > 0) {
		fmt.Fprintln(os.Stderr, "cde-run bench: --until-conclusive and --max-seeds N (N > 0) go together")
		return 2
	}
	err := func() error {
		spec, err := bench.Load(*file)
		if err != nil {
			return err
		}
		o := bench.Options{Dir: *out, Only: only, Jobs: *jobs, Output: os.Stderr, TTY: tty, Log: log, LogFormat: *logFormat}
		if o.Dir == "" {
			o.Dir = filepath.Join("bench-results", spec.Stem)
		}
		// An absolute --out inside the working directory is used as a
		// relative path, so the arm-seeds' configs (pretrain.dir, the base
		// policy) and the report record no absolute path of this machine.
		o.Dir = bench.InsideRelative(o.Dir)
		o.Command = "cde-run bench -c " + bench.DisplayPath(*file)
		if *out != "" {
			o.Command += " --out " + bench.DisplayPath(*out)
		}
		for _, a := range only {
			o.Command += " --only " + a
		}
		if *jobs > 1 {
			o.Command += fmt.Sprintf(" --jobs %d", *jobs)
		}
		if *untilConclusive {
			o.MaxSeeds, o.StageSeeds, o.Spending = *maxSeeds, *stageSeeds, *spending
			o.Command += fmt.Sprintf(" --until-conclusive --max-seeds %d", *maxSeeds)
			if *stageSeeds != bench.DefaultStageSeeds {
				o.Command += fmt.Sprintf(" --stage-seeds %d", *stageSeeds)
			}
			if *spending != bench.SpendPocock {
				o.Command += " --spending " + *spending
			}
		}
		if *plan != 0 {
			table, err := bench.Plan(spec, o, *plan)
			if err == nil {
				fmt.Print(table)
			}
			return err
		}
		if *worker != "" {
			if o.Exe, err = os.Executable(); err != nil {
				return err
			}
			// A sequential bench's workers number arm-seeds over all its seeds.
			if spec, err = bench.SequentialWorkerSpec(spec, o.Dir, *worker); err != nil {
				return err
			}
			ctx, stop := cli.SignalContext()
			defer stop()
			return bench.Work(ctx, spec, o, *worker)
		}
		o.Executor, o.Detach = *executor, *detach
		if *executor != "" {
			o.Command += " --executor " + *executor
		}
		if cli.StdinIsTTY() {
			o.Confirm = cli.AskYesNo
		}
		began := time.Now()
		if *reportOnly {
			o.Command += " --report-only"
			err = bench.Report(spec, o)
		} else {
			if o.Exe, err = os.Executable(); err != nil {
				return err
			}
			ctx, stop := cli.SignalContext()
			defer stop()
			err = bench.Run(ctx, spec, o)
		}
		// The closing summary also when arm-seeds failed (the report
		// covers the others), naming them.
		if failed := bench.SeedsFailed(err); err == nil || failed != nil && !*reportOnly {
			bench.Summary(os.Stderr, o.Dir, time.Since(began), failed)
		}
		if errors.Is(err, bench.ErrDetached) {
			return nil
		}
		return err
	}()
	if bench.SeedsFailed(err) != nil && !errors.Is(err, context.Canceled) {
		// The summary named them; a report error joined to it is logged.
		if _, alone := err.(*bench.SeedsFailedError); alone {
			return bench.ExitSeedsFailed
		}
		cli.LogFailure(log, os.Stderr, tty || plain, "bench", "bench failed", err)
		return bench.ExitSeedsFailed
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		cli.LogFailure(log, os.Stderr, tty || plain, "bench", "bench failed", err)
	}
	return cli.ExitCode(err)
}
