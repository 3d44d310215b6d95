package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.yaml.in/yaml/v3"

	"github.com/cde-rl/cde/session"
	"github.com/cde-rl/cde/trainer"
)

// Options say where and how a bench runs.
type Options struct {
	// Dir is the results directory (runs/, base/, results.md ...).
	Dir string
	// Only, when set, restricts training to these arms; the report still
	// covers every arm with finished runs.
	Only []string
	// Jobs is how many arm-seeds train at a time (default 1).
	Jobs int
	// Exe is the cde-run binary each arm-seed trains in, as a child
	// process `Exe train --config ... --run-dir ...` (required by Run).
	Exe string
	// Command is how the bench was invoked, recorded in DIR/commands.txt
	// and quoted by the report.
	Command string
	// Output receives progress lines and the runs' output (nil: none); TTY
	// says it is a terminal (progress bars instead of lines).
	Output io.Writer
	TTY    bool
	// Log receives structured messages (failures, the report's path).
	Log zerolog.Logger
	// LogFormat is how the arm-seeds' log lines reach Output: LogText
	// (the default, "") as text lines, LogJSON as the JSON they wrote
	// (progress.go).
	LogFormat string
	// Executor, when set, overrides the bench file's executor.name
	// (local or slurm).
	Executor string
	// Detach (slurm) returns ErrDetached once the jobs are submitted.
	Detach bool
	// Confirm (slurm) asks a yes/no question on Ctrl-C: whether to cancel
	// the queued and running jobs. nil: leave them.
	Confirm func(question string) bool
	// MaxSeeds, when > 0, makes the bench sequential (--until-conclusive,
	// sequential.go): after the registered seeds, StageSeeds more a stage
	// (default 2) for the arms of the claims still inconclusive, up to
	// MaxSeeds per arm, each look at the increment of the Spending
	// function (SpendPocock, the default, or SpendOBF). A directory that
	// started sequential stays so without them.
	MaxSeeds   int
	StageSeeds int
	Spending   string
}

func (o *Options) out() io.Writer {
	if o.Output == nil {
		return io.Discard
	}
	return o.Output
}

// RunDir is the run directory of one arm-seed of a bench in dir.
func RunDir(dir, arm string, seed uint64) string {
	return filepath.Join(dir, "runs", arm, fmt.Sprintf("seed-%d", seed))
}

// doneMark is the DONE marker of a finished arm-seed.
type doneMark struct {
	Finished string  `json:"finished"`
	Seconds  float64 `json:"seconds"` // training wall time over all attempts
}

// Files of a bench directory and of its runs.
const (
	DoneFile     = "DONE"
	SpecFile     = "bench-input.yaml" // the arm-seed's config from the bench layers
	timeFile     = "bench-time.json"  // wall time of unfinished attempts
	HeadStdFile  = "head_std.json"    // the Figure 7b measurement
	commandsFile = "commands.txt"     // the bench commands that trained into DIR
)

// FailedFile is written into an arm-seed's directory when its attempt
// fails or is interrupted: {"failed": time, "error": why, "command": the
// bench command, which resumes it}; removed when it starts again.
// cde-run board shows it (docs/board.md).
const FailedFile = "bench-failed.json"

