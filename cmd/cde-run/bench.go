package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"gopkg.in/yaml.v3"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/session"
	"github.com/cde-rl/cde/tasks"
)

// benchSpec is a parsed BENCH.yaml (docs/bench.md).
type benchSpec struct {
	File        string // the bench file as given
	Stem        string // its name without directory and extension
	Description string
	Base        []byte // the base config as a YAML document
	Seeds       []uint64
	Arms        []benchArm
	Claims      []benchClaim
}

type benchArm struct {
	Name    string
	Overlay []byte // YAML document ("" for none)
}

type benchClaim struct {
	Name          string
	Better, Than  string
	Metric        string
	LowerIsBetter bool
}

var armNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// benchErr names the bench file and the key.
func benchErr(file, key, format string, args ...any) error {
	return fmt.Errorf("bench %s: %s: %s", file, key, fmt.Sprintf(format, args...))
}

func checkKeys(file, where string, m map[string]any, known ...string) error {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ok := false
		for _, kk := range known {
			ok = ok || k == kk
		}
		if !ok {
			path := k
			if where != "" {
				path = where + "." + k
			}
			return benchErr(file, path, "unknown key (known keys here: %s)", strings.Join(known, ", "))
		}
	}
	return nil
}

func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int64:
		return x, true
	case uint64:
		return int64(x), true
	case float64:
		if x == math.Trunc(x) {
			return int64(x), true
		}
	}
	return 0, false
}

// loadBenchSpec reads and strictly validates a bench file. It does not
// check the arms' configs (validateBench does).
func loadBenchSpec(path string) (*benchSpec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	return parseBenchSpec(path, data)
}

