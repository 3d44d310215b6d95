package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/tasks"
	"github.com/cde-rl/cde/trainer"
)

// cdeRun is the cde-run binary the runner trains with, built once.
var cdeRun string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "bench-test")
	if err != nil {
		panic(err)
	}
	cdeRun = filepath.Join(dir, "cde-run")
	if out, err := exec.Command("go", "build", "-o", cdeRun, "../cmd/cde-run").CombinedOutput(); err != nil {
		panic("building cde-run: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// syncBuffer is an io.Writer safe for the runner's goroutines and children.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		n++
	}
	return n
}

// TestSmoke runs bench/smoke.yaml end to end (two arm-seeds at a time),
// then again (nothing is rerun), then with one DONE marker removed (that
// arm-seed resumes from its checkpoint), then the report alone, then with a
// changed arm config (refused).
func TestSmoke(t *testing.T) {
	out := filepath.Join(t.TempDir(), "smoke")
	spec, err := Load("smoke.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bench := func(o Options) string {
		t.Helper()
		var log syncBuffer
		o.Dir, o.Exe, o.Output, o.Log = out, cdeRun, &log, zerolog.New(&log)
		if err := Run(context.Background(), spec, o); err != nil {
			t.Fatalf("bench: %v\n%s", err, log.String())
		}
		return log.String()
	}
	log := bench(Options{Jobs: 2, Command: "smoke --jobs 2"})
	for _, want := range []string{"grpo_simhash seed 1: starting", "ppo_mh_ppl seed 1: finished", "ETA", "[ppo_mh_ppl seed 1] "} {
		if !strings.Contains(log, want) {
			t.Errorf("bench log lacks %q:\n%s", want, log)
		}
	}
	for _, f := range []string{"results.md", "results.csv"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Fatal(err)
		}
	}
	// No smoke run answers anything correctly (a tiny random model), so
	// there is no calibration gap to draw: the report says so.
	for _, p := range []string{"heldout_accuracy", "entropy", "critic_head_std", "simhash_cells"} {
		for _, ext := range []string{".png", ".svg"} {
			if st, err := os.Stat(filepath.Join(out, "plots", p+ext)); err != nil || st.Size() == 0 {
				t.Errorf("plot %s%s: %v", p, ext, err)
			}
		}
	}
	f, err := os.Open(filepath.Join(out, "results.csv"))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 5 || recs[1][0] != "grpo_simhash" || recs[2][0] != "ppo_mh_ppl" || recs[3][0] != "grpo_tokenloss" || recs[4][0] != "rloo_options" {
		t.Fatalf("results.csv: want a header and one row per arm, got %v", recs)
	}
	for _, col := range []string{"val/l1/avg@2_mean", "val/l2/pass@2_std", "val/ood/avg@2_mean", "val/mean/avg@2_mean", "train/acc_mean", "wall_s_mean"} {
		if !slices.Contains(recs[0], col) {
			t.Errorf("results.csv lacks column %s: %v", col, recs[0])
		}
	}
	md, _ := os.ReadFile(filepath.Join(out, "results.md"))
	for _, want := range []string{"| grpo_simhash | 1 |", "ood Pass@2", "## Claims", "PPO + multi-head + PPL beats GRPO + SimHash",
		"## Critic head std by prompt set", "| ppo_mh_ppl | 2 |", "plots/heldout_accuracy.png", "Runs made by `smoke --jobs 2`",
		"l1 (held-out) | l2 (held-out) | ood (OOD) |", "no finished arm reports calib/ppl_incorrect / calib/ppl_correct in one step; not plotted"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("results.md lacks %q:\n%s", want, md)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "runs", "ppo_mh_ppl", "seed-1", HeadStdFile)); err != nil {
		t.Errorf("no critic head std measurement for the multi-head arm: %v", err)
	}
	// The token-loss arm trained with every token-loss strategy's weights.
	tl, err := os.ReadFile(filepath.Join(out, "runs", "grpo_tokenloss", "seed-1", "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"explore/forking_tokens/pg_weight_mean"`, `"explore/clip_cov/pg_weight_mean"`,
		`"explore/kl_cov/abs_kl_coef_mean"`, `"explore/adaptive_entropy/entropy_coef"`} {
		if !strings.Contains(string(tl), want) {
			t.Errorf("grpo_tokenloss metrics lack %s", want)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "runs", "grpo_simhash", "seed-1", HeadStdFile)); err == nil {
		t.Errorf("critic head std measured for an arm without a critic")
	}

	// A second run reruns nothing.
	done := map[string]time.Time{}
	for _, arm := range []string{"grpo_simhash", "ppo_mh_ppl", "grpo_tokenloss", "rloo_options"} {
		st, err := os.Stat(filepath.Join(out, "runs", arm, "seed-1", DoneFile))
		if err != nil {
			t.Fatal(err)
		}
		done[arm] = st.ModTime()
	}
	log = bench(Options{})
	if strings.Count(log, "done, skipping") != 4 || strings.Contains(log, "starting") {
		t.Fatalf("second bench run did not skip every finished arm-seed:\n%s", log)
	}
	for arm, mt := range done {
		st, _ := os.Stat(filepath.Join(out, "runs", arm, "seed-1", DoneFile))
		if !st.ModTime().Equal(mt) {
			t.Errorf("%s: DONE rewritten by the second run", arm)
		}
	}

	// An unfinished arm-seed with a checkpoint resumes instead of restarting.
	os.Remove(filepath.Join(out, "runs", "ppo_mh_ppl", "seed-1", DoneFile))
	log = bench(Options{Only: []string{"ppo_mh_ppl"}})
	if !strings.Contains(log, "ppo_mh_ppl seed 1: resuming from") || !strings.Contains(log, "bench [1/1] ppo_mh_ppl seed 1: finished") {
		t.Fatalf("did not resume the unfinished arm-seed:\n%s", log)
	}
	if n := countLines(t, filepath.Join(out, "runs", "ppo_mh_ppl", "seed-1", "metrics.jsonl")); n != 5 {
		t.Errorf("resumed run has %d metric lines, want 5 (steps 0..3 and the final eval)", n)
	}

	// The report alone.
	os.Remove(filepath.Join(out, "results.md"))
	if err := Report(spec, Options{Dir: out, Command: "report only", Log: zerolog.Nop()}); err != nil {
		t.Fatal(err)
	}
	if md, err := os.ReadFile(filepath.Join(out, "results.md")); err != nil || !strings.Contains(string(md), "Report written by `report only`") {
		t.Fatalf("report: %v\n%s", err, md)
	}

	// A changed arm config is refused rather than mixed with old results.
	data, _ := os.ReadFile("smoke.yaml")
	changed, err := ParseSpec([]byte(strings.Replace(string(data), "bits: 8", "bits: 12", 1)), "smoke.yaml")
	if err != nil {
		t.Fatal(err)
	}
	err = Run(context.Background(), changed, Options{Dir: out, Exe: cdeRun, Log: zerolog.Nop()})
	if err == nil || !strings.Contains(err.Error(), "changed since this run was made") {
		t.Fatalf("a changed arm config was not refused: %v", err)
	}
}