// Run validates spec (Validate), trains every arm-seed not yet DONE in
// o.Dir (resuming unfinished ones from their last checkpoint), then writes
// the report (Report) also when some arm-seed failed. A cancelled ctx
// stops the running trainings after they checkpoint and returns
// context.Canceled without a report.
func Run(ctx context.Context, spec *Spec, o Options) error {
	if o.Exe == "" {
		return errors.New("bench: Options.Exe: the cde-run binary to train with is required")
	}
	if err := spec.Validate(o.Dir, o.Only...); err != nil {
		return err
	}
	// One bench at a time per directory: a second would remove or resume
	// the first one's arm-seeds under it.
	lock, err := trainer.LockDir(o.Dir)
	if err != nil {
		return fmt.Errorf("bench: --out %s: %w", o.Dir, err)
	}
	defer lock.Close()
	if err := recordCommand(o.Dir, o.Command); err != nil {
		return err
	}
	if err := registerClaims(spec, o.Dir); err != nil {
		return err
	}
	if o.Executor != "" {
		if !slices.Contains(Executors, o.Executor) {
			return fmt.Errorf("bench: --executor %q: want one of %s", o.Executor, strings.Join(Executors, ", "))
		}
		spec.Executor.Name = o.Executor
	}
	seq, err := sequentialPlan(spec, o, true)
	if err != nil {
		return err
	}
	var runErr error
	switch {
	case seq != nil && spec.Executor.Name == "slurm":
		runErr = runSequential(ctx, spec, o, seq, runSlurm)
	case seq != nil:
		runErr = runSequential(ctx, spec, o, seq, train)
	case spec.Executor.Name == "slurm":
		runErr = runSlurm(ctx, spec, o)
	default:
		runErr = train(ctx, spec, o)
	}
	if errors.Is(runErr, context.Canceled) || errors.Is(runErr, ErrDetached) {
		return runErr
	}
	if rerr := writeReport(spec, o.Dir, o.Command, o.Log); rerr != nil {
		return errors.Join(runErr, rerr)
	}
	return runErr
}

// Report validates spec and writes DIR/results.md, DIR/results.csv and
// DIR/plots/ from the finished arm-seeds in o.Dir; it trains nothing.
func Report(spec *Spec, o Options) error {
	if err := spec.Validate(o.Dir, o.Only...); err != nil {
		return err
	}
	if _, err := sequentialPlan(spec, o, false); err != nil {
		return err
	}
	return writeReport(spec, o.Dir, o.Command, o.Log)
}