func parseBenchSpec(path string, data []byte) (*benchSpec, error) {
	var top map[string]any
	if err := yaml.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("bench %s: %w", path, err)
	}
	if top == nil {
		return nil, fmt.Errorf("bench %s: empty file", path)
	}
	if err := checkKeys(path, "", top, "description", "base", "seeds", "arms", "claims"); err != nil {
		return nil, err
	}
	spec := &benchSpec{File: path, Stem: strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))}
	if d, ok := top["description"]; ok {
		s, isStr := d.(string)
		if !isStr {
			return nil, benchErr(path, "description", "want a string, got %v (%T)", d, d)
		}
		spec.Description = s
	}

	switch b := top["base"].(type) {
	case nil:
		return nil, benchErr(path, "base", "required: a config mapping or the path of a config file")
	case string:
		file := b
		if !filepath.IsAbs(file) {
			file = filepath.Join(filepath.Dir(path), file)
		}
		d, err := os.ReadFile(file)
		if err != nil {
			return nil, benchErr(path, "base", "%v", err)
		}
		spec.Base = d
	case map[string]any:
		d, err := yaml.Marshal(b)
		if err != nil {
			return nil, benchErr(path, "base", "%v", err)
		}
		spec.Base = d
	default:
		return nil, benchErr(path, "base", "want a config mapping or a file path, got %v (%T)", b, b)
	}

	seeds, ok := top["seeds"].([]any)
	if !ok || len(seeds) == 0 {
		return nil, benchErr(path, "seeds", "required: a non-empty list of seeds, got %v", top["seeds"])
	}
	seen := map[int64]bool{}
	for i, s := range seeds {
		n, ok := asInt(s)
		if !ok || n < 0 {
			return nil, benchErr(path, fmt.Sprintf("seeds[%d]", i), "want an integer >= 0, got %v", s)
		}
		if seen[n] {
			return nil, benchErr(path, fmt.Sprintf("seeds[%d]", i), "seed %d listed twice", n)
		}
		seen[n] = true
		spec.Seeds = append(spec.Seeds, uint64(n))
	}

	arms, ok := top["arms"].([]any)
	if !ok || len(arms) == 0 {
		return nil, benchErr(path, "arms", "required: a non-empty list of {name, config}")
	}
	names := map[string]bool{}
	for i, a := range arms {
		key := fmt.Sprintf("arms[%d]", i)
		m, ok := a.(map[string]any)
		if !ok {
			return nil, benchErr(path, key, "want a mapping {name, config}, got %v", a)
		}
		if err := checkKeys(path, key, m, "name", "config"); err != nil {
			return nil, err
		}
		name, _ := m["name"].(string)
		if !armNameRE.MatchString(name) {
			return nil, benchErr(path, key+".name", "want a name of letters, digits, '_', '.', '-', got %v", m["name"])
		}
		if names[name] {
			return nil, benchErr(path, key+".name", "arm %q listed twice", name)
		}
		names[name] = true
		arm := benchArm{Name: name}
		switch c := m["config"].(type) {
		case nil:
		case map[string]any:
			d, err := yaml.Marshal(c)
			if err != nil {
				return nil, benchErr(path, key+".config", "%v", err)
			}
			arm.Overlay = d
		default:
			return nil, benchErr(path, key+".config", "want a config mapping, got %v (%T)", c, c)
		}
		spec.Arms = append(spec.Arms, arm)
	}

	if v, ok := top["claims"]; ok && v != nil {
		claims, ok := v.([]any)
		if !ok {
			return nil, benchErr(path, "claims", "want a list of {name, better, than, metric, lower_is_better}")
		}
		for i, c := range claims {
			key := fmt.Sprintf("claims[%d]", i)
			m, ok := c.(map[string]any)
			if !ok {
				return nil, benchErr(path, key, "want a mapping, got %v", c)
			}
			if err := checkKeys(path, key, m, "name", "better", "than", "metric", "lower_is_better"); err != nil {
				return nil, err
			}
			var cl benchClaim
			for _, f := range []struct {
				k   string
				dst *string
			}{{"name", &cl.Name}, {"better", &cl.Better}, {"than", &cl.Than}, {"metric", &cl.Metric}} {
				s, ok := m[f.k].(string)
				if !ok || s == "" {
					return nil, benchErr(path, key+"."+f.k, "required string, got %v", m[f.k])
				}
				*f.dst = s
			}
			for _, f := range []string{"better", "than"} {
				arm := cl.Better
				if f == "than" {
					arm = cl.Than
				}
				if !names[arm] {
					return nil, benchErr(path, key+"."+f, "no arm named %q", arm)
				}
			}
			if cl.Better == cl.Than {
				return nil, benchErr(path, key+".than", "compares arm %q with itself", cl.Than)
			}
			if v, ok := m["lower_is_better"]; ok {
				b, isBool := v.(bool)
				if !isBool {
					return nil, benchErr(path, key+".lower_is_better", "want true or false, got %v", v)
				}
				cl.LowerIsBetter = b
			}
			spec.Claims = append(spec.Claims, cl)
		}
	}
	return spec, nil
}

// armLayers are the config layers of one arm-seed: pretrain.dir under the
// bench directory (unless the base or the arm sets it) < base < arm < seed.
func (s *benchSpec) armLayers(dir string, arm benchArm, seed uint64) [][]byte {
	pd, _ := yaml.Marshal(map[string]any{"pretrain": map[string]any{"dir": filepath.Join(dir, "base")}})
	layers := [][]byte{pd, s.Base}
	if len(arm.Overlay) > 0 {
		layers = append(layers, arm.Overlay)
	}
	return append(layers, []byte(fmt.Sprintf("seed: %d\n", seed)))
}

func (s *benchSpec) armConfig(dir string, arm benchArm, seed uint64, extra ...[]byte) (*core.Config, error) {
	cfg, err := core.LoadConfig(core.LoadOptions{Layers: append(s.armLayers(dir, arm, seed), extra...)})
	if err != nil {
		return nil, fmt.Errorf("bench %s: arm %s: %w", s.File, arm.Name, err)
	}
	return cfg, nil
}

