package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cde-rl/cde/session"
)

// fakeSlurm puts sbatch, squeue and scancel scripts first on PATH. They
// append what they are asked to transcript (where the bench's output goes
// too, so the two interleave in order): sbatch answers ids 100, 101, ...;
// the Nth squeue runs fake/hook.N when it exists and answers fake/squeue.N
// (nothing when absent).
func fakeSlurm(t *testing.T) (fake, transcript string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the fake Slurm commands are shell scripts")
	}
	fake = t.TempDir()
	transcript = filepath.Join(fake, "transcript")
	scripts := map[string]string{
		"sbatch": `n=$(cat "$D/sbatch.n" 2>/dev/null || echo 99); n=$((n+1)); echo $n >"$D/sbatch.n"
{ echo "[sbatch -> $n]"; for a in "$@"; do printf '    %s\n' "$a"; done; } >>"$D/transcript"
echo "$n"
`,
		"squeue": `n=$(cat "$D/squeue.n" 2>/dev/null || echo 0); n=$((n+1)); echo $n >"$D/squeue.n"
echo "[squeue $n: $*]" >>"$D/transcript"
if [ -f "$D/hook.$n" ]; then sh "$D/hook.$n"; fi
if [ -f "$D/squeue.$n" ]; then cat "$D/squeue.$n"; fi
exit 0
`,
		"scancel": `echo "[scancel $*]" >>"$D/transcript"
`,
	}
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(fake, name), []byte("#!/bin/sh\nD='"+fake+"'\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", fake+string(os.PathListSeparator)+os.Getenv("PATH"))
	return fake, transcript
}

