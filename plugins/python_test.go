package plugins_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/core/strategytest"
	"github.com/cde-rl/cde/internal/testwait"
	"github.com/cde-rl/cde/plugins"
	"github.com/cde-rl/cde/plugins/examples/answercount"
	"github.com/cde-rl/cde/plugins/skeleton"
	"github.com/cde-rl/cde/strategies/ppl"
)

// PythonInterpreter is the first of python3 on PATH and /usr/bin/python3
// that imports grpc, google.protobuf and numpy ("" for none).
func PythonInterpreter() string { return skeleton.PythonWithDeps() }

// pythonScript copies the Python plugin at src into a temporary directory
// with its shebang naming an interpreter that has the SDK's dependencies,
// executable, and puts the repository's SDK (python/) on PYTHONPATH. The
// Python tests may skip only outside CI.
func pythonScript(t *testing.T, src string) string {
	t.Helper()
	py := PythonInterpreter()
	if py == "" {
		why := "no python3 with grpc, google.protobuf and numpy (Debian: apt-get install python3-grpcio python3-protobuf python3-numpy)"
		if os.Getenv("CI") != "" {
			t.Fatalf("%s; CI is set, so this test must run", why)
		}
		t.Skipf("skipping: %s (CI is unset)", why)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if strings.HasPrefix(text, "#!") {
		text = text[strings.IndexByte(text, '\n')+1:]
	}
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.WriteFile(dst, []byte("#!"+py+"\n"+text), 0o755); err != nil {
		t.Fatal(err)
	}
	sdk, err := filepath.Abs(filepath.Join("..", "python"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PYTHONPATH", sdk)
	return dst
}

var pyTestPlugin = filepath.Join("testdata", "python", "testplugin.py")

func openPython(t *testing.T, path string, params map[string]any, mod func(*plugins.Config)) (core.Strategy, error) {
	t.Helper()
	cfg := plugins.Config{Path: path, Params: params, ParamsPath: "strategies[0].params",
		CallTimeout: testwait.Scale(10 * time.Second), StartTimeout: testwait.Scale(20 * time.Second), Log: zerolog.Nop()}
	if mod != nil {
		mod(&cfg)
	}
	s, err := plugins.Open(cfg)
	if err == nil {
		t.Cleanup(func() { core.HooksOf(s).Close() })
	}
	return s, err
}

// The conformance kit (Needs, Hooks, Undeclared, Determinism, State) on a
// Python plugin with every hook, over either transport.
func TestPythonConformance(t *testing.T) {
	path := pythonScript(t, pyTestPlugin)
	for _, tr := range transports {
		t.Run(tr.want, func(t *testing.T) {
			strategytest.Run(t, func() core.Strategy {
				s, err := openPython(t, path, map[string]any{"mode": "ok"}, func(c *plugins.Config) { c.Transport = tr.config })
				if err != nil {
					t.Fatal(err)
				}
				wantTransport(t, s, tr.config)
				return s
			}, strategytest.Options{})
		})
	}
	s, err := openPython(t, path, map[string]any{"mode": "ok"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := plugins.Of(s)
	if s.Name() != "pytest" || p.Hooks() != "reward_bonus,advantage_bonus,loss_terms,observe,state,token_loss" ||
		!s.Needs().Entropies || !s.Needs().LogProbs {
		t.Fatalf("name %q, hooks %q, needs %+v", s.Name(), p.Hooks(), s.Needs())
	}
}

// The numbers a Python hook returns arrive exactly, and the batch it reads
// is the rollout: the test plugin's bonus 0.01 T_i + 0.001 b (b batches
// observed) and its token-loss weights, recomputed here.
func TestPythonHookValues(t *testing.T) {
	path := pythonScript(t, pyTestPlugin)
	s, err := openPython(t, path, map[string]any{"mode": "ok"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	info, r := randomRollout(5)
	obs, err := core.HooksOf(s).Observe(info, r)
	if err != nil {
		t.Fatal(err)
	}
	var sum, n float64
	for _, sq := range r.Seqs {
		for _, e := range sq.Entropies {
			sum += e
			n++
		}
	}
	if obs["explore/pytest/batches"] != 1 || !near(obs["explore/pytest/mean_entropy"], sum/n) {
		t.Fatalf("observe %v, want batches 1 and mean entropy %v", obs, sum/n)
	}
	bonus, err := core.HooksOf(s).RewardBonus(info, r)
	if err != nil {
		t.Fatal(err)
	}
	for i, sq := range r.Seqs {
		if want := 0.01*float64(sq.Len()) + 0.001; bonus[i] != want {
			t.Fatalf("bonus[%d] = %v, want %v", i, bonus[i], want)
		}
	}
	tl, err := core.HooksOf(s).TokenLoss(info, r)
	if err != nil {
		t.Fatal(err)
	}
	for i, sq := range r.Seqs {
		for j := range sq.Len() {
			if want := 1 + 0.1*float64(j%2); tl.PGWeight[i][j] != want {
				t.Fatalf("pg_weight[%d][%d] = %v, want %v", i, j, tl.PGWeight[i][j], want)
			}
		}
	}
}

func near(a, b float64) bool { return a-b < 1e-12 && b-a < 1e-12 }

// Every failure of a Python plugin is an error naming the plugin and what
// went wrong, as for a Go one, and leaves no process behind.
func TestPythonFailures(t *testing.T) {
	path := pythonScript(t, pyTestPlugin)
	plugin := "plugin pytest (" + path + ")"
	for _, c := range []struct {
		mode, hook string
		parts      []string
	}{
		{"crash", "reward", []string{"RewardBonus", "the plugin process died", "exit status 3", "crashing on purpose"}},
		{"hang", "reward", []string{"RewardBonus", "no answer within 1.5s (call_timeout)", "killed"}},
		{"short", "reward", nil}, // the batch's size, below
		// The strategy's own errors: "plugin NAME (PATH): hook: message",
		// the hook named once (as the SDK names it), no gRPC wording.
		{"nan", "reward", []string{"): reward_bonus: entry 0 is nan, not finite"}},
		{"inf", "reward", []string{"): reward_bonus: entry 0 is inf, not finite"}},
		{"advlen", "advantage", []string{"): advantage_bonus[0]: want"}},
		{"error", "reward", []string{"): reward_bonus: RuntimeError: pytest: failing on purpose"}},
		{"badtype", "reward", []string{"): reward_bonus: want floats, got str"}},
		// A signal the needs do not declare is named, with the flag.
		{"undeclared", "reward", []string{"): reward_bonus: batch.values was not sent: the strategy's needs do not declare it",
			"set needs = cde_plugin.Needs(value_heads=K)"}},
	} {
		t.Run(c.mode, func(t *testing.T) {
			s, err := openPython(t, path, map[string]any{"mode": c.mode, "at_step": 1}, func(cfg *plugins.Config) {
				cfg.CallTimeout = 1500 * time.Millisecond
			})
			if err != nil {
				t.Fatal(err)
			}
			p, _ := plugins.Of(s)
			pid := p.Pid()
			info, r := randomRollout(2)
			call := func(step int) error {
				info.Step = step
				var err error
				if c.hook == "advantage" {
					_, err = core.HooksOf(s).AdvantageBonus(info, r)
				} else {
					_, err = core.HooksOf(s).RewardBonus(info, r)
				}
				return err
			}
			if err := call(0); err != nil {
				t.Fatal(err)
			}
			err = call(1)
			parts := c.parts
			if c.mode == "short" {
				parts = []string{"): reward_bonus: want " + strconv.Itoa(len(r.Seqs)) + " floats (one per sequence), got " + strconv.Itoa(len(r.Seqs)-1)}
			}
			wantErr(t, err, append([]string{plugin}, parts...)...)
			if c.mode == "crash" || c.mode == "hang" {
				waitGone(t, pid)
			} else if msg := err.Error(); strings.Contains(msg, "rpc error") || strings.Contains(msg, "RewardBonus") || strings.Contains(msg, "AdvantageBonus") {
				t.Fatalf("error %q: want the hook named once, without gRPC's wording", msg)
			}
		})
	}
}

// Start-up mistakes of a Python plugin are clear errors: a bad or unknown
// param names strategies[0].params.KEY, printing on stdout before serving
// is named, and run by hand the script says it is a plugin.
func TestPythonStartFailures(t *testing.T) {
	path := pythonScript(t, pyTestPlugin)
	_, err := openPython(t, path, map[string]any{"mode": "sideways"}, nil)
	wantErr(t, err, "config: strategies[0].params.mode: want one of ok, crash", "(plugin "+path+")")
	_, err = openPython(t, path, map[string]any{"mode": "ok", "bogus": 1}, nil)
	wantErr(t, err, "config: strategies[0].params.bogus: unknown key (known keys here: at_step, correct, min_group, min_group_key, mode)")
	t.Setenv("CDE_PYTEST_STDOUT", "1")
	_, err = openPython(t, path, nil, nil)
	wantErr(t, err, path, `printed "hello from the plugin" on stdout before the handshake; `+
		"print to stderr (print(..., file=sys.stderr)) or log with the logging module before cde_plugin.serve")
	if strings.Contains(err.Error(), "sdk.Logger") {
		t.Fatalf("error %q: advice for a Go plugin given to a Python one", err)
	}
	os.Unsetenv("CDE_PYTEST_STDOUT")
	out, err := exec.Command(path).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "This program is a cde strategy plugin: cde-run starts it") {
		t.Fatalf("run by hand: %v\n%s", err, out)
	}
}

// Killing the host (kill -9) or Ctrl-C leaves no Python plugin process.
func TestPythonNoOrphans(t *testing.T) {
	path := pythonScript(t, pyTestPlugin)
	t.Setenv(hostHelperParamsEnv, `{"mode": "ok"}`)
	noOrphans(t, path)
}

// The Python examples give the Go strategies' numbers bit for bit: the
// numpy perplexity bonus against the in-tree ppl, and the answer-count
// port against the Go example, over several steps (history included),
// over either transport.
func TestPythonExamplesMatchGo(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.want, func(t *testing.T) { pythonExamplesMatchGo(t, tr.config) })
	}
}

func pythonExamplesMatchGo(t *testing.T, transport string) {
	viaTransport := func(c *plugins.Config) { c.Transport = transport }
	pplPath := pythonScript(t, filepath.Join("examples", "python-ppl", "ppl.py"))
	py, err := openPython(t, pplPath, map[string]any{"kappa": 2.5, "alpha": 0.7}, viaTransport)
	if err == nil {
		wantTransport(t, py, transport)
	}
	if err != nil {
		t.Fatal(err)
	}
	goPPL, err := ppl.New(core.NewParams("", map[string]any{"kappa": 2.5, "alpha": 0.7}), nil)
	if err != nil {
		t.Fatal(err)
	}
	for seed := uint64(1); seed <= 5; seed++ {
		info, r := randomRollout(seed)
		want, _ := core.HooksOf(goPPL).RewardBonus(info, r)
		got, err := core.HooksOf(py).RewardBonus(info, r)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("seed %d: ppl bonus[%d] = %v (Python), %v (Go)", seed, i, got[i], want[i])
			}
		}
		gm, _ := core.HooksOf(goPPL).Observe(info, r)
		pm, err := core.HooksOf(py).Observe(info, r)
		if err != nil || pm["explore/ppl/clip_frac"] != gm["explore/ppl/clip_frac"] {
			t.Fatalf("seed %d: clip_frac %v (Python, %v), %v (Go)", seed, pm["explore/ppl/clip_frac"], err, gm["explore/ppl/clip_frac"])
		}
	}

	acPath := pythonScript(t, filepath.Join("examples", "python-answercount", "answercount.py"))
	params := map[string]any{"beta": 0.8, "history": true, "no_answer_bonus": 0.05}
	pyAC, err := openPython(t, acPath, params, viaTransport)
	if err != nil {
		t.Fatal(err)
	}
	goAC, err := answercount.New(core.NewParams("", params), nil)
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"Answer: 1,000.", "so Answer: 1000", "Answer: $1000$\nmore", "no answer", "Answer: \\boxed{7}",
		"Answer: 7.0", "Answer:  -0.50 ", "Answer: -.5", "Answer: 1,00", "Answer: x\u00a0y", "Answer: 12\u2003", "Answer: 3 Answer: 4"}
	for step := range 3 {
		info, r := randomRollout(uint64(10 + step))
		info.Step = step
		for i := range r.Seqs {
			r.Seqs[i].Text = texts[(i*5+step)%len(texts)]
			r.Seqs[i].ProblemID = "p" + strconv.Itoa(r.Seqs[i].Group%2)
		}
		want, _ := core.HooksOf(goAC).RewardBonus(info, r)
		got, err := core.HooksOf(pyAC).RewardBonus(info, r)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("step %d: answercount bonus[%d] = %v (Python), %v (Go); text %q", step, i, got[i], want[i], r.Seqs[i].Text)
			}
		}
		gm, _ := core.HooksOf(goAC).Observe(info, r)
		pm, err := core.HooksOf(pyAC).Observe(info, r)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range gm {
			if !near(pm[k], v) {
				t.Fatalf("step %d: %s = %v (Python), %v (Go)", step, k, pm[k], v)
			}
		}
	}
	// The Python history loads into the Go strategy and gives the same next bonus.
	state, err := core.HooksOf(pyAC).SaveState()
	if err != nil {
		t.Fatal(err)
	}
	goAC2, _ := answercount.New(core.NewParams("", params), nil)
	if err := core.HooksOf(goAC2).LoadState(state); err != nil {
		t.Fatalf("Go loading the Python state %s: %v", state, err)
	}
	info, r := randomRollout(20)
	for i := range r.Seqs {
		r.Seqs[i].Text, r.Seqs[i].ProblemID = texts[i%len(texts)], "p"+strconv.Itoa(r.Seqs[i].Group%2)
	}
	a, _ := core.HooksOf(goAC).RewardBonus(info, r)
	b, _ := core.HooksOf(goAC2).RewardBonus(info, r)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("after loading the Python state: bonus[%d] %v, want %v", i, b[i], a[i])
		}
	}
}

