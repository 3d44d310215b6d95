package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// This file renders a Slurm bench's jobs: the sbatch options and the
// command of the base job and of a job array of arm-seeds, and the paths
// of their logs.

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

// commonArgs are the sbatch options every job of the bench starts with:
// its name and the executor's options (a new slice each call).
func (s *slurmRun) commonArgs() []string {
	return append([]string{"--job-name=cde-" + s.spec.Stem}, s.ex.sbatchArgs()...)
}

// baseArgs are the base job's sbatch options.
func (s *slurmRun) baseArgs() ([]string, error) {
	cmd, err := workerCommand(s.o.Exe, s.spec, s.dir, "base")
	if err != nil {
		return nil, err
	}
	return append(s.commonArgs(), "--output="+filepath.Join(s.absLogs, "base-%j.out"), "--wrap="+cmd), nil
}

// arrayArgs are the sbatch options of one job array of tasks, after job
// dep when it is set; array is the array's task list (--array).
func (s *slurmRun) arrayArgs(tasks []job, dep string) (args []string, array string, err error) {
	var idx []string
	for _, j := range tasks {
		idx = append(idx, strconv.Itoa(s.index[taskKey(j.arm.Name, j.seed)]))
	}
	array = strings.Join(idx, ",")
	if s.ex.Parallel > 0 {
		array += "%" + strconv.Itoa(s.ex.Parallel)
	}
	cmd, err := workerCommand(s.o.Exe, s.spec, s.dir, "$SLURM_ARRAY_TASK_ID")
	if err != nil {
		return nil, "", err
	}
	args = append(s.commonArgs(), "--array="+array, "--output="+filepath.Join(s.absLogs, "task-%A_%a.out"), "--wrap="+cmd)
	if dep != "" {
		args = append(args, "--dependency=afterok:"+dep, "--kill-on-invalid-dep=yes")
	}
	return args, array, nil
}

// taskLog is the log of array task id ("1234_5"), as messages name it.
func (s *slurmRun) taskLog(id string) string { return filepath.Join(s.logs, "task-"+id+".out") }

// baseLog is the log of base job id, as messages name it.
func (s *slurmRun) baseLog(id string) string { return filepath.Join(s.logs, "base-"+id+".out") }
