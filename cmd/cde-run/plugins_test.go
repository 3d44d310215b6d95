package main

import (
	"context"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/plugins"
	"github.com/cde-rl/cde/session"
	"github.com/cde-rl/cde/trainer"
)

var (
	pluginBinsOnce sync.Once
	pluginBinsErr  error
	pluginBins     = map[string]string{}
)

// buildPlugins builds the example and the test plugin once.
func buildPlugins(t *testing.T) (example, test string) {
	t.Helper()
	pluginBinsOnce.Do(func() {
		dir := filepath.Dir(cdeRun)
		for name, pkg := range map[string]string{"answercount": "../../plugins/examples/answercount/cmd/answercount",
			"testplugin": "../../plugins/internal/testplugin"} {
			out := filepath.Join(dir, name)
			if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
				pluginBinsErr = &buildError{pkg, err, string(b)}
				return
			}
			pluginBins[name] = out
		}
	})
	if pluginBinsErr != nil {
		t.Fatal(pluginBinsErr)
	}
	return pluginBins["answercount"], pluginBins["testplugin"]
}

type buildError struct {
	pkg    string
	err    error
	output string
}

func (e *buildError) Error() string {
	return "building " + e.pkg + ": " + e.err.Error() + "\n" + e.output
}

// captureStdout runs f with os.Stdout redirected and returns what it printed.
func captureStdout(t *testing.T, f func() int) (string, int) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() { b, _ := io.ReadAll(r); done <- string(b) }()
	code := f()
	os.Stdout = old
	w.Close()
	return <-done, code
}

func TestPluginsCheck(t *testing.T) {
	example, test := buildPlugins(t)
	out, code := captureStdout(t, func() int { return cmdPlugins([]string{"check", example, "--params", "{beta: 0.5, history: true}"}) })
	if code != 0 || !strings.Contains(out, "PASS:") || !strings.Contains(out, "hooks reward_bonus,observe,state") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if !strings.Contains(out, "  protocol version 3, transport ") || !strings.Contains(out, "signals sent: logprobs, correct; withheld, as not declared: entropies, values, embedding") {
		t.Errorf("the check does not say which protocol version, transport and signals it used:\n%s", out)
	}
	// A plugin that reads the verdicts declares Correct, and the check shows
	// it (it showed Correct:false: the protocol did not carry it).
	out, code = captureStdout(t, func() int {
		return cmdPlugins([]string{"check", example, "--params", "{beta: 0.5, only_correct: true}"})
	})
	if code != 0 || !strings.Contains(out, "Correct:true") {
		t.Fatalf("only_correct: exit %d, want 0 and Correct:true in the needs:\n%s", code, out)
	}
	out, code = captureStdout(t, func() int { return cmdPlugins([]string{"check", test, "--params", "{mode: nan}"}) })
	if code != 1 || !strings.Contains(out, "FAIL: ") || !strings.Contains(out, "non-finite bonus NaN") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	out, code = captureStdout(t, func() int { return cmdPlugins([]string{"check", filepath.Join(t.TempDir(), "missing")}) })
	if code != 1 || !strings.Contains(out, "binary not found") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if _, code := captureStdout(t, func() int { return cmdPlugins([]string{"--help"}) }); code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
}

func TestPluginEntryKeys(t *testing.T) {
	example, _ := buildPlugins(t)
	algo, err := session.BuildAlgorithm(&trainer.Config{Algorithm: map[string]any{"name": "grpo"}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		entry map[string]any
		want  string
	}{
		{map[string]any{"plugin": example, "bogus": 1}, "strategies[2].bogus: unknown key"},
		{map[string]any{"plugin": example, "call_timeout": "soon"}, "strategies[2].call_timeout: want a duration"},
		{map[string]any{"plugin": example, "start_timeout": -1}, "strategies[2].start_timeout: must be > 0"},
		{map[string]any{"plugin": example, "params": map[string]any{"beta": -1}}, "strategies[2].params.beta: must be > 0"},
		{map[string]any{"plugin": example, "params": map[string]any{"betta": 1}}, "strategies[2].params.betta: unknown key"},
		{map[string]any{"plugin": example, "sha256": strings.Repeat("0", 64)}, "sha256 mismatch"},
		{map[string]any{"plugin": example, "weight": map[string]any{"schedule": "exponential"}}, "strategies[2].weight.schedule: unknown value"},
		{map[string]any{"plugin": example, "weight": map[string]any{"w1": 1}}, "strategies[2].weight.w1: unknown key"},
		{map[string]any{"plugin": example, "weight": 0.5}, "strategies[2].weight: want a mapping"},
	}
	for _, c := range cases {
		_, _, err := session.PluginStrategy(c.entry, 2, algo, zerolog.Nop())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.entry, err, c.want)
		}
	}
	s, _, err := session.PluginStrategy(map[string]any{"plugin": example, "params": map[string]any{"beta": 0.25}, "call_timeout": "5s"}, 0, algo, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	core.HooksOf(s).Close()
}