// constBonus is the in-tree twin of the Python test plugin's advantage
// hook (0.001 * reward on every token), the reference its overhead is
// measured against.
type constBonus struct{}

func (constBonus) Name() string      { return "constbonus" }
func (constBonus) Needs() core.Needs { return core.Needs{LogProbs: true, Entropies: true} }
func (constBonus) AdvantageBonus(_ core.StepInfo, r *core.Rollout) ([][]float64, error) {
	_, out := r.TokenRows(1) // one column, as testplugin's ok mode
	for i := range out {
		for t := range out[i] {
			out[i][t] = 0.001 * r.Seqs[i].Reward
		}
	}
	return out, nil
}

// lengthBonus is the in-tree twin of the Python test plugin's reward hook
// in its first step (0.01 * T_i): a reward hook whose own work is nil, so
// that a plugin's time over it is the transport's.
type lengthBonus struct{}

func (lengthBonus) Name() string      { return "lengthbonus" }
func (lengthBonus) Needs() core.Needs { return core.Needs{LogProbs: true, Entropies: true} }
func (lengthBonus) RewardBonus(_ core.StepInfo, r *core.Rollout) ([]float64, error) {
	out := make([]float64, len(r.Seqs))
	for i := range r.Seqs {
		out[i] = 0.01 * float64(r.Seqs[i].Len())
	}
	return out, nil
}

