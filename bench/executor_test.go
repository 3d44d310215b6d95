package bench

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// The executor mapping: defaults, every key into its sbatch option, and an
// error naming the key for each kind of bad value.
func TestParseExecutor(t *testing.T) {
	e, err := parseExecutor(nil)
	if err != nil || e.Name != "local" || e.Retries != 2 || e.Poll != 5*time.Second || e.CPUs != 1 {
		t.Fatalf("default %+v %v", e, err)
	}
	e, err = parseExecutor(map[string]any{"name": "slurm", "partition": "gpu", "account": "lab", "qos": "high", "time": "2:00:00",
		"cpus_per_task": 4, "mem": "16G", "gres": "gpu:1", "sbatch_extra": []any{"--constraint=a100"}, "parallel": 8,
		"env": map[string]any{"HF_HOME": "/scratch/hf", "OMP_NUM_THREADS": 4}, "retries": 0, "poll": "2s"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--partition=gpu", "--account=lab", "--qos=high", "--time=2:00:00", "--mem=16G", "--gres=gpu:1",
		"--cpus-per-task=4", "--export=ALL,HF_HOME=/scratch/hf,OMP_NUM_THREADS=4", "--constraint=a100"}
	if got := e.sbatchArgs(); !slices.Equal(got, want) || e.Parallel != 8 || e.Retries != 0 || e.Poll != 2*time.Second {
		t.Errorf("sbatch args %q, want %q (%+v)", got, want, e)
	}
	for _, c := range []struct {
		m    map[string]any
		want string
	}{
		{map[string]any{"name": "pbs"}, "executor.name"},
		{map[string]any{"name": "slurm", "partion": "x"}, "executor.partion: unknown key"},
		{map[string]any{"name": "slurm", "cpus_per_task": 0}, "executor.cpus_per_task: must be >= 1"},
		{map[string]any{"name": "slurm", "parallel": -1}, "executor.parallel"},
		{map[string]any{"name": "slurm", "retries": -1}, "executor.retries"},
		{map[string]any{"name": "slurm", "poll": "fast"}, "executor.poll"},
		{map[string]any{"name": "slurm", "sbatch_extra": []any{"constraint=a100"}}, "executor.sbatch_extra[0]"},
		{map[string]any{"name": "slurm", "env": map[string]any{"A-B": "x"}}, "executor.env.A-B"},
		{map[string]any{"name": "slurm", "env": map[string]any{"A": "x,y"}}, "executor.env.A"},
		{map[string]any{"partition": "gpu"}, "Slurm settings given with name: local"},
	} {
		if _, err := parseExecutor(c.m); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.m, err, c.want)
		}
	}
	if _, err := ParseSpec([]byte("base: {task: {name: arith}}\nseeds: [1]\narms: [{name: a}]\nexecutor: {name: slurm, partition: gpu}\n"), "x.yaml"); err != nil {
		t.Errorf("a spec with an executor: %v", err)
	}
	if _, err := ParseSpec([]byte("base: {task: {name: arith}}\nseeds: [1]\narms: [{name: a}]\nexecutor: slurm\n"), "x.yaml"); err == nil ||
		!strings.Contains(err.Error(), "bench x.yaml: executor: want a mapping") {
		t.Errorf("executor as a string: %v", err)
	}
}

// A worker's command names the bench file and directory absolutely and
// quotes them for the shell.
func TestWorkerCommand(t *testing.T) {
	dir := t.TempDir()
	spec := &Spec{File: "smoke"} // a preset: no such file here, kept by name
	got, err := workerCommand("/opt/cde run/cde-run", spec, dir+"/it's", "$SLURM_ARRAY_TASK_ID")
	if err != nil {
		t.Fatal(err)
	}
	want := `exec '/opt/cde run/cde-run' bench -c 'smoke' --out '` + dir + `/it'\''s' --worker $SLURM_ARRAY_TASK_ID`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
