package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/session"
	"github.com/cde-rl/cde/trainer"
)

// SlurmFile records a Slurm bench's jobs in its results directory, so a
// bench process that is killed and started again follows the jobs it
// submitted instead of submitting them twice.
const SlurmFile = "slurm-jobs.json"

// ErrDetached is what Run returns with Options.Detach once the jobs are
// submitted: nothing failed, and there is no report yet.
var ErrDetached = errors.New("bench: jobs submitted; not waiting for them (--detach)")

// slurmState is SlurmFile.
type slurmState struct {
	Base  *slurmJob             `json:"base,omitempty"`
	Tasks map[string]*slurmTask `json:"tasks"` // by "arm/seed-N"
}

type slurmJob struct {
	ID       string `json:"id"`
	Attempts int    `json:"attempts"`
}

// slurmTask is one arm-seed's latest job: ID is the array task
// ("1234_5"); Attempts counts its submissions; GaveUp is set once it
// failed with no resubmission left.
type slurmTask struct {
	Index    int    `json:"index"`
	Arm      string `json:"arm"`
	Seed     uint64 `json:"seed"`
	ID       string `json:"id"`
	Attempts int    `json:"attempts"`
	GaveUp   bool   `json:"gave_up,omitempty"`
}

func taskKey(arm string, seed uint64) string { return fmt.Sprintf("%s/seed-%d", arm, seed) }

func readSlurmState(dir string) (*slurmState, error) {
	st := &slurmState{Tasks: map[string]*slurmTask{}}
	data, err := os.ReadFile(filepath.Join(dir, SlurmFile))
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, SlurmFile), err)
	}
	if st.Tasks == nil {
		st.Tasks = map[string]*slurmTask{}
	}
	return st, nil
}

func (st *slurmState) save(dir string) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return core.WriteFileAtomic(filepath.Join(dir, SlurmFile), append(data, '\n'))
}

// squeue returns the state (PENDING, RUNNING, ...) and reason of every
// job or array task of the user that Slurm still lists, by id ("12",
// "12_3"); an array's pending tasks are listed one by one (-r).
func squeue(ctx context.Context) (map[string][2]string, error) {
	out, err := exec.CommandContext(ctx, "squeue", "-h", "-r", "--me", "-o", "%i|%T|%r").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("squeue: %w: %s", err, bytes.TrimSpace(ee.Stderr))
		}
		return nil, fmt.Errorf("squeue: %w", err)
	}
	jobs := map[string][2]string{}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Split(strings.TrimSpace(l), "|")
		if len(f) == 3 {
			jobs[f[0]] = [2]string{f[1], f[2]}
		}
	}
	return jobs, nil
}