// recordCommand adds command to DIR/commands.txt (once), for the report.
func recordCommand(dir, command string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if command == "" {
		return nil
	}
	path := filepath.Join(dir, commandsFile)
	old, _ := os.ReadFile(path)
	for _, l := range strings.Split(string(old), "\n") {
		if l == command {
			return nil
		}
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintln(f, command)
	return f.Close()
}

// job is one arm-seed.
type job struct {
	arm  Arm
	seed uint64
	base string // the base policy resolved up front ("" to let train decide)
}

// armSeeds is every arm-seed of spec, seed-major (every arm of the first
// seed, then the second ...). An arm-seed's index in it is its task number
// (`cde-run bench --worker N`), whatever --only selects.
func armSeeds(spec *Spec) []job {
	var all []job
	for _, seed := range spec.Seeds {
		for _, arm := range spec.Arms {
			all = append(all, job{arm: arm, seed: seed})
		}
	}
	return all
}

// resolveJobBase sets j.base to the base policy of an arm-seed that starts
// afresh (no checkpoint in its run) from model.checkpoint: auto, making it
// when missing; bases caches them by directory, so a base is resolved once.
func resolveJobBase(ctx context.Context, spec *Spec, dir string, j *job, bases map[string]string, log zerolog.Logger, out session.Output) error {
	if ck, _ := trainer.LatestCheckpoint(RunDir(dir, j.arm.Name, j.seed)); ck != "" {
		return nil
	}
	cfg, err := spec.ArmConfig(dir, j.arm, j.seed)
	if err != nil {
		return err
	}
	if cfg.Model.Checkpoint != "auto" {
		return nil
	}
	key := filepath.Join(cfg.Pretrain.Dir, session.BaseKey(cfg))
	if j.base = bases[key]; j.base == "" {
		if !session.BaseAvailable(cfg) && out.W != nil {
			// Say what is about to take a while, before it starts.
			fmt.Fprintf(out.W, "bench: arm %s seed %d: its base policy (%s) is neither made nor shipped: making it first with the supervised warm start, "+
				"at most pretrain.steps = %d steps of %d problems, stopping early at held-out accuracy %g (its progress line shows the ETA). "+
				"A bench with no pretrain.seed makes one base per seed; set pretrain.seed in its base to share one "+
				"(seed 1 with train's default task and model is the shipped base).\n",
				j.arm.Name, j.seed, key, cfg.Pretrain.Steps, cfg.Pretrain.BatchSize, cfg.Pretrain.StopAcc)
		}
		if j.base, err = session.ResolveBase(ctx, cfg, log, out); err != nil {
			return err
		}
		bases[key] = j.base
	}
	return nil
}

// train trains every arm-seed not yet DONE, seed-major (all arms of the
// first seed first, so a bench stopped early still compares every arm),
// with up to o.Jobs arm-seeds at a time.
func train(ctx context.Context, spec *Spec, o Options) error {
	dir, jobs, stderr := o.Dir, max(o.Jobs, 1), o.out()
	var all []job
	for _, j := range armSeeds(spec) {
		if len(o.Only) == 0 || slices.Contains(o.Only, j.arm.Name) {
			all = append(all, j)
		}
	}
	if err := checkArmsMemory(spec, dir, all); err != nil {
		return err
	}
	// Skip the finished ones; make the missing base policies first, one at
	// a time in this process (so parallel runs never pretrain the same base
	// twice).
	var todo []job
	bases := map[string]string{}
	finished := 0
	for i, j := range all {
		run := RunDir(dir, j.arm.Name, j.seed)
		if _, err := os.Stat(filepath.Join(run, DoneFile)); err == nil {
			if err := checkSpecUnchanged(spec, dir, j.arm, j.seed, run); err != nil {
				return err
			}
			finished++
			fmt.Fprintf(stderr, "bench [%d/%d] %s seed %d: done, skipping (%s)\n", i+1, len(all), j.arm.Name, j.seed, run)
			continue
		}
		if err := resolveJobBase(ctx, spec, dir, &j, bases, o.Log, session.Output{W: stderr, TTY: o.TTY}); err != nil {
			return err
		}
		todo = append(todo, j)
	}
	if spec.BaseEval {
		for _, seed := range spec.Seeds {
			if err := evalBase(ctx, spec, dir, seed, stderr, o.Log); err != nil {
				return fmt.Errorf("bench: base evaluation, seed %d: %w", seed, err)
			}
		}
	}
	start := time.Now()
	var mu sync.Mutex // guards the counters below and output lines
	var durations []time.Duration
	var failed []FailedSeed
	started := 0
	eta := func() string {
		if len(durations) == 0 {
			return "unknown"
		}
		var sum time.Duration
		for _, d := range durations {
			sum += d
		}
		left := len(todo) - len(durations) - len(failed)
		return (sum / time.Duration(len(durations)) * time.Duration(left) / time.Duration(min(jobs, max(left, 1)))).Round(time.Second).String()
	}
	env, threads := childEnv(os.Environ(), jobs, runtime.NumCPU())
	if threads > 0 {
		fmt.Fprintf(stderr, "bench: %d arm-seeds at a time on %d cores: each runs with GOMAXPROCS=%d (set GOMAXPROCS to choose)\n", jobs, runtime.NumCPU(), threads)
	}
	work := make(chan job)
	var wg sync.WaitGroup
	for range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				if ctx.Err() != nil {
					continue
				}
				run := RunDir(dir, j.arm.Name, j.seed)
				mu.Lock()
				started++
				label := fmt.Sprintf("bench [%d/%d] %s seed %d", finished+started, len(all), j.arm.Name, j.seed)
				fmt.Fprintf(stderr, "%s: starting (%d/%d arm-seeds done, bench elapsed %s, ETA %s)\n",
					label, finished+len(durations), len(all), time.Since(start).Round(time.Second), eta())
				mu.Unlock()
				out := stderr
				if jobs > 1 {
					out = &prefixWriter{mu: &mu, w: stderr, prefix: fmt.Sprintf("[%s seed %d] ", j.arm.Name, j.seed)}
				}
				co := newChildOutput(out, o.LogFormat)
				t0 := time.Now()
				os.Remove(filepath.Join(run, FailedFile))
				err := runArmSeed(ctx, o.Exe, spec, dir, j, run, env, co, o.Log)
				co.Flush()
				if err != nil {
					why := err.Error()
					if le := co.LastError(); le != "" {
						why = le + " (" + why + ")" // the child's own last error first
					}
					if ctx.Err() != nil {
						why = "interrupted: the bench was stopped"
					}
					if _, serr := os.Stat(run); serr == nil {
						data, _ := json.Marshal(map[string]string{"failed": time.Now().UTC().Format(time.RFC3339), "error": why, "command": o.Command})
						os.WriteFile(filepath.Join(run, FailedFile), append(data, '\n'), 0o644)
					}
				}
				if pw, ok := out.(*prefixWriter); ok {
					pw.Flush()
				}
				mu.Lock()
				switch {
				case ctx.Err() != nil:
					fmt.Fprintf(stderr, "%s: interrupted; rerun the same command to continue\n", label)
				case err != nil:
					reason := co.LastError()
					if reason == "" {
						reason = err.Error()
					}
					failed = append(failed, FailedSeed{Arm: j.arm.Name, Seed: j.seed, Reason: reason})
					if o.LogFormat == LogJSON {
						o.Log.Error().Err(err).Str("arm", j.arm.Name).Uint64("seed", j.seed).Msg("arm-seed failed")
					}
					fmt.Fprint(stderr, failedLine(label, time.Since(t0), reason, o.Command))
				default:
					durations = append(durations, time.Since(t0))
					fmt.Fprintf(stderr, "%s: finished in %s (%d/%d arm-seeds done, ETA %s)\n", label,
						time.Since(t0).Round(time.Second), finished+len(durations), len(all), eta())
				}
				mu.Unlock()
			}
		}()
	}
	for _, j := range todo {
		if ctx.Err() != nil {
			break
		}
		work <- j
	}
	close(work)
	wg.Wait()
	if ctx.Err() != nil {
		return context.Canceled
	}
	if len(failed) > 0 {
		return &SeedsFailedError{Failed: failed, Command: o.Command}
	}
	return nil
}