// TestConfigErrors checks that bench file errors name the key.
func TestConfigErrors(t *testing.T) {
	tmp := t.TempDir()
	base := "base: {task: {name: arith, levels: [1]}, model: {checkpoint: \"\"}}\nseeds: [1]\n"
	arms := "arms: [{name: a}, {name: b, config: {algorithm: {name: ppo}}}]\n"
	cases := []struct{ name, yaml, want string }{
		{"unknown top key", base + arms + "armz: []\n", "bad.yaml: armz: unknown key"},
		{"unknown arm key", base + "arms: [{name: a, confg: {}}]\n", "bad.yaml: arms[0].confg: unknown key (known keys here: config, name)"},
		{"bad arm name", base + "arms: [{name: \"a/b\"}]\n", "arms[0].name"},
		{"arm name not a string", base + "arms: [{name: [a]}]\n", "arms[0].name: want a string"},
		{"arm not a mapping", base + "arms: [a]\n", "arms[0]: want a mapping"},
		{"arm config not a mapping", base + "arms: [{name: a, config: 3}]\n", "arms[0].config: want a mapping"},
		{"duplicate arm", base + "arms: [{name: a}, {name: a}]\n", "arms[1].name"},
		{"no arms", base, "arms: required"},
		{"bad config key in arm", base + "arms: [{name: a, config: {train: {stepz: 3}}}]\n", "train.stepz"},
		{"bad strategy key in arm", base + "arms: [{name: a, config: {strategies: [{name: ppl, kapa: 1}]}}]\n", "strategies[0].kapa"},
		{"bad base key", "base: {trian: {}}\nseeds: [1]\n" + arms, "trian"},
		{"no base", "seeds: [1]\n" + arms, "base: required"},
		{"description not a string", base + arms + "description: [x]\n", "description: want a string"},
		{"no seeds", "base: {}\n" + arms, "seeds"},
		{"bad seed", "base: {}\nseeds: [x]\n" + arms, "seeds[0]"},
		{"negative seed", "base: {}\nseeds: [1, -2]\n" + arms, "seeds[1]: want an integer >= 0"},
		{"fractional seed", "base: {}\nseeds: [1.5]\n" + arms, "seeds[0]: want an integer >= 0"},
		{"duplicate seed", "base: {}\nseeds: [1, 1]\n" + arms, "seeds[1]: seed 1 listed twice"},
		{"claim unknown arm", base + arms + "claims: [{name: c, better: a, than: z, metric: m}]\n", "claims[0].than"},
		{"claim unknown key", base + arms + "claims: [{name: c, better: a, than: b, metric: m, lower: true}]\n", "claims[0].lower"},
		{"claim missing metric", base + arms + "claims: [{name: c, better: a, than: b}]\n", "claims[0].metric"},
		{"claim with itself", base + arms + "claims: [{name: c, better: a, than: a, metric: m}]\n", "claims[0].than: compares arm \"a\" with itself"},
		{"claim bad lower_is_better", base + arms + "claims: [{name: c, better: a, than: b, metric: m, lower_is_better: 2}]\n", "claims[0].lower_is_better"},
		{"claims not a list", base + arms + "claims: {name: c}\n", "claims: want a list"},
		{"empty file", "", "empty file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(tmp, "bad.yaml")
			if err := os.WriteFile(file, []byte(c.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			spec, err := Load(file)
			if err == nil {
				err = spec.Validate(filepath.Join(tmp, "out"))
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v does not name %q", err, c.want)
			}
			if !strings.HasPrefix(err.Error(), "bench "+file+": ") {
				t.Errorf("error %v does not start with the bench file", err)
			}
		})
	}
	spec, err := ParseSpec([]byte(base+arms), "b.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := spec.Validate(tmp, "a", "c"); err == nil || !strings.Contains(err.Error(), "--only c: no such arm") {
		t.Errorf("unknown --only arm: %v", err)
	}
	if err := Run(context.Background(), spec, Options{Dir: tmp}); err == nil || !strings.Contains(err.Error(), "Exe") {
		t.Errorf("Run without Exe: %v", err)
	}
}

// TestParseSpec checks a well-formed file, a base config file relative to
// the bench file, and the arm-seed config layering.
func TestParseSpec(t *testing.T) {
	tmp := t.TempDir()
	if err := os.WriteFile(filepath.Join(tmp, "base.yaml"), []byte("task: {name: arith, levels: [2]}\nmodel: {checkpoint: \"\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err := ParseSpec([]byte(`description: d
base: base.yaml
seeds: [3, 1]
arms: [{name: a}, {name: b.2, config: {algorithm: {name: ppo}}}]
claims: [{name: c, better: b.2, than: a, metric: m, lower_is_better: true}]
`), filepath.Join(tmp, "x.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if spec.Stem != "x" || spec.Description != "d" || !slices.Equal(spec.Seeds, []uint64{3, 1}) || len(spec.Arms) != 2 ||
		len(spec.Claims) != 1 || !spec.Claims[0].LowerIsBetter || spec.Claims[0].Better != "b.2" {
		t.Fatalf("spec: %+v", spec)
	}
	cfg, err := spec.ArmConfig(tmp, spec.Arms[1], 3)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Seed != 3 || cfg.Algorithm["name"] != "ppo" || cfg.Pretrain.Dir != filepath.Join(tmp, "base") {
		t.Errorf("arm config: seed %d, algorithm %v, pretrain.dir %s", cfg.Seed, cfg.Algorithm, cfg.Pretrain.Dir)
	}
	if err := spec.Validate(tmp); err != nil {
		t.Fatal(err)
	}
}

// TestPresetsValidate checks that every preset in bench/ parses and that
// every arm-seed config is valid.
func TestPresetsValidate(t *testing.T) {
	files, _ := filepath.Glob("*.yaml")
	if len(files) < 2 {
		t.Fatalf("presets: %v", files)
	}
	for _, f := range files {
		spec, err := Load(f)
		if err == nil {
			err = spec.Validate(t.TempDir())
		}
		if err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestMeanStd(t *testing.T) {
	cases := []struct {
		xs        []float64
		mean, std float64
	}{
		{[]float64{1, 2, 3, 4}, 2.5, math.Sqrt(5.0 / 3)}, // squares 2.25+0.25+0.25+2.25 = 5, n-1 = 3
		{[]float64{0.2, 0.4}, 0.3, math.Sqrt(0.02)},      // (0.01+0.01)/1
		{[]float64{7}, 7, 0},
	}
	for _, c := range cases {
		m, s := meanStd(c.xs)
		if math.Abs(m-c.mean) > 1e-12 || math.Abs(s-c.std) > 1e-12 {
			t.Errorf("meanStd(%v) = %v, %v; want %v, %v", c.xs, m, s, c.mean, c.std)
		}
	}
	if m, s := meanStd(nil); !math.IsNaN(m) || !math.IsNaN(s) {
		t.Errorf("meanStd(nil) = %v, %v; want NaN", m, s)
	}
	if got := fmtPM([]float64{0.5}, 100, 1); got != "50.0 ± 0" {
		t.Errorf("fmtPM one seed = %q", got)
	}
	if got := fmtPM([]float64{0.2, 0.4}, 100, 1); got != "30.0 ± 14.1" {
		t.Errorf("fmtPM = %q", got)
	}
}

// levelTask is a task of another kind whose training problems are level 5.
type levelTask struct{ core.Task }

func (levelTask) SampleTrain(_ *rand.Rand, n int) []core.Problem {
	return slices.Repeat([]core.Problem{{Level: 5}}, n)
}

// TestTrainLevels checks the levels that label eval sets "held-out".
func TestTrainLevels(t *testing.T) {
	file := filepath.Join(t.TempDir(), "train.jsonl")
	if err := os.WriteFile(file, []byte(`{"prompt": "1+1=", "answer": "2", "level": 2}`+"\n"+`{"prompt": "2+2=", "answer": "4"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		task map[string]any
		want []int
	}{
		{map[string]any{"name": "arith"}, []int{1, 2}},
		{map[string]any{"name": "arith", "levels": []any{1, 3}}, []int{1, 3}},
		{map[string]any{"name": "jsonl", "path": file}, []int{0, 2}},
	} {
		task, err := tasks.New(core.NewParams("task", c.task))
		if err != nil {
			t.Fatal(err)
		}
		if got := slices.Sorted(maps.Keys(trainLevels(task))); !slices.Equal(got, c.want) {
			t.Errorf("%v: levels %v, want %v", c.task, got, c.want)
		}
	}
	if got := slices.Sorted(maps.Keys(trainLevels(levelTask{}))); !slices.Equal(got, []int{5}) {
		t.Errorf("another task: levels %v, want [5]", got)
	}
}

// TestBaseEval runs a base_eval bench: the base policy is evaluated once
// per seed (pseudo-arm "base") and equals the step-0 evaluation of an arm
// that evaluates at its start; arms with eval.at_start false skip it; the
// report has the base row, the pass@k curve table and verdicts.json, and
// claims may name the base.
func TestBaseEval(t *testing.T) {
	dir := t.TempDir()
	spec, err := ParseSpec([]byte(`
base_eval: true
base:
  seed: 1
  task: {name: arith, levels: [1], eval_n: 6, eval_sets: [{name: l1, level: 1}, {name: l2, level: 2}]}
  model: {layers: 1, d_model: 16, heads: 2, max_len: 48, checkpoint: auto}
  backend: {engine: go}
  rollout: {n: 4, max_response_tokens: 12}
  train: {steps: 2, prompts_per_step: 2, checkpoint_every: 2}
  eval: {every: 0, k: 4, at_start: false}
  pretrain: {seed: 1, steps: 4, batch_size: 8, eval_every: 4, eval_k: 1, eval_max_problems: 4}
seeds: [1, 2]
arms:
  - {name: grpo, config: {algorithm: {name: grpo}}}
  - {name: grpo_start, config: {algorithm: {name: grpo}, eval: {at_start: true}}}
claims:
  - {name: "training beats the base", better: grpo, than: base, metric: val/mean/pass@4}
`), "base.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var log syncBuffer
	if err := Run(context.Background(), spec, Options{Dir: dir, Exe: cdeRun, Output: &log, Log: zerolog.New(&log)}); err != nil {
		t.Fatalf("bench: %v\n%s", err, log.String())
	}
	// The warm start was announced, once (pretrain.seed makes one base).
	if n := strings.Count(log.String(), "is neither made nor shipped: making it first with the supervised warm start, at most pretrain.steps = 4 steps of 8 problems"); n != 1 {
		t.Errorf("the warm start was announced %d times:\n%s", n, log.String())
	}
	for _, seed := range []uint64{1, 2} {
		base, err := readMetricRows(filepath.Join(RunDir(dir, BaseArm, seed), "metrics.jsonl"))
		if err != nil || len(base) != 1 || base[0]["step"] != 0 {
			t.Fatalf("seed %d base rows %v: %v", seed, base, err)
		}
		for _, k := range []string{"val/mean/pass@1", "val/mean/pass@2", "val/mean/pass@4", "val/l1/avg@4", "val/l2/pass@2"} {
			if _, ok := base[0][k]; !ok {
				t.Errorf("seed %d base lacks %s: %v", seed, k, base[0])
			}
		}
		if _, err := trainer.ReadEvalDetail(trainer.EvalDetailPath(RunDir(dir, BaseArm, seed), "l2", 0)); err != nil {
			t.Error(err)
		}
		// The arm that evaluates at its start saw exactly the base's
		// numbers: same policy, same eval draws.
		start, err := readMetricRows(filepath.Join(RunDir(dir, "grpo_start", seed), "metrics.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range base[0] {
			if start[0][k] != v {
				t.Errorf("seed %d %s: base %v, grpo_start step 0 %v", seed, k, v, start[0][k])
			}
		}
		rows, _ := readMetricRows(filepath.Join(RunDir(dir, "grpo", seed), "metrics.jsonl"))
		if _, ok := rows[0]["val/mean/pass@4"]; ok || rows[0]["step"] != 0 {
			t.Errorf("seed %d: arm grpo evaluated at its start: %v", seed, rows[0])
		}
		if _, err := trainer.ReadEvalDetail(trainer.EvalDetailPath(RunDir(dir, "grpo", seed), "l1", 2)); err != nil {
			t.Errorf("final eval details: %v", err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, "results.md"))
	for _, want := range []string{"| base | 2 |", "## pass@k curves", "| arm | pass@1 | pass@2 | pass@4 |", "| training beats the base | val/mean/pass@4 | grpo | base | 2 | seeds x problems (crossed) |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("results.md lacks %q:\n%s", want, md)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, VerdictsFile)); err != nil {
		t.Error(err)
	}
	// An arm from another base cannot share one base evaluation.
	bad := *spec
	bad.Arms = append(slices.Clone(spec.Arms), Arm{Name: "other", Overlay: []byte("pretrain: {seed: 2}\n")})
	if err := bad.Validate(dir); err == nil || !strings.Contains(err.Error(), "arm other has another base policy") {
		t.Errorf("another base: %v", err)
	}
	if _, err := ParseSpec([]byte("base_eval: true\nbase: {seed: 1}\nseeds: [1]\narms: [{name: base}]\n"), "b.yaml"); err == nil || !strings.Contains(err.Error(), "base_eval") {
		t.Errorf("an arm named base: %v", err)
	}
}
