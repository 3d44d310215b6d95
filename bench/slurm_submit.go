package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cde-rl/cde/session"
	"github.com/cde-rl/cde/trainer"
)

// This file submits a Slurm bench's jobs (sbatch) and records them in
// SlurmFile.

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

// needsBaseJob reports whether an unfinished arm-seed among todo still
// needs a base policy made, or a base evaluation is missing.
func needsBaseJob(spec *Spec, dir string, todo []job) (bool, error) {
	work, err := baseWork(spec, dir, todo)
	return len(work) > 0, err
}

// baseWork is what the base job has to make for todo: "eval/seed-N" for
// each base evaluation not finished, and "policy/DIR" for each base
// policy an arm-seed of todo needs and that is not there yet.
func baseWork(spec *Spec, dir string, todo []job) ([]string, error) {
	var work []string
	if spec.BaseEval {
		for _, seed := range spec.Seeds {
			if _, err := os.Stat(filepath.Join(RunDir(dir, BaseArm, seed), DoneFile)); err != nil {
				work = append(work, fmt.Sprintf("eval/seed-%d", seed))
			}
		}
	}
	for _, j := range todo {
		if ck, _ := trainer.LatestCheckpoint(RunDir(dir, j.arm.Name, j.seed)); ck != "" {
			continue
		}
		cfg, err := spec.ArmConfig(dir, j.arm, j.seed)
		if err != nil {
			return nil, err
		}
		if cfg.Model.Checkpoint != "auto" || cfg.Model.HF != "" {
			continue
		}
		base := filepath.Join(cfg.Pretrain.Dir, session.BaseKey(cfg))
		if _, err := os.Stat(filepath.Join(base, "policy.gob")); err != nil && !slices.Contains(work, "policy/"+base) {
			work = append(work, "policy/"+base)
		}
	}
	return work, nil
}

// baseWorkDone reports whether everything of a base job's work (baseWork)
// is there now.
func baseWorkDone(dir string, work []string) bool {
	for _, w := range work {
		var path string
		switch {
		case strings.HasPrefix(w, "eval/seed-"):
			seed, err := strconv.ParseUint(strings.TrimPrefix(w, "eval/seed-"), 10, 64)
			if err != nil {
				return false
			}
			path = filepath.Join(RunDir(dir, BaseArm, seed), DoneFile)
		case strings.HasPrefix(w, "policy/"):
			path = filepath.Join(strings.TrimPrefix(w, "policy/"), "policy.gob")
		default:
			return false
		}
		if _, err := os.Stat(path); err != nil {
			return false
		}
	}
	return true
}

// submitBase submits the base job (base policies and evaluations) and
// returns its id.
func (s *slurmRun) submitBase() (string, error) {
	work, err := baseWork(s.spec, s.dir, s.todo)
	if err != nil {
		return "", err
	}
	args, err := s.baseArgs()
	if err != nil {
		return "", err
	}
	id, err := sbatch(s.ctx, args)
	if err != nil {
		return "", err
	}
	if s.st.Base == nil {
		s.st.Base = &slurmJob{}
	}
	if len(s.st.Base.Work) > 0 && baseWorkDone(s.dir, s.st.Base.Work) {
		// The last base job did all it was submitted for: this one is new
		// work (a sequential bench's next stage), not a retry of it.
		s.st.Base.Attempts = 0
	}
	s.st.Base.ID = id
	s.st.Base.Attempts++
	s.st.Base.Work = work
	fmt.Fprintf(s.out, "bench: slurm: submitted the base job %s (base policies and evaluations)\n", id)
	return id, s.st.save(s.dir)
}

// submitTasks submits the tasks as one array (after the base job when
// dep is set).
func (s *slurmRun) submitTasks(tasks []job, dep string) error {
	if len(tasks) == 0 {
		return nil
	}
	args, array, err := s.arrayArgs(tasks, dep)
	if err != nil {
		return err
	}
	id, err := sbatch(s.ctx, args)
	if err != nil {
		return err
	}
	for _, j := range tasks {
		k := taskKey(j.arm.Name, j.seed)
		t := s.st.Tasks[k]
		if t == nil {
			t = &slurmTask{Index: s.index[k], Arm: j.arm.Name, Seed: j.seed}
			s.st.Tasks[k] = t
		}
		t.ID = id + "_" + strconv.Itoa(s.index[k])
		t.Attempts++
		t.GaveUp = false
	}
	fmt.Fprintf(s.out, "bench: slurm: submitted job array %s: %d arm-seed(s) (tasks %s)\n", id, len(tasks), array)
	return s.st.save(s.dir)
}

// submitUnqueued submits what is neither finished nor queued (alive, from
// squeue): the base job when the arm-seeds need it and it is not queued,
// and the arm-seeds whose job is not queued, as one array after it.
func (s *slurmRun) submitUnqueued(alive map[string][2]string) error {
	dep := ""
	if need, err := needsBaseJob(s.spec, s.dir, s.todo); err != nil {
		return err
	} else if need {
		if s.st.Base != nil && alive[s.st.Base.ID][0] != "" {
			dep = s.st.Base.ID
			fmt.Fprintf(s.out, "bench: slurm: the base job %s is %s\n", dep, strings.ToLower(alive[dep][0]))
		} else if dep, err = s.submitBase(); err != nil {
			return err
		}
	}
	var fresh []job
	for _, j := range s.todo {
		t := s.st.Tasks[taskKey(j.arm.Name, j.seed)]
		switch {
		case t == nil:
		case alive[t.ID][0] != "":
			fmt.Fprintf(s.out, "bench: slurm: %s seed %d: job %s is %s; following it\n", j.arm.Name, j.seed, t.ID, strings.ToLower(alive[t.ID][0]))
			continue
		default:
			if t.GaveUp {
				// Run again by hand after giving up: a new set of retries.
				t.Attempts, t.GaveUp = 0, false
			}
			fmt.Fprintf(s.out, "bench: slurm: %s seed %d: job %s ended without finishing; resubmitting, attempt %d of %d (log: %s)\n",
				j.arm.Name, j.seed, t.ID, t.Attempts+1, s.ex.Retries+1, s.taskLog(t.ID))
		}
		fresh = append(fresh, j)
	}
	return s.submitTasks(fresh, dep)
}

// resubmit submits tasks again while following them: after the base job
// when they need it, which is submitted again unless it is queued (alive)
// or out of retries.
func (s *slurmRun) resubmit(tasks []job, alive map[string][2]string) error {
	dep := ""
	need, err := needsBaseJob(s.spec, s.dir, tasks)
	if err != nil {
		return err
	}
	if need {
		switch {
		case s.st.Base != nil && alive[s.st.Base.ID][0] != "":
			dep = s.st.Base.ID
		case s.st.Base != nil && s.st.Base.Attempts > s.ex.Retries:
			return fmt.Errorf("bench: slurm: the base job failed %d time(s) (log: %s); fix it and run the bench again",
				s.st.Base.Attempts, s.baseLog(s.st.Base.ID))
		default:
			if dep, err = s.submitBase(); err != nil {
				return err
			}
		}
	}
	return s.submitTasks(tasks, dep)
}