// prefixWriter writes whole lines, each with a prefix, under a shared lock
// (the output of parallel runs).
type prefixWriter struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := strings.IndexAny(string(p.buf), "\n\r")
		if i < 0 {
			return len(b), nil
		}
		line := p.buf[:i]
		if len(line) > 0 {
			p.mu.Lock()
			fmt.Fprintf(p.w, "%s%s\n", p.prefix, line)
			p.mu.Unlock()
		}
		p.buf = p.buf[i+1:]
	}
}

// Flush writes a last unterminated line.
func (p *prefixWriter) Flush() {
	if len(p.buf) > 0 {
		p.Write([]byte("\n"))
	}
}

// checkSpecUnchanged refuses to reuse a run whose bench config changed.
// The bench's own base directory (pretrain.dir, DIR/base) counts as
// unchanged when it names the same directory: a rerun may spell --out
// relatively where the first run spelt it absolutely.
func checkSpecUnchanged(spec *Spec, dir string, arm Arm, seed uint64, run string) error {
	old, err := os.ReadFile(filepath.Join(run, SpecFile))
	if err != nil {
		return nil // made by hand or by an older bench: trust it
	}
	cfg, err := spec.ArmConfig(dir, arm, seed)
	if err != nil {
		return err
	}
	now, _ := yaml.Marshal(cfg.Raw)
	if string(now) != string(old) {
		old = samePretrainDir(old, now)
	}
	if string(now) != string(old) {
		return fmt.Errorf("bench: %s: the config of arm %s seed %d changed since this run was made (see %s); remove %s to rerun it",
			run, arm.Name, seed, filepath.Join(run, SpecFile), run)
	}
	return nil
}

