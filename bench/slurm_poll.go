package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// This file follows a Slurm bench's jobs: squeue every Executor.Poll, a
// progress line when it changes, and Ctrl-C.

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

// follow polls squeue until no arm-seed to train runs or waits,
// resubmitting those that ended without finishing, and returns which
// failed for good (nil when none did).
func (s *slurmRun) follow() error {
	start := time.Now()
	last := ""
	// gone counts the polls an unfinished arm-seed's job has been absent
	// from squeue: it is resubmitted at the second, so a DONE file written
	// as the job ended has time to show on a shared file system.
	gone := map[string]int{}
	for {
		alive, err := squeue(context.WithoutCancel(s.ctx))
		if err != nil {
			return err
		}
		tl := s.collect(alive, gone)
		if len(tl.resubmit) > 0 {
			if err := s.resubmit(tl.resubmit, alive); err != nil {
				return err
			}
			tl.pending += len(tl.resubmit)
		}
		if err := s.st.save(s.dir); err != nil {
			return err
		}
		if line := s.progress(tl); line != last {
			fmt.Fprintf(s.out, "%s; elapsed %s\n", line, time.Since(start).Round(time.Second))
			last = line
		}
		if tl.running+tl.pending == 0 {
			return s.failure(tl.failed)
		}
		select {
		case <-s.ctx.Done():
			return interruptSlurm(s.st, alive, s.o, s.out)
		case <-time.After(s.ex.Poll):
		}
	}
}

// progress is the progress line of a poll (without the elapsed time).
func (s *slurmRun) progress(tl *slurmTally) string {
	var arms []string
	for _, a := range s.spec.Arms {
		if c, ok := tl.byArm[a.Name]; ok {
			arms = append(arms, fmt.Sprintf("%s %d/%d", a.Name, c[0], c[1]))
		}
	}
	line := fmt.Sprintf("bench: slurm: %d/%d arm-seeds done, %d running, %d pending, %d failed (done by arm: %s)",
		tl.done, len(s.todo), tl.running, tl.pending, len(tl.failed), strings.Join(arms, ", "))
	if len(tl.runningNames) > 0 && len(tl.runningNames) <= 8 {
		line += "; running: " + strings.Join(tl.runningNames, ", ")
	}
	return line
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
