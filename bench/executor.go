package bench

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/cde-rl/cde/core"
)

// Executors are the values of the bench file's executor.name.
var Executors = []string{"local", "slurm"}

// Executor says where a bench's arm-seeds train (the bench file's
// `executor:` mapping; docs/bench.md). With "local" they are child
// processes of the bench (Options.Jobs at a time); with "slurm" the base
// warm start is one Slurm job and the arm-seeds one job array that depends
// on it, each task running `cde-run bench --worker N` on its arm-seed in
// the shared results directory.
type Executor struct {
	Name string // local (default) or slurm
	// sbatch options; "" (0) leaves Slurm's default.
	Partition string            // --partition
	Account   string            // --account
	QOS       string            // --qos
	Time      string            // --time, Slurm's format ("2:00:00", "1-0")
	CPUs      int               // --cpus-per-task (default 1)
	Mem       string            // --mem ("8G")
	Gres      string            // --gres ("gpu:1")
	Extra     []string          // further sbatch options, one per entry ("--constraint=a100")
	Parallel  int               // the array's %N: tasks running at once (0: no limit)
	Env       map[string]string // variables set in every job, on top of the submitting environment
	// Retries is how many times a failed or vanished task is resubmitted,
	// resuming from its last checkpoint (default 2).
	Retries int
	// Poll is how often squeue is asked (default 5s).
	Poll time.Duration
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// parseExecutor reads the bench file's executor mapping (nil: local).
func parseExecutor(v any) (Executor, error) {
	e := Executor{Name: "local", CPUs: 1, Retries: 2, Poll: 5 * time.Second}
	if v == nil {
		return e, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return e, fmt.Errorf("config: executor: want a mapping {name: local|slurm, ...}, got %v", v)
	}
	p := core.NewParams("executor", m)
	if err := finishKnown(p, "name", "partition", "account", "qos", "time", "cpus_per_task", "mem", "gres",
		"sbatch_extra", "parallel", "env", "retries", "poll"); err != nil {
		return e, err
	}
	e.Name = p.OneOf("name", "local", Executors...)
	e.Partition, e.Account, e.QOS = p.String("partition", ""), p.String("account", ""), p.String("qos", "")
	e.Time, e.Mem, e.Gres = p.String("time", ""), p.String("mem", ""), p.String("gres", "")
	e.CPUs = p.Int("cpus_per_task", 1)
	p.Check(e.CPUs >= 1, "cpus_per_task", "must be >= 1, got %d", e.CPUs)
	e.Parallel = p.Int("parallel", 0)
	p.Check(e.Parallel >= 0, "parallel", "must be >= 0 (0: no limit), got %d", e.Parallel)
	e.Retries = p.Int("retries", 2)
	p.Check(e.Retries >= 0, "retries", "must be >= 0, got %d", e.Retries)
	poll := p.String("poll", "5s")
	d, err := time.ParseDuration(poll)
	p.Check(err == nil && d >= 100*time.Millisecond, "poll", "want a duration of at least 100ms (\"5s\"), got %q", poll)
	e.Poll = d
	if raw, ok := p.Raw("sbatch_extra"); ok && raw != nil {
		list, isList := raw.([]any)
		p.Check(isList, "sbatch_extra", "want a list of sbatch options, got %v", raw)
		for i, x := range list {
			s, isStr := x.(string)
			if !isStr || !strings.HasPrefix(s, "-") {
				p.Fail(fmt.Sprintf("sbatch_extra[%d]", i), "want an sbatch option such as \"--constraint=a100\", got %v", x)
				break
			}
			e.Extra = append(e.Extra, s)
		}
	}
	if raw, ok := p.Raw("env"); ok && raw != nil {
		mm, isMap := raw.(map[string]any)
		p.Check(isMap, "env", "want a mapping NAME: value, got %v", raw)
		for _, k := range sortedKeys(mm) {
			if !envNameRE.MatchString(k) || strings.ContainsAny(fmt.Sprint(mm[k]), ",\n") {
				p.Fail("env."+k, "want a variable name and a value without commas or newlines, got %q: %v", k, mm[k])
				break
			}
			if e.Env == nil {
				e.Env = map[string]string{}
			}
			e.Env[k] = fmt.Sprint(mm[k])
		}
	}
	if err := p.Err(); err != nil {
		return e, err
	}
	if e.Name == "local" && (e.Partition != "" || e.Account != "" || e.QOS != "" || e.Time != "" || e.Mem != "" || e.Gres != "" ||
		len(e.Extra) > 0 || e.Parallel != 0 || len(e.Env) > 0) {
		return e, fmt.Errorf("config: executor: Slurm settings given with name: local (set name: slurm, or pass --executor slurm)")
	}
	return e, nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// sbatchArgs are the options every job of the bench gets.
func (e Executor) sbatchArgs() []string {
	var a []string
	add := func(flag, v string) {
		if v != "" {
			a = append(a, flag+"="+v)
		}
	}
	add("--partition", e.Partition)
	add("--account", e.Account)
	add("--qos", e.QOS)
	add("--time", e.Time)
	add("--mem", e.Mem)
	add("--gres", e.Gres)
	a = append(a, fmt.Sprintf("--cpus-per-task=%d", e.CPUs))
	export := "ALL"
	for _, k := range sortedKeys(anyMap(e.Env)) {
		export += "," + k + "=" + e.Env[k]
	}
	a = append(a, "--export="+export)
	return append(a, e.Extra...)
}

func anyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