// runArmSeed trains one arm-seed in its run directory (resuming from its
// last checkpoint when it has one), measures the critic head spread when
// the run has several heads, and writes DONE.
func runArmSeed(ctx context.Context, exe string, spec *Spec, dir string, j job, run string, env []string, out io.Writer, log zerolog.Logger) error {
	arm, seed := j.arm, j.seed
	cfg, err := spec.ArmConfig(dir, arm, seed)
	if err != nil {
		return err
	}
	specYAML, _ := yaml.Marshal(cfg.Raw)
	var prev float64
	if data, err := os.ReadFile(filepath.Join(run, timeFile)); err == nil {
		var bt doneMark
		if json.Unmarshal(data, &bt) == nil {
			prev = bt.Seconds
		}
	}
	ckpt := ""
	if _, err := os.Stat(run); err == nil {
		// Never touch an arm-seed another cde-run is training (a `train
		// --resume` started by hand, say).
		if err := trainer.CheckNotInUse(run); err != nil {
			return err
		}
		if ckpt, err = trainer.LatestCheckpoint(run); err != nil {
			return err
		}
		if _, err := os.Stat(filepath.Join(run, "config.yaml")); ckpt != "" && err != nil {
			// Checkpoints with no config.yaml beside them: a run directory
			// cut short while it was being made (or emptied under a
			// running trainer). It cannot be resumed; start it again.
			fmt.Fprintf(out, "bench: %s seed %d: %s has checkpoints but no config.yaml; starting it again\n", arm.Name, seed, run)
			ckpt = ""
		}
	}
	if ckpt != "" {
		if err := checkSpecUnchanged(spec, dir, arm, seed, run); err != nil {
			return err
		}
	}
	var args []string
	if ckpt != "" {
		fmt.Fprintf(out, "bench: %s seed %d: resuming from %s\n", arm.Name, seed, ckpt)
		args = []string{"train", "--resume", run, "--summary", "none"}
	} else {
		// Nothing to resume: start clean.
		if err := os.RemoveAll(run); err != nil {
			return err
		}
		if err := os.MkdirAll(run, 0o755); err != nil {
			return err
		}
		input := specYAML
		if j.base != "" {
			extra, _ := yaml.Marshal(map[string]any{"model": map[string]any{"checkpoint": j.base}})
			full, err := spec.ArmConfig(dir, arm, seed, extra)
			if err != nil {
				return err
			}
			input, _ = yaml.Marshal(full.Raw)
		}
		if err := os.WriteFile(filepath.Join(run, SpecFile), specYAML, 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(run, "bench-train.yaml"), input, 0o644); err != nil {
			return err
		}
		args = []string{"train", "--config", filepath.Join(run, "bench-train.yaml"), "--run-dir", run, "--summary", "none"}
	}
	t0 := time.Now()
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = env
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 2 * time.Minute
	runErr := runChild(cmd)
	secs := prev + time.Since(t0).Seconds()
	if runErr != nil {
		data, _ := json.Marshal(doneMark{Seconds: secs})
		os.WriteFile(filepath.Join(run, timeFile), data, 0o644)
		if ctx.Err() != nil {
			return context.Canceled
		}
		return fmt.Errorf("%s %s: %w", exe, strings.Join(args, " "), runErr)
	}
	if err := measureHeadStd(ctx, run, log); err != nil { // one at a time: it builds a model in this process
		return fmt.Errorf("critic head std: %w", err)
	}
	data, _ := json.MarshalIndent(doneMark{Finished: time.Now().UTC().Format(time.RFC3339), Seconds: secs}, "", "  ")
	return os.WriteFile(filepath.Join(run, DoneFile), append(data, '\n'), 0o644)
}