// BenchmarkPythonHookOverhead: one hook call for each of benchSizes
// (grpo, no value heads), a reward hook and an advantage hook, side by
// side: in-tree, the Go plugin and the Python plugin, the plugins over the
// messages and over shared memory. Reward: the in-tree ppl, testplugin
// serving ppl, and the numpy ppl example (whose per-sequence cumsum loop is
// work of its own); trivial-reward: lengthBonus in-tree, testplugin's ok
// mode (a zero bonus) and the Python test plugin's. Advantage: constBonus in-tree,
// testplugin's ok mode (a constant bonus), and the Python test plugin's
// (0.001 * reward per token). A plugin call includes encoding the batch,
// gRPC over the Unix socket with TLS, the plugin's side, the hook, and the
// answer back. Every call brings a fresh batch (loopFresh).
//
//	go test ./plugins -run '^$' -bench PythonHookOverhead -benchtime 3x -timeout 60m
func BenchmarkPythonHookOverhead(b *testing.B) {
	py := PythonInterpreter()
	if py == "" {
		b.Skip("no python3 with grpc, google.protobuf and numpy")
	}
	dir := b.TempDir()
	script := func(src string) string {
		text, err := os.ReadFile(src)
		if err != nil {
			b.Fatal(err)
		}
		s := string(text)
		s = s[strings.IndexByte(s, '\n')+1:]
		dst := filepath.Join(dir, filepath.Base(src))
		if err := os.WriteFile(dst, []byte("#!"+py+"\n"+s), 0o755); err != nil {
			b.Fatal(err)
		}
		return dst
	}
	sdk, _ := filepath.Abs(filepath.Join("..", "python"))
	b.Setenv("PYTHONPATH", sdk)
	pyPPL := script(filepath.Join("examples", "python-ppl", "ppl.py"))
	pyTest := script(pyTestPlugin)
	info := core.StepInfo{Step: 3, TotalSteps: 100, Algorithm: "grpo", Seed: 1}
	reward := func(s core.Strategy, info core.StepInfo, r *core.Rollout) error {
		_, err := core.HooksOf(s).RewardBonus(info, r)
		return err
	}
	advantage := func(s core.Strategy, info core.StepInfo, r *core.Rollout) error {
		_, err := core.HooksOf(s).AdvantageBonus(info, r)
		return err
	}
	inTree, err := ppl.New(core.NewParams("", map[string]any{}), nil)
	if err != nil {
		b.Fatal(err)
	}
	var arena *plugins.Arena
	plugin := func(path string, params map[string]any, transport string,
		hook func(core.Strategy, core.StepInfo, *core.Rollout) error, rs [2]*core.Rollout) func(b *testing.B) {
		return func(b *testing.B) {
			s, err := plugins.Open(plugins.Config{Path: path, Params: params, CallTimeout: 10 * time.Minute,
				StartTimeout: time.Minute, Transport: transport, Log: zerolog.Nop()})
			if err != nil {
				b.Fatal(err)
			}
			defer core.HooksOf(s).Close()
			useArena(s, arena)
			loopFresh(b, s, info, rs, hook)
		}
	}
	for _, sz := range benchSizes {
		var rs [2]*core.Rollout
		rs, arena = benchRollouts(b, sz.n, sz.t, 0)
		at := fmt.Sprintf("%dx%d/", sz.n, sz.t)
		b.Run(at+"reward/in-tree", func(b *testing.B) { loopFresh(b, inTree, info, rs, reward) })
		for _, m := range transportModes {
			b.Run(at+"reward/go-plugin/"+m.name, plugin(testPlugin, map[string]any{"strategy": "ppl"}, m.config, reward, rs))
			b.Run(at+"reward/python-plugin/"+m.name, plugin(pyPPL, nil, m.config, reward, rs))
		}
		b.Run(at+"trivial-reward/in-tree", func(b *testing.B) { loopFresh(b, lengthBonus{}, info, rs, reward) })
		for _, m := range transportModes {
			b.Run(at+"trivial-reward/go-plugin/"+m.name, plugin(testPlugin, map[string]any{"mode": "ok"}, m.config, reward, rs))
			b.Run(at+"trivial-reward/python-plugin/"+m.name, plugin(pyTest, map[string]any{"mode": "ok"}, m.config, reward, rs))
		}
		b.Run(at+"advantage/in-tree", func(b *testing.B) { loopFresh(b, constBonus{}, info, rs, advantage) })
		for _, m := range transportModes {
			b.Run(at+"advantage/go-plugin/"+m.name, plugin(testPlugin, map[string]any{"mode": "ok"}, m.config, advantage, rs))
			b.Run(at+"advantage/python-plugin/"+m.name, plugin(pyTest, map[string]any{"mode": "ok"}, m.config, advantage, rs))
		}
	}
}

