package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// slurmCluster starts a one-node Slurm with scripts/slurm-local/start and
// returns the environment that points sbatch and squeue at it; the cluster
// is stopped and removed when the test ends.
func slurmCluster(t *testing.T) []string {
	t.Helper()
	for _, c := range []string{"slurmctld", "slurmd", "munged", "sbatch", "squeue", "scancel"} {
		if _, err := exec.LookPath(c); err != nil {
			missing(t, c+" is not installed (apt-get install -y slurm-wlm munge)")
		}
	}
	if os.Getuid() != 0 {
		missing(t, "a local Slurm needs root (slurmd starts jobs as their user)")
	}
	dir := t.TempDir()
	script, _ := filepath.Abs(filepath.Join("..", "..", "scripts", "slurm-local"))
	out, err := exec.Command(filepath.Join(script, "start"), filepath.Join(dir, "slurm")).CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/slurm-local/start: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if b, err := exec.Command(filepath.Join(script, "stop"), filepath.Join(dir, "slurm")).CombinedOutput(); err != nil {
			t.Logf("scripts/slurm-local/stop: %v\n%s", err, b)
		}
	})
	env := os.Environ()
	for _, l := range strings.Split(string(out), "\n") {
		if kv, ok := strings.CutPrefix(l, "export "); ok {
			env = append(env, kv)
		}
	}
	return env
}

// slurmBench is a bench with a base job (a short supervised warm start and
// base evaluations) and arm-seeds long enough to be killed mid-run.
const slurmBench = `
base_eval: true
executor: {name: slurm, parallel: 2, poll: 200ms, retries: 2}
base:
  seed: 3
  task: {name: arith, levels: [1], eval_n: 8}
  model: {layers: 1, d_model: 16, heads: 2, max_len: 48, checkpoint: auto}
  backend: {engine: go}
  rollout: {n: 4, temperature: 1.0, max_response_tokens: 12}
  train: {steps: 160, prompts_per_step: 4, actor_lr: 1.0e-3, checkpoint_every: 8}
  eval: {every: 80, k: 2, at_start: false}
  pretrain: {steps: 40, eval_every: 20, seed: 1}
seeds: [1, 2]
arms:
  - {name: grpo, config: {algorithm: {name: grpo}}}
  - {name: rloo, config: {algorithm: {name: rloo}}}
claims:
  - {name: rloo beats grpo, better: rloo, than: grpo, metric: val/mean/avg@2}
`

type slurmTaskRec struct {
	Index    int    `json:"index"`
	Arm      string `json:"arm"`
	Seed     uint64 `json:"seed"`
	ID       string `json:"id"`
	Attempts int    `json:"attempts"`
}

type slurmRec struct {
	Base *struct {
		ID       string `json:"id"`
		Attempts int    `json:"attempts"`
	} `json:"base"`
	Tasks map[string]slurmTaskRec `json:"tasks"`
}

func readSlurmRec(t *testing.T, dir string) slurmRec {
	t.Helper()
	var r slurmRec
	data, err := os.ReadFile(filepath.Join(dir, "slurm-jobs.json"))
	if err == nil {
		err = json.Unmarshal(data, &r)
	}
	if err != nil {
		return slurmRec{}
	}
	return r
}

