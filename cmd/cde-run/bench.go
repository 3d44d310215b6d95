package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/cde-rl/cde/bench"
	"github.com/cde-rl/cde/internal/summary"
)

// cmdBench wires the flags of `cde-run bench` to package bench.
func cmdBench(args []string) int {
	fs := newFlagSet("bench", "bench -c|--config BENCH.yaml [--out DIR] [--jobs N] [--only ARM]... [--executor local|slurm [--detach]] [--report-only] [--plan N] [--worker base|N]")
	file := fs.String("c", "", "the bench file (arms x seeds over a base config; docs/bench.md), or a shipped preset by name from any directory: "+strings.Join(bench.Presets(), ", "))
	fs.StringVar(file, "config", "", "same as -c")
	out := fs.String("out", "", "results directory (default bench-results/<bench file stem>)")
	var only stringList
	fs.Var(&only, "only", "run only this arm (repeatable); the report covers every arm with finished runs")
	jobs := fs.Int("jobs", 1, "arm-seeds trained at a time (each uses about one core)")
	reportOnly := fs.Bool("report-only", false, "write the report from the finished runs in DIR; train nothing")
	executor := fs.String("executor", "", "where the arm-seeds train: local (child processes, --jobs at a time) or slurm (a Slurm job array; docs/bench.md); default: the bench file's executor.name, else local")
	detach := fs.Bool("detach", false, "with slurm: submit the jobs, record them in DIR and return; the same command again follows them and writes the report")
	worker := fs.String("worker", "", "internal, what a Slurm job runs: base (the base policies and evaluations) or N (arm-seed number N)")
	plan := fs.Int("plan", 0, "print a power plan for N seeds from the finished runs in DIR as the pilot (the report's Power table, projected); train nothing")
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
		// An absolute --out inside the working directory is used as a
		// relative path, so the arm-seeds' configs (pretrain.dir, the base
		// policy) and the report record no absolute path of this machine.
		o.Dir = insideRelative(o.Dir)
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
			ctx, stop := signalContext()
			defer stop()
			return bench.Work(ctx, spec, o, *worker)
		}
		o.Executor, o.Detach = *executor, *detach
		if *executor != "" {
			o.Command += " --executor " + *executor
		}
		if stdinIsTTY() {
			o.Confirm = askYesNo
		}
		began := time.Now()
		if *reportOnly {
			o.Command += " --report-only"
			err = bench.Report(spec, o)
		} else {
			if o.Exe, err = os.Executable(); err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			err = bench.Run(ctx, spec, o)
		}
		if err == nil {
			benchSummary(os.Stderr, o.Dir, time.Since(began))
		}
		if errors.Is(err, bench.ErrDetached) {
			return nil
		}
		return err
	}()
	if err != nil && !errors.Is(err, context.Canceled) {
		log.Error().Err(err).Msg("bench failed")
	}
	return exitCode(err)
}

func stdinIsTTY() bool { return isatty.IsTerminal(os.Stdin.Fd()) }

// askYesNo asks question on stderr and reads the answer from stdin: true
// for y or yes.
func askYesNo(question string) bool {
	fmt.Fprintf(os.Stderr, "%s [y/N] ", question)
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	a := strings.ToLower(strings.TrimSpace(line))
	return a == "y" || a == "yes"
}

// insideRelative is p relative to the working directory when p is an
// absolute path inside it, else p unchanged.
func insideRelative(p string) string {
	if !filepath.IsAbs(p) {
		return p
	}
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, p); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return rel
		}
	}
	return p
}

// displayPath is how the report's record of a bench command names a path:
// as given when relative, relative to the working directory when inside
// it, else ".../" and its last element, so that committed results never
// carry the absolute paths of the machine that made them.
func displayPath(p string) string {
	if r := insideRelative(p); !filepath.IsAbs(r) {
		return r
	}
	return ".../" + filepath.Base(p)
}

// benchSummary ends a bench with a table a person reads: where the report
// is, the wall time, and per arm the seeds and the mean ± std over seeds
// of the main metrics of DIR/results.csv (the val/mean/* columns, else
// the first four evaluation columns; then train/acc and wall_s).
func benchSummary(w io.Writer, dir string, took time.Duration) {
	f, err := os.Open(filepath.Join(dir, "results.csv"))
	if err != nil {
		return
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil || len(recs) < 1 {
		return
	}
	head := recs[0]
	var cols, rest []int // indices of the _mean columns shown
	for i, h := range head {
		name, ok := strings.CutSuffix(h, "_mean")
		switch {
		case !ok:
		case name == "train/acc" || name == "wall_s":
			rest = append(rest, i)
		case strings.HasPrefix(name, "val/mean/"):
			cols = append(cols, i)
		}
	}
	if len(cols) == 0 {
		for i, h := range head {
			if name, ok := strings.CutSuffix(h, "_mean"); ok && name != "train/acc" && name != "wall_s" && len(cols) < 4 {
				cols = append(cols, i)
			}
		}
	}
	cols = append(cols, rest...)
	header := []string{"arm", "seeds"}
	for _, i := range cols {
		header = append(header, strings.TrimSuffix(head[i], "_mean"))
	}
	var rows [][]string
	for _, r := range recs[1:] {
		if len(r) != len(head) {
			continue
		}
		row := []string{r[0], r[1]}
		for _, i := range cols {
			row = append(row, meanStd(r[i], r[i+1]))
		}
		rows = append(rows, row)
	}
	summary.Rows(w, "bench finished", []summary.Fact{{Label: "report", Value: filepath.Join(dir, "results.md")},
		{Label: "runs", Value: filepath.Join(dir, "runs")}, {Label: "wall time", Value: fmt.Sprintf("%.1f s", took.Seconds())},
		{Label: "columns", Value: "mean ± std over seeds of the final values (all columns: results.csv)"}}, header, rows)
}

// meanStd writes a results.csv mean and std as "m ± s" ("-" when empty).
func meanStd(m, s string) string {
	mv, err := strconv.ParseFloat(m, 64)
	if err != nil {
		return "-"
	}
	out := summary.Num(mv)
	if sv, err := strconv.ParseFloat(s, 64); err == nil {
		out += " ± " + summary.Num(sv)
	}
	return out
}
