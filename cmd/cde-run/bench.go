package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cde-rl/cde/bench"
)

// cmdBench wires the flags of `cde-run bench` to package bench.
func cmdBench(args []string) int {
	fs := newFlagSet("bench", "bench -c|--config BENCH.yaml [--out DIR] [--jobs N] [--only ARM]... [--report-only]")
	file := fs.String("c", "", "the bench file (arms x seeds over a base config; docs/bench.md), or a shipped preset by name from any directory: smoke, paper-countdown, paper-small, zoo-small, zoo-estimators")
	fs.StringVar(file, "config", "", "same as -c")
	out := fs.String("out", "", "results directory (default bench-results/<bench file stem>)")
	var only stringList
	fs.Var(&only, "only", "run only this arm (repeatable); the report covers every arm with finished runs")
	jobs := fs.Int("jobs", 1, "arm-seeds trained at a time (each uses about one core)")
	reportOnly := fs.Bool("report-only", false, "write the report from the finished runs in DIR; train nothing")
	if code, done := parse(fs, args); done {
		return code
	}
	tty := stderrIsTTY()
	log := newLogger(os.Stderr, tty)
	if *jobs < 1 {
		fmt.Fprintln(os.Stderr, "cde-run bench: --jobs must be >= 1")
		return 2
	}
	if *file == "" {
		fmt.Fprintln(os.Stderr, "cde-run bench: -c BENCH.yaml is required (see --help)")
		return 2
	}
	err := func() error {
		spec, err := bench.Load(*file)
		if err != nil {
			return err
		}
		o := bench.Options{Dir: *out, Only: only, Jobs: *jobs, Output: os.Stderr, TTY: tty, Log: log}
		if o.Dir == "" {
			o.Dir = filepath.Join("bench-results", spec.Stem)
		}
		o.Command = "cde-run bench -c " + displayPath(*file)
		if *out != "" {
			o.Command += " --out " + displayPath(*out)
		}
		for _, a := range only {
			o.Command += " --only " + a
		}
		if *jobs > 1 {
			o.Command += fmt.Sprintf(" --jobs %d", *jobs)
		}
		if *reportOnly {
			o.Command += " --report-only"
			return bench.Report(spec, o)
		}
		if o.Exe, err = os.Executable(); err != nil {
			return err
		}
		ctx, stop := signalContext()
		defer stop()
		return bench.Run(ctx, spec, o)
	}()
	if err != nil && !errors.Is(err, context.Canceled) {
		log.Error().Err(err).Msg("bench failed")
	}
	return exitCode(err)
}

// displayPath is how the report's record of a bench command names a path:
// as given when relative, relative to the working directory when inside
// it, else ".../" and its last element, so that committed results never
// carry the absolute paths of the machine that made them.
func displayPath(p string) string {
	if !filepath.IsAbs(p) {
		return p
	}
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, p); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return rel
		}
	}
	return ".../" + filepath.Base(p)
}
