package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/session"
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
	// Work is what the job was submitted to make (baseWork): once all of
	// it is there, the next base job is new work with its own retries.
	Work []string `json:"work,omitempty"`
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

// runSlurm trains the unfinished arm-seeds as Slurm jobs: the base warm
// start (and base evaluations) as one job when anything needs it, the
// arm-seeds as one job array depending on it (afterok), recorded in
// SlurmFile; then follows them with squeue until every arm-seed is DONE or
// out of retries, resubmitting a task that failed or vanished (it resumes
// from its checkpoint). A restarted bench reads SlurmFile and submits only
// what is neither DONE nor pending nor running.
//
// Its roles are in files of their own: slurm_render.go renders the jobs'
// sbatch options, slurm_submit.go submits them, slurm_poll.go follows them
// with squeue, slurm_collect.go gathers the arm-seeds' outcomes at each
// poll.
func runSlurm(ctx context.Context, spec *Spec, o Options) error {
	s, err := newSlurmRun(ctx, spec, o)
	if err != nil {
		return err
	}
	alive, err := squeue(ctx)
	if err != nil {
		return err
	}
	if err := s.submitUnqueued(alive); err != nil {
		return err
	}
	if o.Detach {
		fmt.Fprintf(s.out, "bench: slurm: jobs recorded in %s; run the same command again to follow them and write the report, or add --report-only for what is finished\n",
			filepath.Join(s.dir, SlurmFile))
		return ErrDetached
	}
	return s.follow()
}

// slurmRun is what runSlurm's roles share: the bench, its Slurm state and
// the arm-seeds left to train.
type slurmRun struct {
	ctx     context.Context
	spec    *Spec
	o       Options
	dir     string
	out     io.Writer
	ex      Executor
	logs    string // DIR/slurm-logs, as messages name it
	absLogs string // logs, absolute: the jobs' --output
	st      *slurmState
	index   map[string]int // arm-seed (taskKey) -> its armSeeds number, the array task
	todo    []job          // the arm-seeds to train: not DONE, and among Options.Only
}

// newSlurmRun makes the log directory, reads SlurmFile and lists the
// arm-seeds to train.
func newSlurmRun(ctx context.Context, spec *Spec, o Options) (*slurmRun, error) {
	s := &slurmRun{ctx: ctx, spec: spec, o: o, dir: o.Dir, out: o.out(), ex: spec.Executor, index: map[string]int{}}
	s.logs = filepath.Join(s.dir, "slurm-logs")
	if err := os.MkdirAll(s.logs, 0o755); err != nil {
		return nil, err
	}
	var err error
	if s.absLogs, err = filepath.Abs(s.logs); err != nil {
		return nil, err
	}
	if s.st, err = readSlurmState(s.dir); err != nil {
		return nil, err
	}
	for i, j := range armSeeds(spec) {
		s.index[taskKey(j.arm.Name, j.seed)] = i
		if len(o.Only) > 0 && !slices.Contains(o.Only, j.arm.Name) {
			continue
		}
		if _, err := os.Stat(filepath.Join(RunDir(s.dir, j.arm.Name, j.seed), DoneFile)); err == nil {
			continue
		}
		s.todo = append(s.todo, j)
	}
	return s, nil
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
	env, _ := childEnv(os.Environ(), 1, 0) // Slurm gives the task its cores
	return runArmSeed(ctx, o.Exe, spec, o.Dir, j, run, env, out, o.Log)
}