// samePretrainDir returns old (a stored arm-seed config) with its
// pretrain.dir spelt as in now when the two name the same directory, by
// absolute path or by os.SameFile.
func samePretrainDir(old, now []byte) []byte {
	var o, n map[string]any
	if yaml.Unmarshal(old, &o) != nil || yaml.Unmarshal(now, &n) != nil {
		return old
	}
	dirOf := func(m map[string]any) (string, bool) {
		p, ok := m["pretrain"].(map[string]any)
		if !ok {
			return "", false
		}
		d, ok := p["dir"].(string)
		return d, ok
	}
	od, ok1 := dirOf(o)
	nd, ok2 := dirOf(n)
	if !ok1 || !ok2 || od == nd {
		return old
	}
	same := false
	if oa, err := filepath.Abs(od); err == nil {
		if na, err := filepath.Abs(nd); err == nil && oa == na {
			same = true
		}
	}
	if !same {
		so, err1 := os.Stat(od)
		sn, err2 := os.Stat(nd)
		same = err1 == nil && err2 == nil && os.SameFile(so, sn)
	}
	if !same {
		return old
	}
	o["pretrain"].(map[string]any)["dir"] = nd
	b, err := yaml.Marshal(o)
	if err != nil {
		return old
	}
	return b
}

// checkArmsMemory applies the memory check that each arm-seed's cde-run
// train would apply (session.CheckMemory against session.MemoryLimit, on
// the arm's config for its first unfinished seed) before anything trains,
// so a bench does not fail hours in when it reaches an arm too large for
// this machine. Each arm-seed is checked alone, as its process checks
// itself; --jobs N runs N of them at once.
func checkArmsMemory(spec *Spec, dir string, jobs []job) error {
	limit, what, err := session.MemoryLimit()
	if err != nil || limit <= 0 {
		return err
	}
	seen := map[string]bool{}
	for _, j := range jobs {
		if seen[j.arm.Name] {
			continue
		}
		if _, err := os.Stat(filepath.Join(RunDir(dir, j.arm.Name, j.seed), DoneFile)); err == nil {
			continue
		}
		seen[j.arm.Name] = true
		cfg, err := spec.ArmConfig(dir, j.arm, j.seed)
		if err != nil {
			return err
		}
		e, err := session.EstimateConfig(cfg)
		if err != nil {
			return fmt.Errorf("bench %s: arm %s: %w", spec.File, j.arm.Name, err)
		}
		if err := session.CheckMemory(e, limit, what); err != nil {
			return fmt.Errorf("bench %s: arm %s (checked before any arm-seed trains): %w", spec.File, j.arm.Name, err)
		}
	}
	return nil
}

// childEnv is the environment of an arm-seed's cde-run train: env with
// GOMLX_NO_AUTO_INSTALL=1 and, when jobs > 1 run at once and env does not
// set GOMAXPROCS, GOMAXPROCS = cores / jobs (at least 1), so the children's
// cpu-engine threads do not outnumber the cores: the engine's helpers spin
// a while between ops, which starves a neighbour process. Two children side
// by side on 2 cores (12 GRPO steps of bench/transfer.yaml's testbed, A B A
// B, nothing else running) took 2.76-3.05 s a step with GOMAXPROCS=1 each
// and 5.81-6.45 s with 2 each. threads is the value set, 0 when none. A
// run reproduces bit for bit for a given GOMAXPROCS (docs/engine.md), and
// so does a rerun of the bench with the same --jobs on as many cores.
func childEnv(env []string, jobs, cores int) (out []string, threads int) {
	out = append(slices.Clone(env), "GOMLX_NO_AUTO_INSTALL=1")
	if jobs <= 1 {
		return out, 0
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "GOMAXPROCS=") {
			return out, 0
		}
	}
	threads = max(1, cores/jobs)
	return append(out, fmt.Sprintf("GOMAXPROCS=%d", threads)), threads
}