// pluginBase is the tiny run of the plugin tests (the defaults of
// docs/config.md otherwise): random initial weights, one layer, no periodic
// eval.
const pluginBase = `
seed: 5
task: {name: arith, levels: [1], eval_n: 8}
model: {layers: 1, d_model: 16, heads: 2, max_len: 48, checkpoint: ""}
backend: {engine: go}
rollout: {n: 4, max_response_tokens: 12}
eval: {every: 0, k: 2}
`

// trainWithPlugin runs the tiny config with the plugin strategy built from
// entry, in-process through the trainer, and returns the run directory and
// Run's error.
func trainWithPlugin(t *testing.T, extra string, entry map[string]any) (string, error) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, file, pluginBase+extra)
	cfg, err := trainer.LoadConfig(trainer.LoadOptions{File: file, Env: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	log := zerolog.New(io.Discard)
	s, err := session.New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	ps, w, err := session.PluginStrategy(entry, 0, s.Algo, log)
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	s.Strategies = append(s.Strategies, ps)
	s.Trainer.Strategies = s.Strategies
	s.Trainer.Weights = append(s.Trainer.Weights, w)
	defer s.Close()
	s.Trainer.RunDir = t.TempDir()
	return s.Trainer.RunDir, s.Trainer.Run(context.Background(), 0)
}

// TestTrainCrashKeepsCheckpoint: a plugin crashing at step 2 stops the run
// with an error naming it, and the checkpoint of step 2 stays intact.
func TestTrainCrashKeepsCheckpoint(t *testing.T) {
	_, test := buildPlugins(t)
	dir, err := trainWithPlugin(t, "train: {steps: 4, prompts_per_step: 4, checkpoint_every: 1}\n",
		map[string]any{"plugin": test, "params": map[string]any{"mode": "crash", "at_step": 2}})
	if err == nil || !strings.Contains(err.Error(), "plugin testplugin ("+test+")") || !strings.Contains(err.Error(), "process died") {
		t.Fatalf("error %v", err)
	}
	latest, err := trainer.LatestCheckpoint(dir)
	if err != nil || filepath.Base(latest) != "step-000002" {
		t.Fatalf("latest checkpoint %q (%v)", latest, err)
	}
	if _, err := os.Stat(filepath.Join(latest, "policy.gob")); err != nil {
		t.Fatal(err)
	}
}

const outsideMain = `// A plugin written outside the cde repository, with the SDK's public API only.
package main

import (
	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/plugins/sdk"
)

// Brevity rewards short responses: bonus = scale / (1 + T).
type Brevity struct{ Scale float64 }

func (b *Brevity) Name() string      { return "brevity" }
func (b *Brevity) Needs() core.Needs { return core.Needs{} }

func (b *Brevity) RewardBonus(info core.StepInfo, r *core.Rollout) ([]float64, error) {
	out := make([]float64, len(r.Seqs))
	for i := range r.Seqs {
		out[i] = b.Scale / float64(1+r.Seqs[i].Len())
	}
	return out, nil
}

func (b *Brevity) Observe(info core.StepInfo, r *core.Rollout) (map[string]float64, error) {
	return map[string]float64{"scale": b.Scale}, nil
}

func New(p *core.Params, _ core.Algorithm) (core.Strategy, error) {
	b := &Brevity{Scale: p.Float("scale", 1)}
	p.Check(b.Scale > 0, "scale", "must be > 0")
	return b, p.Err()
}

func main() { sdk.Serve(New) }
`

// TestOutsideModule builds a plugin as its own Go module in a temp dir
// (require + replace to this repository, no network) and trains with it.
func TestOutsideModule(t *testing.T) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	dir := t.TempDir()
	// The outside module lists every requirement of cde's own go.mod, as
	// `go mod tidy` would write it. With the full list the go command loads
	// the module graph lazily and needs only modules that cde's build
	// already downloaded; with a bare require of cde it would walk the
	// unpruned graphs of pre-1.17 dependencies (fatih/color asks for
	// go.mod files no build of cde fetches) and fail on an empty cache.
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	reqs := string(mod)
	i := strings.Index(reqs, "\nrequire")
	if i < 0 {
		t.Fatal("no require block in go.mod")
	}
	writeFile(t, filepath.Join(dir, "go.mod"), "module example.com/brevity\n\ngo 1.26.5\n\n"+
		"require github.com/cde-rl/cde v0.0.0\n\nreplace github.com/cde-rl/cde => "+root+"\n"+reqs[i:])
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "go.sum"), string(sum))
	writeFile(t, filepath.Join(dir, "main.go"), outsideMain)
	bin := filepath.Join(dir, "brevity")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly -buildvcs=false", "GOPROXY=off", "GOSUMDB=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build of the outside module: %v\n%s", err, out)
	}
	run, err := trainWithPlugin(t, "train: {steps: 3, prompts_per_step: 4}\n",
		map[string]any{"plugin": bin, "params": map[string]any{"scale": 0.5}, "sha256": mustSum(t, bin),
			"weight": map[string]any{"schedule": "linear", "w0": 2, "w_end": 0}})
	if err != nil {
		t.Fatal(err)
	}
	rows := readMetrics(t, filepath.Join(run, "metrics.jsonl"))
	seen := 0
	for _, row := range rows {
		if v, ok := row["explore/brevity/bonus_mean"].(float64); ok {
			// w_t = 2 - 2 step/3 over the 3 steps; the plugin's bonus is in
			// (0, 0.5], the trainer multiplies it by w_t.
			step, _ := row["step"].(float64)
			w := 2 - 2*step/3
			if got, _ := row["explore/brevity/weight"].(float64); math.Abs(got-w) > 1e-12 {
				t.Errorf("step %v: explore/brevity/weight = %v, want %v", step, row["explore/brevity/weight"], w)
			}
			if v <= 0 || v > 0.5*w+1e-12 {
				t.Errorf("step %v: bonus_mean %v out of (0, 0.5 w_t = %v]", step, v, 0.5*w)
			}
			// The plugin's Observe key "scale" lands under explore/brevity/.
			if row["explore/brevity/scale"] != 0.5 || row["scale"] != nil {
				t.Errorf("step %v: explore/brevity/scale = %v, scale = %v", step, row["explore/brevity/scale"], row["scale"])
			}
			seen++
		}
	}
	if seen != 3 {
		t.Fatalf("explore/brevity/bonus_mean in %d of %d rows, want 3:\n%v", seen, len(rows), rows)
	}
}