// validateBench resolves every arm-seed's config and builds its task,
// algorithm and strategies, so a bad key fails before anything runs.
func validateBench(s *benchSpec, dir string) error {
	for _, arm := range s.Arms {
		for _, seed := range s.Seeds {
			cfg, err := s.armConfig(dir, arm, seed)
			if err != nil {
				return err
			}
			if seed != s.Seeds[0] {
				continue
			}
			if _, err := criticHeads(cfg); err != nil {
				return fmt.Errorf("bench %s: arm %s: %w", s.File, arm.Name, err)
			}
		}
	}
	return nil
}

// criticHeads builds the task, algorithm and strategies of cfg (no model)
// and returns the number of critic heads the run will have (0: no critic).
func criticHeads(cfg *core.Config) (int, error) {
	task, err := tasks.New(core.NewParams("task", cfg.Task))
	if err != nil {
		return 0, err
	}
	algo, err := session.BuildAlgorithm(cfg)
	if err != nil {
		return 0, err
	}
	strats, err := session.BuildStrategies(cfg, algo, zerolog.Nop())
	if err != nil {
		return 0, err
	}
	defer func() {
		for _, st := range strats {
			if c, ok := st.(core.Closer); ok {
				c.Close()
			}
		}
	}()
	tr := &core.Trainer{Cfg: cfg, Task: task, Algo: algo, Strategies: strats}
	n, err := tr.Needs()
	return n.ValueHeads, err
}

func runDirOf(dir, arm string, seed uint64) string {
	return filepath.Join(dir, "runs", arm, fmt.Sprintf("seed-%d", seed))
}

// benchDone is the DONE marker of a finished arm-seed.
type benchDone struct {
	Finished string  `json:"finished"`
	Seconds  float64 `json:"seconds"` // training wall time over all attempts
}

const (
	doneFile     = "DONE"
	specFile     = "bench-input.yaml" // the arm-seed's config from the bench layers
	timeFile     = "bench-time.json"  // wall time of unfinished attempts
	headStdFile  = "head_std.json"    // the Figure 7b measurement
	commandsFile = "commands.txt"     // the bench commands that trained into DIR
)

func cmdBench(args []string) int {
	fs := newFlagSet("bench", "bench -c BENCH.yaml [--out DIR] [--only ARM]... [--report-only]")
	file := fs.String("c", "", "the bench file (arms x seeds over a base config; docs/bench.md)")
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
		spec, err := loadBenchSpec(*file)
		if err != nil {
			return err
		}
		dir := *out
		if dir == "" {
			dir = filepath.Join("bench-results", spec.Stem)
		}
		for _, o := range only {
			found := false
			for _, a := range spec.Arms {
				found = found || a.Name == o
			}
			if !found {
				return fmt.Errorf("bench: --only %s: no such arm in %s", o, *file)
			}
		}
		if err := validateBench(spec, dir); err != nil {
			return err
		}
		command := "cde-run bench -c " + *file
		if *out != "" {
			command += " --out " + *out
		}
		for _, o := range only {
			command += " --only " + o
		}
		if *jobs > 1 {
			command += fmt.Sprintf(" --jobs %d", *jobs)
		}
		if !*reportOnly {
			if err := recordCommand(dir, command); err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			runErr := runBench(ctx, spec, dir, only, *jobs, log, tty)
			if errors.Is(runErr, context.Canceled) {
				return runErr
			}
			if rerr := writeReport(spec, dir, command, log); rerr != nil {
				return errors.Join(runErr, rerr)
			}
			return runErr
		}
		return writeReport(spec, dir, command+" --report-only", log)
	}()
	if err != nil && !errors.Is(err, context.Canceled) {
		log.Error().Err(err).Msg("bench failed")
	}
	return exitCode(err)
}

