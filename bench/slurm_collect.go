package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// This file gathers a Slurm bench's outcomes: at each poll, where every
// arm-seed stands, and at the end, which failed.

// slurmTally is where the arm-seeds stand at one poll.
type slurmTally struct {
	done, running, pending int
	failed, resubmit       []job
	runningNames           []string
	byArm                  map[string][2]int // arm -> done, total
}

// collect gathers where each arm-seed to train stands, by its DONE file
// and its job's state in alive (squeue): done, running, pending, failed
// for good (announced, once), or to resubmit (announced, and cancelled
// when Slurm still holds it for a failed dependency). gone counts the
// polls an unfinished arm-seed's job has been absent from squeue (follow).
func (s *slurmRun) collect(alive map[string][2]string, gone map[string]int) *slurmTally {
	tl := &slurmTally{byArm: map[string][2]int{}}
	for _, j := range s.todo {
		c := tl.byArm[j.arm.Name]
		c[1]++
		k := taskKey(j.arm.Name, j.seed)
		t := s.st.Tasks[k]
		if _, err := os.Stat(filepath.Join(RunDir(s.dir, j.arm.Name, j.seed), DoneFile)); err == nil {
			tl.done++
			c[0]++
			tl.byArm[j.arm.Name] = c
			continue
		}
		tl.byArm[j.arm.Name] = c
		state := ""
		if t != nil {
			state = alive[t.ID][0]
		}
		switch {
		case state == "RUNNING" || state == "COMPLETING":
			tl.running++
			tl.runningNames = append(tl.runningNames, fmt.Sprintf("%s seed %d", j.arm.Name, j.seed))
		case state != "" && alive[t.ID][1] != "DependencyNeverSatisfied":
			tl.pending++
		case t != nil && t.GaveUp:
			tl.failed = append(tl.failed, j)
		case t != nil && state == "" && gone[k] == 0:
			gone[k]++
			tl.pending++ // ending: look again at the next poll
		case t != nil && t.Attempts > s.ex.Retries:
			t.GaveUp = true
			fmt.Fprintf(s.out, "bench: slurm: %s seed %d: job %s ended without finishing, %d attempt(s): giving up (log: %s)\n",
				j.arm.Name, j.seed, t.ID, t.Attempts, s.taskLog(t.ID))
			tl.failed = append(tl.failed, j)
		default:
			if t != nil {
				fmt.Fprintf(s.out, "bench: slurm: %s seed %d: job %s ended without finishing (state %q); resubmitting, attempt %d of %d (log: %s)\n",
					j.arm.Name, j.seed, t.ID, state, t.Attempts+1, s.ex.Retries+1, s.taskLog(t.ID))
				if state != "" {
					exec.Command("scancel", t.ID).Run() // held by a failed dependency
				}
			}
			delete(gone, k)
			tl.resubmit = append(tl.resubmit, j)
		}
	}
	return tl
}

// failure is the bench's error once nothing runs or waits any more: the
// arm-seeds that failed after their retries, or nil.
func (s *slurmRun) failure(failed []job) error {
	if len(failed) == 0 {
		return nil
	}
	var names []string
	for _, j := range failed {
		names = append(names, fmt.Sprintf("%s seed %d", j.arm.Name, j.seed))
	}
	return fmt.Errorf("bench: %d arm-seed(s) failed on Slurm after their retries: %s (logs in %s; rerun to retry them)",
		len(failed), strings.Join(names, ", "), s.logs)
}