func mustSum(t *testing.T, path string) string {
	t.Helper()
	sum, err := plugins.FileSHA256(path)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// TestTrainWithPluginConfigEntry trains through the CLI with the example
// plugin named in the config, exactly as a user would, next to an in-tree
// strategy.
func TestTrainWithPluginConfigEntry(t *testing.T) {
	example, _ := buildPlugins(t)
	tmp := t.TempDir()
	cfg := filepath.Join(tmp, "cfg.yaml")
	writeFile(t, cfg, tinyBase+"train: {steps: 3, prompts_per_step: 4}\nstrategies:\n  - {name: ppl}\n  - {plugin: "+example+", params: {}}\n")
	runDir := filepath.Join(tmp, "run")
	run(t, "train", "--config", cfg, "--run-dir", runDir)
	rows := readMetrics(t, filepath.Join(runDir, "metrics.jsonl"))
	if len(rows) != 4 {
		t.Fatalf("%d metric lines, want 4", len(rows))
	}
	for _, row := range rows[:3] {
		found := false
		for k := range row {
			if strings.HasPrefix(k, "explore/answercount") {
				found = true
			}
		}
		if !found || row["explore/ppl/bonus_mean"] == nil {
			t.Fatalf("step %v: plugin or ppl metrics missing: %v", row["step"], row)
		}
	}
	// The plugin process is gone after the run.
	out, _ := exec.Command("pgrep", "-f", example).Output()
	if len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("plugin process still running: %s", out)
	}
}

// TestTrainWithNodePlugin trains with the JavaScript example plugin
// (plugins/examples/node-lenbonus): cde-run starts plugin.js with node
// like any plugin executable. It may skip only outside CI, when node or
// the plugin's node_modules (npm ci) is missing.
func TestTrainWithNodePlugin(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", "..", "plugins", "examples", "node-lenbonus"))
	if err != nil {
		t.Fatal(err)
	}
	needNodeModules(t, dir, "@grpc/grpc-js")
	run, err := trainWithPlugin(t, "train: {steps: 3, prompts_per_step: 4}\n", map[string]any{
		"plugin": filepath.Join(dir, "plugin.js"), "params": map[string]any{"scale": 0.5}, "start_timeout": "30s"})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, row := range readMetrics(t, filepath.Join(run, "metrics.jsonl")) {
		v, ok := row["explore/lenbonus/bonus_mean"].(float64)
		if !ok {
			continue
		}
		step, _ := row["step"].(float64)
		// bonus 0.5 / (1 + T) for T >= 1 response tokens: in (0, 0.25].
		if v <= 0 || v > 0.25 {
			t.Errorf("step %v: bonus_mean %v out of (0, 0.25]", step, v)
		}
		// Observe counts batches: step s is the (s+1)-th.
		if row["explore/lenbonus/batches"] != step+1 {
			t.Errorf("step %v: explore/lenbonus/batches = %v, want %v", step, row["explore/lenbonus/batches"], step+1)
		}
		if l, _ := row["explore/lenbonus/mean_length"].(float64); l < 1 {
			t.Errorf("step %v: explore/lenbonus/mean_length = %v", step, row["explore/lenbonus/mean_length"])
		}
		seen++
	}
	if seen != 3 {
		t.Fatalf("explore/lenbonus/bonus_mean in %d rows, want 3", seen)
	}
}