// TestSlurmTranscript pins what runSlurm submits, prints and returns over
// five bench processes on one results directory against a scripted
// squeue: the base job and the array with their sbatch options,
// resubmissions after a task vanished or its dependency failed, giving
// up, the base job's retries running out, --detach, a restarted bench
// following live jobs, --only, and Ctrl-C with and without cancelling.
func TestSlurmTranscript(t *testing.T) {
	fake, transcript := fakeSlurm(t)
	dir := filepath.Join(t.TempDir(), "out")
	spec, err := ParseSpec([]byte(`
base_eval: true
base:
  seed: 1
  task: {name: arith, levels: [1], eval_n: 4, eval_sets: [{name: l1, level: 1}]}
  model: {layers: 1, d_model: 16, heads: 2, max_len: 48, checkpoint: auto}
  rollout: {n: 4, max_response_tokens: 12}
  train: {steps: 2, prompts_per_step: 2, checkpoint_every: 2}
  eval: {every: 0, k: 2, at_start: false}
  pretrain: {seed: 1, steps: 4, batch_size: 8, eval_every: 4, eval_k: 1, eval_max_problems: 4}
seeds: [1, 2]
arms:
  - {name: a, config: {algorithm: {name: grpo}}}
  - {name: b, config: {algorithm: {name: grpo}}}
`), "slurm-pin.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec.Executor = Executor{Name: "slurm", Partition: "gpu", Time: "1:00:00", CPUs: 2, Gres: "gpu:1",
		Extra: []string{"--constraint=a100"}, Parallel: 2, Env: map[string]string{"HF_HOME": "/scratch/hf"},
		Retries: 1, Poll: time.Millisecond}
	// Arm-seed indices (armSeeds): 0 a/1, 1 b/1, 2 a/2, 3 b/2.
	done := func(arm string, seed uint64) string {
		return "mkdir -p '" + RunDir(dir, arm, seed) + "' && touch '" + filepath.Join(RunDir(dir, arm, seed), DoneFile) + "'\n"
	}
	files := map[string]string{
		"squeue.2": "100|RUNNING|None\n101_0|PENDING|Dependency\n101_1|PENDING|Dependency\n101_2|PENDING|Dependency\n101_3|PENDING|Dependency\n",
		"hook.3":   done("a", 1),
		"squeue.3": "100|COMPLETING|None\n101_1|RUNNING|None\n101_2|PENDING|DependencyNeverSatisfied\n",
		"squeue.4": "101_1|RUNNING|None\n",
		"squeue.5": "101_1|RUNNING|None\n",
		"squeue.6": "101_1|RUNNING|None\n",
		"hook.7":   done("b", 1),
		// run 2 (--detach): squeue 8 lists nothing.
		// run 3
		"squeue.9":  "105|PENDING|Priority\n106_2|PENDING|Dependency\n",
		"squeue.10": "106_2|PENDING|DependencyNeverSatisfied\n107_3|PENDING|DependencyNeverSatisfied\n",
		// run 4 (--only a, Ctrl-C, cancel)
		"squeue.11": "107_3|RUNNING|None\n",
		"hook.12":   "touch '" + filepath.Join(fake, "cancel.12") + "'\n",
		"squeue.12": "107_3|RUNNING|None\n108_2|RUNNING|None\n",
		// run 5 (Ctrl-C, leave them)
		"squeue.13": "107_3|RUNNING|None\n108_2|RUNNING|None\n",
		"hook.14":   "touch '" + filepath.Join(fake, "cancel.14") + "'\n",
		"squeue.14": "107_3|RUNNING|None\n108_2|PENDING|Priority\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(fake, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := os.OpenFile(transcript, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	run := func(name string, o Options, cancelOn string) {
		fmt.Fprintf(tr, "== %s\n", name)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if cancelOn != "" { // Ctrl-C once the bench follows its jobs
			go func() {
				for ctx.Err() == nil {
					if _, err := os.Stat(filepath.Join(fake, cancelOn)); err == nil {
						cancel()
						return
					}
					time.Sleep(time.Millisecond)
				}
			}()
		}
		o.Dir, o.Exe, o.Output = dir, "/opt/cde/cde-run", tr
		err := runSlurm(ctx, spec, o)
		fmt.Fprintf(tr, "-> %v (canceled %v, detached %v)\n", err, errors.Is(err, context.Canceled), errors.Is(err, ErrDetached))
	}
	run("run 1", Options{}, "")
	run("run 2", Options{Detach: true}, "")
	run("run 3", Options{}, "")
	// Run 4 needs no base job: the base evaluations and a/2's base exist.
	for _, seed := range spec.Seeds {
		if err := os.MkdirAll(RunDir(dir, BaseArm, seed), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(RunDir(dir, BaseArm, seed), DoneFile), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	arm, _ := spec.Arm("a")
	cfg, err := spec.ArmConfig(dir, arm, 2)
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(cfg.Pretrain.Dir, session.BaseKey(cfg))
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "policy.gob"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	spec.Executor.Poll = time.Hour // only Ctrl-C ends the wait
	var asked []string
	run("run 4", Options{Only: []string{"a"}, Confirm: func(q string) bool { asked = append(asked, q); return true }}, "cancel.12")
	run("run 5", Options{}, "cancel.14")

	data, err := os.ReadFile(transcript)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.ReplaceAll(string(data), dir, "$OUT")
	got = regexp.MustCompile(`; elapsed [0-9hms.]+\n`).ReplaceAllString(got, "; elapsed T\n")
	if got != slurmTranscript {
		t.Errorf("transcript:\n%s\nwant:\n%s", got, slurmTranscript)
	}
	if want := "cancel the bench's 2 queued or running Slurm job(s) (107_3 108_2)?"; len(asked) != 1 || asked[0] != want {
		t.Errorf("asked %q, want [%q]", asked, want)
	}
}

// slurmTranscript is what runSlurm did before it was split by role.
const slurmTranscript = `== run 1
[squeue 1: -h -r --me -o %i|%T|%r]
[sbatch -> 100]
    --parsable
    --job-name=cde-slurm-pin
    --partition=gpu
    --time=1:00:00
    --gres=gpu:1
    --cpus-per-task=2
    --export=ALL,HF_HOME=/scratch/hf
    --constraint=a100
    --output=$OUT/slurm-logs/base-%j.out
    --wrap=exec '/opt/cde/cde-run' bench -c 'slurm-pin.yaml' --out '$OUT' --worker base
bench: slurm: submitted the base job 100 (base policies and evaluations)
[sbatch -> 101]
    --parsable
    --job-name=cde-slurm-pin
    --partition=gpu
    --time=1:00:00
    --gres=gpu:1
    --cpus-per-task=2
    --export=ALL,HF_HOME=/scratch/hf
    --constraint=a100
    --array=0,1,2,3%2
    --output=$OUT/slurm-logs/task-%A_%a.out
    --wrap=exec '/opt/cde/cde-run' bench -c 'slurm-pin.yaml' --out '$OUT' --worker $SLURM_ARRAY_TASK_ID
    --dependency=afterok:100
    --kill-on-invalid-dep=yes
bench: slurm: submitted job array 101: 4 arm-seed(s) (tasks 0,1,2,3%2)
[squeue 2: -h -r --me -o %i|%T|%r]
bench: slurm: 0/4 arm-seeds done, 0 running, 4 pending, 0 failed (done by arm: a 0/2, b 0/2); elapsed T
[squeue 3: -h -r --me -o %i|%T|%r]
bench: slurm: a seed 2: job 101_2 ended without finishing (state "PENDING"); resubmitting, attempt 2 of 2 (log: $OUT/slurm-logs/task-101_2.out)
[scancel 101_2]
[sbatch -> 102]
    --parsable
    --job-name=cde-slurm-pin
    --partition=gpu
    --time=1:00:00
    --gres=gpu:1
    --cpus-per-task=2
    --export=ALL,HF_HOME=/scratch/hf
    --constraint=a100
    --array=2%2
    --output=$OUT/slurm-logs/task-%A_%a.out
    --wrap=exec '/opt/cde/cde-run' bench -c 'slurm-pin.yaml' --out '$OUT' --worker $SLURM_ARRAY_TASK_ID
    --dependency=afterok:100
    --kill-on-invalid-dep=yes
bench: slurm: submitted job array 102: 1 arm-seed(s) (tasks 2%2)
bench: slurm: 1/4 arm-seeds done, 1 running, 2 pending, 0 failed (done by arm: a 1/2, b 0/2); running: b seed 1; elapsed T
[squeue 4: -h -r --me -o %i|%T|%r]
bench: slurm: b seed 2: job 101_3 ended without finishing (state ""); resubmitting, attempt 2 of 2 (log: $OUT/slurm-logs/task-101_3.out)
[sbatch -> 103]
    --parsable
    --job-name=cde-slurm-pin
    --partition=gpu
    --time=1:00:00
    --gres=gpu:1
    --cpus-per-task=2
    --export=ALL,HF_HOME=/scratch/hf
    --constraint=a100
    --output=$OUT/slurm-logs/base-%j.out
    --wrap=exec '/opt/cde/cde-run' bench -c 'slurm-pin.yaml' --out '$OUT' --worker base
bench: slurm: submitted the base job 103 (base policies and evaluations)
[sbatch -> 104]
    --parsable
    --job-name=cde-slurm-pin
    --partition=gpu
    --time=1:00:00
    --gres=gpu:1
    --cpus-per-task=2
    --export=ALL,HF_HOME=/scratch/hf
    --constraint=a100
    --array=3%2
    --output=$OUT/slurm-logs/task-%A_%a.out
    --wrap=exec '/opt/cde/cde-run' bench -c 'slurm-pin.yaml' --out '$OUT' --worker $SLURM_ARRAY_TASK_ID
    --dependency=afterok:103
    --kill-on-invalid-dep=yes
bench: slurm: submitted job array 104: 1 arm-seed(s) (tasks 3%2)
[squeue 5: -h -r --me -o %i|%T|%r]
bench: slurm: a seed 2: job 102_2 ended without finishing, 2 attempt(s): giving up (log: $OUT/slurm-logs/task-102_2.out)
bench: slurm: 1/4 arm-seeds done, 1 running, 1 pending, 1 failed (done by arm: a 1/2, b 0/2); running: b seed 1; elapsed T
[squeue 6: -h -r --me -o %i|%T|%r]
bench: slurm: b seed 2: job 104_3 ended without finishing, 2 attempt(s): giving up (log: $OUT/slurm-logs/task-104_3.out)
bench: slurm: 1/4 arm-seeds done, 1 running, 0 pending, 2 failed (done by arm: a 1/2, b 0/2); running: b seed 1; elapsed T
[squeue 7: -h -r --me -o %i|%T|%r]
bench: slurm: 2/4 arm-seeds done, 0 running, 0 pending, 2 failed (done by arm: a 1/2, b 1/2); elapsed T
-> bench: 2 arm-seed(s) failed on Slurm after their retries: a seed 2, b seed 2 (logs in $OUT/slurm-logs; rerun to retry them) (canceled false, detached false)
== run 2
[squeue 8: -h -r --me -o %i|%T|%r]
[sbatch -> 105]
    --parsable
    --job-name=cde-slurm-pin
    --partition=gpu
    --time=1:00:00
    --gres=gpu:1
    --cpus-per-task=2
    --export=ALL,HF_HOME=/scratch/hf
    --constraint=a100
    --output=$OUT/slurm-logs/base-%j.out
    --wrap=exec '/opt/cde/cde-run' bench -c 'slurm-pin.yaml' --out '$OUT' --worker base
bench: slurm: submitted the base job 105 (base policies and evaluations)
bench: slurm: a seed 2: job 102_2 ended without finishing; resubmitting, attempt 1 of 2 (log: $OUT/slurm-logs/task-102_2.out)
bench: slurm: b seed 2: job 104_3 ended without finishing; resubmitting, attempt 1 of 2 (log: $OUT/slurm-logs/task-104_3.out)
[sbatch -> 106]
    --parsable
    --job-name=cde-slurm-pin
    --partition=gpu
    --time=1:00:00
    --gres=gpu:1
    --cpus-per-task=2
    --export=ALL,HF_HOME=/scratch/hf
    --constraint=a100
    --array=2,3%2
    --output=$OUT/slurm-logs/task-%A_%a.out
    --wrap=exec '/opt/cde/cde-run' bench -c 'slurm-pin.yaml' --out '$OUT' --worker $SLURM_ARRAY_TASK_ID
    --dependency=afterok:105
    --kill-on-invalid-dep=yes
bench: slurm: submitted job array 106: 2 arm-seed(s) (tasks 2,3%2)
bench: slurm: jobs recorded in $OUT/slurm-jobs.json; run the same command again to follow them and write the report, or add --report-only for what is finished
-> bench: jobs submitted; not waiting for them (--detach) (canceled false, detached true)
== run 3
[squeue 9: -h -r --me -o %i|%T|%r]
bench: slurm: the base job 105 is pending
bench: slurm: a seed 2: job 106_2 is pending; following it
bench: slurm: b seed 2: job 106_3 ended without finishing; resubmitting, attempt 2 of 2 (log: $OUT/slurm-logs/task-106_3.out)
[sbatch -> 107]
    --parsable
    --job-name=cde-slurm-pin
    --partition=gpu
    --time=1:00:00
    --gres=gpu:1
    --cpus-per-task=2
    --export=ALL,HF_HOME=/scratch/hf
    --constraint=a100
    --array=3%2
    --output=$OUT/slurm-logs/task-%A_%a.out
    --wrap=exec '/opt/cde/cde-run' bench -c 'slurm-pin.yaml' --out '$OUT' --worker $SLURM_ARRAY_TASK_ID
    --dependency=afterok:105
    --kill-on-invalid-dep=yes
bench: slurm: submitted job array 107: 1 arm-seed(s) (tasks 3%2)
[squeue 10: -h -r --me -o %i|%T|%r]
bench: slurm: a seed 2: job 106_2 ended without finishing (state "PENDING"); resubmitting, attempt 2 of 2 (log: $OUT/slurm-logs/task-106_2.out)
[scancel 106_2]
bench: slurm: b seed 2: job 107_3 ended without finishing, 2 attempt(s): giving up (log: $OUT/slurm-logs/task-107_3.out)
-> bench: slurm: the base job failed 3 time(s) (log: $OUT/slurm-logs/base-105.out); fix it and run the bench again (canceled false, detached false)
== run 4
[squeue 11: -h -r --me -o %i|%T|%r]
bench: slurm: a seed 2: job 106_2 ended without finishing; resubmitting, attempt 2 of 2 (log: $OUT/slurm-logs/task-106_2.out)
[sbatch -> 108]
    --parsable
    --job-name=cde-slurm-pin
    --partition=gpu
    --time=1:00:00
    --gres=gpu:1
    --cpus-per-task=2
    --export=ALL,HF_HOME=/scratch/hf
    --constraint=a100
    --array=2%2
    --output=$OUT/slurm-logs/task-%A_%a.out
    --wrap=exec '/opt/cde/cde-run' bench -c 'slurm-pin.yaml' --out '$OUT' --worker $SLURM_ARRAY_TASK_ID
bench: slurm: submitted job array 108: 1 arm-seed(s) (tasks 2%2)
[squeue 12: -h -r --me -o %i|%T|%r]
bench: slurm: 0/1 arm-seeds done, 1 running, 0 pending, 0 failed (done by arm: a 0/1); running: a seed 2; elapsed T
[scancel 107_3 108_2]
bench: slurm: cancelled 107_3 108_2
-> context canceled (canceled true, detached false)
== run 5
[squeue 13: -h -r --me -o %i|%T|%r]
bench: slurm: a seed 2: job 108_2 is running; following it
bench: slurm: b seed 2: job 107_3 is running; following it
[squeue 14: -h -r --me -o %i|%T|%r]
bench: slurm: 0/2 arm-seeds done, 1 running, 1 pending, 0 failed (done by arm: a 0/1, b 0/1); running: b seed 2; elapsed T
bench: slurm: left 2 job(s) running (107_3 108_2); rerun the same command to follow them, or cancel them with: scancel 107_3 108_2
-> context canceled (canceled true, detached false)
`