// recordCommand adds command to DIR/commands.txt (once), for the report.
func recordCommand(dir, command string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
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

// benchJob is one arm-seed.
type benchJob struct {
	arm  benchArm
	seed uint64
	base string // the base policy resolved up front ("" to let train decide)
}

// runBench trains every arm-seed not yet DONE, seed-major (all arms of the
// first seed first, so a bench stopped early still compares every arm),
// with up to jobs arm-seeds at a time.
func runBench(ctx context.Context, spec *benchSpec, dir string, only []string, jobs int, log zerolog.Logger, tty bool) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var all []benchJob
	for _, seed := range spec.Seeds {
		for _, arm := range spec.Arms {
			if len(only) == 0 || contains(only, arm.Name) {
				all = append(all, benchJob{arm: arm, seed: seed})
			}
		}
	}
	// Skip the finished ones; make the missing base policies first, one at
	// a time in this process (so parallel runs never pretrain the same base
	// twice).
	var todo []benchJob
	bases := map[string]string{}
	finished := 0
	for i, j := range all {
		run := runDirOf(dir, j.arm.Name, j.seed)
		if _, err := os.Stat(filepath.Join(run, doneFile)); err == nil {
			if err := checkSpecUnchanged(spec, dir, j.arm, j.seed, run); err != nil {
				return err
			}
			finished++
			fmt.Fprintf(os.Stderr, "bench [%d/%d] %s seed %d: done, skipping (%s)\n", i+1, len(all), j.arm.Name, j.seed, run)
			continue
		}
		if ck, _ := core.LatestCheckpoint(run); ck == "" {
			cfg, err := spec.armConfig(dir, j.arm, j.seed)
			if err != nil {
				return err
			}
			if cfg.Model.Checkpoint == "auto" {
				key := filepath.Join(cfg.Pretrain.Dir, session.BaseKey(cfg))
				if j.base = bases[key]; j.base == "" {
					if j.base, err = session.ResolveBase(ctx, cfg, log, session.Output{W: os.Stderr, TTY: tty}); err != nil {
						return err
					}
					bases[key] = j.base
				}
			}
		}
		todo = append(todo, j)
	}
	start := time.Now()
	var mu sync.Mutex // guards the counters below and stderr lines
	var durations []time.Duration
	var failed []string
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
	work := make(chan benchJob)
	var wg sync.WaitGroup
	for range max(jobs, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				if ctx.Err() != nil {
					continue
				}
				run := runDirOf(dir, j.arm.Name, j.seed)
				mu.Lock()
				started++
				label := fmt.Sprintf("bench [%d/%d] %s seed %d", finished+started, len(all), j.arm.Name, j.seed)
				fmt.Fprintf(os.Stderr, "%s: starting (%d/%d arm-seeds done, bench elapsed %s, ETA %s)\n",
					label, finished+len(durations), len(all), time.Since(start).Round(time.Second), eta())
				mu.Unlock()
				out := io.Writer(os.Stderr)
				childTTY := tty
				if jobs > 1 {
					out, childTTY = &prefixWriter{mu: &mu, w: os.Stderr, prefix: fmt.Sprintf("[%s seed %d] ", j.arm.Name, j.seed)}, false
				}
				t0 := time.Now()
				err := runArmSeed(ctx, self, spec, dir, j, run, out, log, childTTY)
				if pw, ok := out.(*prefixWriter); ok {
					pw.Flush()
				}
				mu.Lock()
				switch {
				case ctx.Err() != nil:
					fmt.Fprintf(os.Stderr, "%s: interrupted; rerun the same command to continue\n", label)
				case err != nil:
					log.Error().Err(err).Str("arm", j.arm.Name).Uint64("seed", j.seed).Msg("arm-seed failed")
					failed = append(failed, fmt.Sprintf("%s seed %d", j.arm.Name, j.seed))
				default:
					durations = append(durations, time.Since(t0))
					fmt.Fprintf(os.Stderr, "%s: finished in %s (%d/%d arm-seeds done, ETA %s)\n", label,
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
		return fmt.Errorf("bench: %d arm-seed(s) failed: %s (rerun to retry them)", len(failed), strings.Join(failed, ", "))
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
func checkSpecUnchanged(spec *benchSpec, dir string, arm benchArm, seed uint64, run string) error {
	old, err := os.ReadFile(filepath.Join(run, specFile))
	if err != nil {
		return nil // made by hand or by an older bench: trust it
	}
	cfg, err := spec.armConfig(dir, arm, seed)
	if err != nil {
		return err
	}
	now, _ := yaml.Marshal(cfg.Raw)
	if string(now) != string(old) {
		return fmt.Errorf("bench: %s: the config of arm %s seed %d changed since this run was made (see %s); remove %s to rerun it",
			run, arm.Name, seed, filepath.Join(run, specFile), run)
	}
	return nil
}

// runArmSeed trains one arm-seed in its run directory (resuming from its
// last checkpoint when it has one), measures the critic head spread when
// the run has several heads, and writes DONE.
func runArmSeed(ctx context.Context, self string, spec *benchSpec, dir string, j benchJob, run string, out io.Writer,
	log zerolog.Logger, tty bool) error {
	arm, seed := j.arm, j.seed
	cfg, err := spec.armConfig(dir, arm, seed)
	if err != nil {
		return err
	}
	specYAML, _ := yaml.Marshal(cfg.Raw)
	var prev float64
	if data, err := os.ReadFile(filepath.Join(run, timeFile)); err == nil {
		var bt benchDone
		if json.Unmarshal(data, &bt) == nil {
			prev = bt.Seconds
		}
	}
	ckpt := ""
	if _, err := os.Stat(run); err == nil {
		if ckpt, err = core.LatestCheckpoint(run); err != nil {
			return err
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
		args = []string{"train", "--resume", run}
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
			full, err := spec.armConfig(dir, arm, seed, extra)
			if err != nil {
				return err
			}
			input, _ = yaml.Marshal(full.Raw)
		}
		if err := os.WriteFile(filepath.Join(run, specFile), specYAML, 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(run, "bench-train.yaml"), input, 0o644); err != nil {
			return err
		}
		args = []string{"train", "--config", filepath.Join(run, "bench-train.yaml"), "--run-dir", run}
	}
	t0 := time.Now()
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), "GOMLX_NO_AUTO_INSTALL=1")
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 2 * time.Minute
	runErr := cmd.Run()
	secs := prev + time.Since(t0).Seconds()
	if runErr != nil {
		data, _ := json.Marshal(benchDone{Seconds: secs})
		os.WriteFile(filepath.Join(run, timeFile), data, 0o644)
		if ctx.Err() != nil {
			return context.Canceled
		}
		return fmt.Errorf("%s %s: %w", self, strings.Join(args, " "), runErr)
	}
	if err := measureHeadStd(ctx, run, log); err != nil { // one at a time: it builds a model in this process
		return fmt.Errorf("critic head std: %w", err)
	}
	data, _ := json.MarshalIndent(benchDone{Finished: time.Now().UTC().Format(time.RFC3339), Seconds: secs}, "", "  ")
	return os.WriteFile(filepath.Join(run, doneFile), append(data, '\n'), 0o644)
}

// headStdProblems is how many prompts per set the Figure 7b measurement
// uses, and headStdSamples the responses per prompt.
const (
	headStdProblems = 64
	headStdSamples  = 2
)

var headStdMu sync.Mutex

// headStd is the Figure 7b measurement of one run: the mean over response
// tokens of the std across critic heads, per prompt set.
type headStd struct {
	Heads int                `json:"heads"`
	Sets  []string           `json:"sets"` // "train", then the eval sets in task order
	Std   map[string]float64 `json:"std"`
	InDis map[string]bool    `json:"in_distribution"` // eval set level among the training levels
}

// measureHeadStd loads the run's final checkpoint, samples responses to
// training prompts and to each eval set's prompts, scores them with the
// critic and writes RUN/head_std.json. Runs with fewer than two critic
// heads are skipped (their spread is 0 by construction).
func measureHeadStd(ctx context.Context, run string, log zerolog.Logger) error {
	headStdMu.Lock()
	defer headStdMu.Unlock()
	data, err := os.ReadFile(filepath.Join(run, "config.yaml"))
	if err != nil {
		return err
	}
	cfg, err := core.LoadConfig(core.LoadOptions{Base: data, Env: []string{}})
	if err != nil {
		return err
	}
	heads, err := criticHeads(cfg)
	if err != nil || heads < 2 {
		return err
	}
	ckpt, err := core.LatestCheckpoint(run)
	if err != nil || ckpt == "" {
		return fmt.Errorf("%s: no checkpoint (%v)", run, err)
	}
	quiet := log.Level(zerolog.WarnLevel)
	s, err := session.New(cfg, quiet)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.Backend.Load(ckpt); err != nil {
		return err
	}
	res := headStd{Heads: heads, Std: map[string]float64{}, InDis: map[string]bool{}}
	levels := map[int]bool{1: true, 2: true} // the arith default
	if ls, ok := cfg.Task["levels"].([]any); ok {
		levels = map[int]bool{}
		for _, l := range ls {
			if n, ok := asInt(l); ok {
				levels[int(n)] = true
			}
		}
	}
	sets := []core.EvalSet{{Name: "train", Problems: s.Task.SampleTrain(rand.New(rand.NewPCG(cfg.Seed, 7)), headStdProblems)}}
	sets = append(sets, s.Task.EvalSets()...)
	for i, set := range sets {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		problems := set.Problems
		if len(problems) > headStdProblems {
			problems = problems[:headStdProblems]
		}
		if len(problems) == 0 {
			continue
		}
		v, err := setHeadStd(s, cfg, heads, problems, core.Mix(cfg.Seed, 0x7b, uint64(i)))
		if err != nil {
			return fmt.Errorf("%s: %w", set.Name, err)
		}
		res.Sets = append(res.Sets, set.Name)
		res.Std[set.Name] = v
		res.InDis[set.Name] = i == 0 || levels[problems[0].Level]
	}
	out, _ := json.MarshalIndent(res, "", "  ")
	log.Info().Str("run", run).RawJSON("head_std", mustJSON(res.Std)).Msg("critic head std per prompt set")
	return os.WriteFile(filepath.Join(run, headStdFile), append(out, '\n'), 0o644)
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func setHeadStd(s *session.Session, cfg *core.Config, heads int, problems []core.Problem, seed uint64) (float64, error) {
	tok := s.Task.Tokenizer()
	r := &core.Rollout{ValueHeads: heads}
	var prompts [][]int32
	for gi, p := range problems {
		enc := core.EncodePrompt(tok, p.Prompt)
		for range headStdSamples {
			prompts = append(prompts, enc)
			r.Seqs = append(r.Seqs, core.Sequence{Group: gi, ProblemID: p.ID, Prompt: enc})
		}
	}
	gens, err := s.Backend.Generate(core.GenerateRequest{Prompts: prompts, Temperature: cfg.Rollout.Temperature,
		MaxTokens: cfg.Rollout.MaxResponseTokens, Seed: seed})
	if err != nil {
		return 0, err
	}
	for i, g := range gens {
		r.Seqs[i].Response = g.Tokens
	}
	if err := s.Backend.ScoreValues(r); err != nil {
		return 0, err
	}
	sum, n := 0.0, 0
	for _, sq := range r.Seqs {
		for _, v := range sq.Values {
			_, sd := popMeanStd(v)
			sum += sd
			n++
		}
	}
	if n == 0 {
		return math.NaN(), nil
	}
	return sum / float64(n), nil
}

func popMeanStd(xs []float64) (float64, float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	mu := 0.0
	for _, x := range xs {
		mu += x
	}
	mu /= float64(len(xs))
	v := 0.0
	for _, x := range xs {
		v += (x - mu) * (x - mu)
	}
	return mu, math.Sqrt(v / float64(len(xs)))
}