// The SDK's own unit tests (python/tests): batches, params strictness and
// the checks of hook answers, on the Python side.
func TestPythonSDKUnit(t *testing.T) {
	py := PythonInterpreter()
	if py == "" {
		pythonScript(t, pyTestPlugin) // skips, or fails under CI
	}
	cmd := exec.Command(py, "-m", "unittest", "discover", "-s", "tests", "-v")
	cmd.Dir = filepath.Join("..", "python")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "\nOK") {
		t.Fatalf("python -m unittest: %v\n%s", err, out)
	}
}

// TestCheckSaysWhatWasSent: `plugins check` prints the protocol version
// and transport it used and which signals the host sends the plugin, and
// a check that fails because a hook read a signal it did not declare
// says so: the signal, the needs flag, and what was sent (the label read
// "all signals present", and the SDK's None gave "TypeError: 'NoneType'
// object is not iterable").
func TestCheckSaysWhatWasSent(t *testing.T) {
	path := pythonScript(t, pyTestPlugin)
	var out bytes.Buffer
	ok := plugins.Check(&out, plugins.Config{Path: path, Params: map[string]any{"mode": "undeclared", "at_step": 0},
		CallTimeout: testwait.Scale(10 * time.Second), StartTimeout: testwait.Scale(20 * time.Second), Log: zerolog.Nop()},
		strategytest.Options{Algorithm: "grpo", Steps: 1})
	if ok {
		t.Fatalf("the check passed:\n%s", out.String())
	}
	for _, want := range []string{
		"protocol version 3, transport ",
		"signals sent: logprobs, entropies, correct; withheld, as not declared: values, embedding",
		"(rollouts with every signal; sent to the plugin: logprobs, entropies, correct; withheld, as not declared: values, embedding)",
		"reward_bonus: batch.values was not sent: the strategy's needs do not declare it",
		"cde_plugin.Needs(value_heads=K)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "all signals present") || strings.Contains(out.String(), "NoneType") {
		t.Errorf("the output still says all signals were present, or quotes a NoneType error:\n%s", out.String())
	}
}