// The bench on a real (one-node) Slurm: the base job and the arm-seed
// array are submitted; the bench process is SIGKILLed while they run and
// one running task is cancelled (as a preemption would); the restarted
// bench follows the jobs it had submitted, resubmits only the cancelled
// task (which resumes from its checkpoint), and every arm-seed's
// metrics.jsonl and the verdicts equal a local bench of the same file.
func TestBenchSlurm(t *testing.T) {
	env := slurmCluster(t)
	work := t.TempDir()
	spec := filepath.Join(work, "slurm.yaml")
	writeFile(t, spec, slurmBench)
	out := filepath.Join(work, "out")
	start := func(args ...string) (*exec.Cmd, *bytes.Buffer) {
		cmd := exec.Command(cdeRun, append([]string{"bench", "-c", spec, "--out", out}, args...)...)
		cmd.Env, cmd.Dir = env, work
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, &buf
	}

	first, log1 := start()
	// Wait for an arm-seed that is training (a checkpoint, no DONE) and
	// whose job Slurm lists as running.
	var victim slurmTaskRec
	deadline := time.Now().Add(3 * time.Minute)
	for victim.ID == "" {
		if time.Now().After(deadline) {
			first.Process.Kill()
			t.Fatalf("no arm-seed training within 3 minutes:\n%s", log1)
		}
		time.Sleep(20 * time.Millisecond)
		for _, task := range readSlurmRec(t, out).Tasks {
			run := filepath.Join(out, "runs", task.Arm, "seed-"+strconv.FormatUint(task.Seed, 10))
			data, _ := os.ReadFile(filepath.Join(run, "checkpoints", "LATEST"))
			if _, err := os.Stat(filepath.Join(run, "DONE")); err != nil && len(bytes.TrimSpace(data)) > 0 {
				q := exec.Command("squeue", "-h", "-r", "-j", task.ID, "-o", "%T")
				q.Env = env
				if st, _ := q.Output(); strings.TrimSpace(string(st)) == "RUNNING" {
					victim = task
					break
				}
			}
		}
	}
	first.Process.Signal(syscall.SIGKILL)
	first.Wait()
	cancel := exec.Command("scancel", victim.ID)
	cancel.Env = env
	if b, err := cancel.CombinedOutput(); err != nil {
		t.Fatalf("scancel %s: %v %s", victim.ID, err, b)
	}
	before := readSlurmRec(t, out)

	second, log2 := start()
	done := make(chan error, 1)
	go func() { done <- second.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("restarted bench: %v\n%s", err, log2)
		}
	case <-time.After(5 * time.Minute):
		second.Process.Kill()
		t.Fatalf("restarted bench did not finish in 5 minutes:\n%s", log2)
	}
	after := readSlurmRec(t, out)
	if before.Base == nil || after.Base == nil || after.Base.Attempts != 1 || after.Base.ID != before.Base.ID {
		t.Errorf("base job: before %+v, after %+v: want one submission", before.Base, after.Base)
	}
	if len(after.Tasks) != 4 {
		t.Fatalf("tasks %+v", after.Tasks)
	}
	for k, task := range after.Tasks {
		want := 1
		if task.Arm == victim.Arm && task.Seed == victim.Seed {
			want = 2
			if !strings.Contains(log2.String(), "resubmitting, attempt 2") {
				t.Errorf("no resubmission of %s in the restarted bench's output:\n%s", k, log2)
			}
		} else if b := before.Tasks[k]; b.ID != task.ID {
			t.Errorf("%s: job %s resubmitted as %s though it was queued or running", k, b.ID, task.ID)
		}
		if task.Attempts != want {
			t.Errorf("%s: %d submission(s), want %d", k, task.Attempts, want)
		}
	}
	if !strings.Contains(log2.String(), "following it") {
		t.Errorf("the restarted bench did not follow the running jobs:\n%s", log2)
	}

	// The same bench, locally.
	local := filepath.Join(work, "local")
	cmd := exec.Command(cdeRun, "bench", "-c", spec, "--out", local, "--executor", "local", "--jobs", "2")
	cmd.Dir = work
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("local bench: %v\n%s", err, b)
	}
	for _, run := range []string{"base/seed-1", "base/seed-2", "grpo/seed-1", "grpo/seed-2", "rloo/seed-1", "rloo/seed-2"} {
		s := readMetrics(t, filepath.Join(out, "runs", run, "metrics.jsonl"))
		l := readMetrics(t, filepath.Join(local, "runs", run, "metrics.jsonl"))
		if !reflect.DeepEqual(s, l) {
			t.Errorf("%s: metrics.jsonl on Slurm (%d rows) differs from the local run (%d rows)", run, len(s), len(l))
		}
	}
	// --detach submits and returns; a follower stopped with Ctrl-C (no
	// terminal to ask on) leaves the jobs queued and says how to cancel
	// them; the next run follows them to the report.
	out2 := filepath.Join(work, "detached")
	det := exec.Command(cdeRun, "bench", "-c", spec, "--out", out2, "--detach")
	det.Env, det.Dir = env, work
	if b, err := det.CombinedOutput(); err != nil || !strings.Contains(string(b), "not waiting") && !strings.Contains(string(b), "run the same command again to follow them") {
		t.Fatalf("--detach: %v\n%s", err, b)
	}
	if r := readSlurmRec(t, out2); len(r.Tasks) != 4 || r.Base == nil {
		t.Fatalf("--detach recorded %+v", r)
	}
	follow := exec.Command(cdeRun, "bench", "-c", spec, "--out", out2)
	follow.Env, follow.Dir = env, work
	var fbuf bytes.Buffer
	follow.Stdout, follow.Stderr = &fbuf, &fbuf
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	for wait := time.Now().Add(time.Minute); !strings.Contains(fbuf.String(), "following it") && !strings.Contains(fbuf.String(), "arm-seeds done"); {
		if time.Now().After(wait) {
			follow.Process.Kill()
			t.Fatalf("the follower said nothing in a minute:\n%s", fbuf.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	follow.Process.Signal(os.Interrupt)
	if err := follow.Wait(); err == nil || !strings.Contains(fbuf.String(), "rerun the same command to follow them, or cancel them with: scancel") {
		t.Errorf("Ctrl-C while following: %v\n%s", err, fbuf.String())
	}
	again := exec.Command(cdeRun, "bench", "-c", spec, "--out", out2)
	again.Env, again.Dir = env, work
	if b, err := again.CombinedOutput(); err != nil || !strings.Contains(string(b), "bench finished") {
		t.Errorf("following the detached jobs: %v\n%s", err, b)
	}
	if r := readSlurmRec(t, out2); r.Base == nil || r.Base.Attempts != 1 {
		t.Errorf("detached bench resubmitted: %+v", r)
	} else {
		for k, task := range r.Tasks {
			if task.Attempts != 1 {
				t.Errorf("detached %s: %d submissions", k, task.Attempts)
			}
		}
	}

	// The shipped smoke bench, on Slurm and locally: the same metrics.
	smokeS, smokeL := filepath.Join(work, "smoke-slurm"), filepath.Join(work, "smoke-local")
	for _, c := range [][]string{{"--out", smokeS, "--executor", "slurm"}, {"--out", smokeL}} {
		cmd := exec.Command(cdeRun, append([]string{"bench", "-c", "smoke"}, c...)...)
		cmd.Env, cmd.Dir = env, work
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("smoke %v: %v\n%s", c, err, b)
		}
	}
	for _, run := range []string{"grpo_simhash", "ppo_mh_ppl", "grpo_tokenloss", "rloo_options"} {
		s := readMetrics(t, filepath.Join(smokeS, "runs", run, "seed-1", "metrics.jsonl"))
		l := readMetrics(t, filepath.Join(smokeL, "runs", run, "seed-1", "metrics.jsonl"))
		if !reflect.DeepEqual(s, l) {
			t.Errorf("smoke %s: metrics.jsonl on Slurm differs from the local run", run)
		}
	}

	sv, _ := os.ReadFile(filepath.Join(out, "verdicts.json"))
	lv, _ := os.ReadFile(filepath.Join(local, "verdicts.json"))
	if len(sv) == 0 || !bytes.Equal(sv, lv) {
		t.Errorf("verdicts differ:\nslurm %s\nlocal %s", sv, lv)
	}
}