// sbatch submits a job and returns its id.
func sbatch(ctx context.Context, args []string) (string, error) {
	cmd := exec.CommandContext(ctx, "sbatch", append([]string{"--parsable"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("sbatch %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";") // "id;cluster" on federations
	if _, err := strconv.Atoi(id); err != nil {
		return "", fmt.Errorf("sbatch: unexpected answer %q", out)
	}
	return id, nil
}

// shellQuote quotes s for the job script's shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// workerCommand is the shell command a job runs: this binary as a bench
// worker on the same bench file and directory, by absolute paths (a job
// starts in the submission directory, but the paths must not depend on it).
func workerCommand(exe string, spec *Spec, dir, what string) (string, error) {
	file := spec.File
	if _, err := os.Stat(file); err == nil {
		if file, err = filepath.Abs(file); err != nil {
			return "", err
		}
	} // else a shipped preset, found by name anywhere
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("exec %s bench -c %s --out %s --worker %s", shellQuote(exe), shellQuote(file), shellQuote(abs), what), nil
}

// needsBaseJob reports whether an unfinished arm-seed among todo still
// needs a base policy made, or a base evaluation is missing.
func needsBaseJob(spec *Spec, dir string, todo []job) (bool, error) {
	if spec.BaseEval {
		for _, seed := range spec.Seeds {
			if _, err := os.Stat(filepath.Join(RunDir(dir, BaseArm, seed), DoneFile)); err != nil {
				return true, nil
			}
		}
	}
	for _, j := range todo {
		if ck, _ := trainer.LatestCheckpoint(RunDir(dir, j.arm.Name, j.seed)); ck != "" {
			continue
		}
		cfg, err := spec.ArmConfig(dir, j.arm, j.seed)
		if err != nil {
			return false, err
		}
		if cfg.Model.Checkpoint != "auto" || cfg.Model.HF != "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(cfg.Pretrain.Dir, session.BaseKey(cfg), "policy.gob")); err != nil {
			return true, nil
		}
	}
	return false, nil
}

// runSlurm trains the unfinished arm-seeds as Slurm jobs: the base warm
// start (and base evaluations) as one job when anything needs it, the
// arm-seeds as one job array depending on it (afterok), recorded in
// SlurmFile; then follows them with squeue until every arm-seed is DONE or
// out of retries, resubmitting a task that failed or vanished (it resumes
// from its checkpoint). A restarted bench reads SlurmFile and submits only
// what is neither DONE nor pending nor running.
func runSlurm(ctx context.Context, spec *Spec, o Options) error {
	dir, out, ex := o.Dir, o.out(), spec.Executor
	logs := filepath.Join(dir, "slurm-logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return err
	}
	absLogs, err := filepath.Abs(logs)
	if err != nil {
		return err
	}
	st, err := readSlurmState(dir)
	if err != nil {
		return err
	}
	var todo []job
	index := map[string]int{}
	for i, j := range armSeeds(spec) {
		index[taskKey(j.arm.Name, j.seed)] = i
		if len(o.Only) > 0 && !slices.Contains(o.Only, j.arm.Name) {
			continue
		}
		if _, err := os.Stat(filepath.Join(RunDir(dir, j.arm.Name, j.seed), DoneFile)); err == nil {
			continue
		}
		todo = append(todo, j)
	}
	total := len(todo)
	alive, err := squeue(ctx)
	if err != nil {
		return err
	}
	name := "cde-" + spec.Stem
	common := append([]string{"--job-name=" + name}, ex.sbatchArgs()...)

	submitBase := func() (string, error) {
		cmd, err := workerCommand(o.Exe, spec, dir, "base")
		if err != nil {
			return "", err
		}
		id, err := sbatch(ctx, append(slices.Clone(common), "--output="+filepath.Join(absLogs, "base-%j.out"), "--wrap="+cmd))
		if err != nil {
			return "", err
		}
		if st.Base == nil {
			st.Base = &slurmJob{}
		}
		st.Base.ID = id
		st.Base.Attempts++
		fmt.Fprintf(out, "bench: slurm: submitted the base job %s (base policies and evaluations)\n", id)
		return id, st.save(dir)
	}
	// submitTasks submits the tasks as one array (after the base job when
	// dep is set).
	submitTasks := func(tasks []job, dep string) error {
		if len(tasks) == 0 {
			return nil
		}
		var idx []string
		for _, j := range tasks {
			idx = append(idx, strconv.Itoa(index[taskKey(j.arm.Name, j.seed)]))
		}
		array := strings.Join(idx, ",")
		if ex.Parallel > 0 {
			array += "%" + strconv.Itoa(ex.Parallel)
		}
		cmd, err := workerCommand(o.Exe, spec, dir, "$SLURM_ARRAY_TASK_ID")
		if err != nil {
			return err
		}
		args := append(slices.Clone(common), "--array="+array, "--output="+filepath.Join(absLogs, "task-%A_%a.out"), "--wrap="+cmd)
		if dep != "" {
			args = append(args, "--dependency=afterok:"+dep, "--kill-on-invalid-dep=yes")
		}
		id, err := sbatch(ctx, args)
		if err != nil {
			return err
		}
		for _, j := range tasks {
			k := taskKey(j.arm.Name, j.seed)
			t := st.Tasks[k]
			if t == nil {
				t = &slurmTask{Index: index[k], Arm: j.arm.Name, Seed: j.seed}
				st.Tasks[k] = t
			}
			t.ID = id + "_" + strconv.Itoa(index[k])
			t.Attempts++
			t.GaveUp = false
		}
		fmt.Fprintf(out, "bench: slurm: submitted job array %s: %d arm-seed(s) (tasks %s)\n", id, len(tasks), array)
		return st.save(dir)
	}

	// Submit what is neither finished nor queued.
	dep := ""
	if need, err := needsBaseJob(spec, dir, todo); err != nil {
		return err
	} else if need {
		if st.Base != nil && alive[st.Base.ID][0] != "" {
			dep = st.Base.ID
			fmt.Fprintf(out, "bench: slurm: the base job %s is %s\n", dep, strings.ToLower(alive[dep][0]))
		} else if dep, err = submitBase(); err != nil {
			return err
		}
	}
	var fresh []job
	for _, j := range todo {
		t := st.Tasks[taskKey(j.arm.Name, j.seed)]
		switch {
		case t == nil:
		case alive[t.ID][0] != "":
			fmt.Fprintf(out, "bench: slurm: %s seed %d: job %s is %s; following it\n", j.arm.Name, j.seed, t.ID, strings.ToLower(alive[t.ID][0]))
			continue
		default:
			if t.GaveUp {
				// Run again by hand after giving up: a new set of retries.
				t.Attempts, t.GaveUp = 0, false
			}
			fmt.Fprintf(out, "bench: slurm: %s seed %d: job %s ended without finishing; resubmitting, attempt %d of %d (log: %s)\n",
				j.arm.Name, j.seed, t.ID, t.Attempts+1, ex.Retries+1, filepath.Join(logs, "task-"+t.ID+".out"))
		}
		fresh = append(fresh, j)
	}
	if err := submitTasks(fresh, dep); err != nil {
		return err
	}
	if o.Detach {
		fmt.Fprintf(out, "bench: slurm: jobs recorded in %s; run the same command again to follow them and write the report, or add --report-only for what is finished\n",
			filepath.Join(dir, SlurmFile))
		return ErrDetached
	}

	// Follow.
	start := time.Now()
	last := ""
	// gone counts the polls an unfinished arm-seed's job has been absent
	// from squeue: it is resubmitted at the second, so a DONE file written
	// as the job ended has time to show on a shared file system.
	gone := map[string]int{}
	for {
		alive, err := squeue(context.WithoutCancel(ctx))
		if err != nil {
			return err
		}
		var done, running, pending int
		var failed, resubmit []job
		var runningNames []string
		byArm := map[string][2]int{} // arm -> done, total
		for _, j := range todo {
			c := byArm[j.arm.Name]
			c[1]++
			k := taskKey(j.arm.Name, j.seed)
			t := st.Tasks[k]
			if _, err := os.Stat(filepath.Join(RunDir(dir, j.arm.Name, j.seed), DoneFile)); err == nil {
				done++
				c[0]++
				byArm[j.arm.Name] = c
				continue
			}
			byArm[j.arm.Name] = c
			state := ""
			if t != nil {
				state = alive[t.ID][0]
			}
			switch {
			case state == "RUNNING" || state == "COMPLETING":
				running++
				runningNames = append(runningNames, fmt.Sprintf("%s seed %d", j.arm.Name, j.seed))
			case state != "" && alive[t.ID][1] != "DependencyNeverSatisfied":
				pending++
			case t != nil && t.GaveUp:
				failed = append(failed, j)
			case t != nil && state == "" && gone[k] == 0:
				gone[k]++
				pending++ // ending: look again at the next poll
			case t != nil && t.Attempts > ex.Retries:
				t.GaveUp = true
				fmt.Fprintf(out, "bench: slurm: %s seed %d: job %s ended without finishing, %d attempt(s): giving up (log: %s)\n",
					j.arm.Name, j.seed, t.ID, t.Attempts, filepath.Join(logs, "task-"+t.ID+".out"))
				failed = append(failed, j)
			default:
				if t != nil {
					fmt.Fprintf(out, "bench: slurm: %s seed %d: job %s ended without finishing (state %q); resubmitting, attempt %d of %d (log: %s)\n",
						j.arm.Name, j.seed, t.ID, state, t.Attempts+1, ex.Retries+1, filepath.Join(logs, "task-"+t.ID+".out"))
					if state != "" {
						exec.Command("scancel", t.ID).Run() // held by a failed dependency
					}
				}
				delete(gone, k)
				resubmit = append(resubmit, j)
			}
		}
		if len(resubmit) > 0 {
			dep := ""
			need, err := needsBaseJob(spec, dir, resubmit)
			if err != nil {
				return err
			}
			if need {
				switch {
				case st.Base != nil && alive[st.Base.ID][0] != "":
					dep = st.Base.ID
				case st.Base != nil && st.Base.Attempts > ex.Retries:
					return fmt.Errorf("bench: slurm: the base job failed %d time(s) (log: %s); fix it and run the bench again",
						st.Base.Attempts, filepath.Join(logs, "base-"+st.Base.ID+".out"))
				default:
					if dep, err = submitBase(); err != nil {
						return err
					}
				}
			}
			if err := submitTasks(resubmit, dep); err != nil {
				return err
			}
			pending += len(resubmit)
		}
		if err := st.save(dir); err != nil {
			return err
		}
		var arms []string
		for _, a := range spec.Arms {
			if c, ok := byArm[a.Name]; ok {
				arms = append(arms, fmt.Sprintf("%s %d/%d", a.Name, c[0], c[1]))
			}
		}
		line := fmt.Sprintf("bench: slurm: %d/%d arm-seeds done, %d running, %d pending, %d failed (done by arm: %s)",
			done, total, running, pending, len(failed), strings.Join(arms, ", "))
		if len(runningNames) > 0 && len(runningNames) <= 8 {
			line += "; running: " + strings.Join(runningNames, ", ")
		}
		if line != last {
			fmt.Fprintf(out, "%s; elapsed %s\n", line, time.Since(start).Round(time.Second))
			last = line
		}
		if running+pending == 0 {
			if len(failed) > 0 {
				var names []string
				for _, j := range failed {
					names = append(names, fmt.Sprintf("%s seed %d", j.arm.Name, j.seed))
				}
				return fmt.Errorf("bench: %d arm-seed(s) failed on Slurm after their retries: %s (logs in %s; rerun to retry them)",
					len(failed), strings.Join(names, ", "), logs)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return interruptSlurm(st, alive, o, out)
		case <-time.After(ex.Poll):
		}
	}
}

// interruptSlurm is Ctrl-C while following: it asks (Options.Confirm)
// whether to cancel the bench's queued and running jobs; without an
// answer they are left to run, and a rerun follows them.
func interruptSlurm(st *slurmState, alive map[string][2]string, o Options, out io.Writer) error {
	var ids []string
	if st.Base != nil && alive[st.Base.ID][0] != "" {
		ids = append(ids, st.Base.ID)
	}
	for _, t := range st.Tasks {
		if alive[t.ID][0] != "" {
			ids = append(ids, t.ID)
		}
	}
	slices.Sort(ids)
	if len(ids) == 0 {
		return context.Canceled
	}
	if o.Confirm != nil && o.Confirm(fmt.Sprintf("cancel the bench's %d queued or running Slurm job(s) (%s)?", len(ids), strings.Join(ids, " "))) {
		if b, err := exec.Command("scancel", ids...).CombinedOutput(); err != nil {
			fmt.Fprintf(out, "bench: slurm: scancel: %v: %s\n", err, b)
		} else {
			fmt.Fprintf(out, "bench: slurm: cancelled %s\n", strings.Join(ids, " "))
		}
		return context.Canceled
	}
	fmt.Fprintf(out, "bench: slurm: left %d job(s) running (%s); rerun the same command to follow them, or cancel them with: scancel %s\n",
		len(ids), strings.Join(ids, " "), strings.Join(ids, " "))
	return context.Canceled
}

// Work is one Slurm job of a bench (`cde-run bench --worker WHAT`): "base"
// makes the base policies the unfinished arm-seeds need and the base
// evaluations; a number N trains arm-seed N of the bench (armSeeds order)
// unless it is DONE, resuming from its checkpoint. A worker takes no
// bench lock (the bench process holds it); each arm-seed's run directory
// has its own (the trainer's), so two workers never train one arm-seed.
func Work(ctx context.Context, spec *Spec, o Options, what string) error {
	if o.Exe == "" {
		return errors.New("bench: Options.Exe: the cde-run binary to train with is required")
	}
	if err := spec.Validate(o.Dir, o.Only...); err != nil {
		return err
	}
	out := o.out()
	all := armSeeds(spec)
	if what == "base" {
		bases := map[string]string{}
		for _, j := range all {
			if _, err := os.Stat(filepath.Join(RunDir(o.Dir, j.arm.Name, j.seed), DoneFile)); err == nil {
				continue
			}
			if err := resolveJobBase(ctx, spec, o.Dir, &j, bases, o.Log, session.Output{W: out}); err != nil {
				return err
			}
		}
		if spec.BaseEval {
			for _, seed := range spec.Seeds {
				if err := evalBase(ctx, spec, o.Dir, seed, out, o.Log); err != nil {
					return fmt.Errorf("bench: base evaluation, seed %d: %w", seed, err)
				}
			}
		}
		return nil
	}
	n, err := strconv.Atoi(what)
	if err != nil || n < 0 || n >= len(all) {
		return fmt.Errorf("bench: --worker %q: want base or an arm-seed number in 0..%d", what, len(all)-1)
	}
	j := all[n]
	run := RunDir(o.Dir, j.arm.Name, j.seed)
	if _, err := os.Stat(filepath.Join(run, DoneFile)); err == nil {
		fmt.Fprintf(out, "bench: %s seed %d: done already\n", j.arm.Name, j.seed)
		return nil
	}
	if err := resolveJobBase(ctx, spec, o.Dir, &j, map[string]string{}, o.Log, session.Output{W: out}); err != nil {
		return err
	}
	fmt.Fprintf(out, "bench: %s seed %d: training in %s\n", j.arm.Name, j.seed, run)
	return runArmSeed(ctx, o.Exe, spec, o.Dir, j, run, out, o.Log)
}
