package plugins_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/core/strategytest"
	"github.com/cde-rl/cde/internal/testwait"
	"github.com/cde-rl/cde/plugins"
)

func openTest(t *testing.T, params map[string]any, mod func(*plugins.Config)) (core.Strategy, error) {
	t.Helper()
	cfg := plugins.Config{Path: testPlugin, Params: params, ParamsPath: "strategies[0].params",
		CallTimeout: testwait.Scale(5 * time.Second), StartTimeout: testwait.Scale(plugins.DefaultStartTimeout), Log: zerolog.Nop()}
	if mod != nil {
		mod(&cfg)
	}
	s, err := plugins.Open(cfg)
	if err == nil {
		t.Cleanup(func() { core.HooksOf(s).Close() })
	}
	return s, err
}

func mustOpen(t *testing.T, params map[string]any, mod func(*plugins.Config)) (core.Strategy, *plugins.Plugin) {
	t.Helper()
	s, err := openTest(t, params, mod)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := plugins.Of(s)
	if !ok {
		t.Fatal("plugins.Of: not a plugin")
	}
	return s, p
}

func randomRollout(seed uint64) (core.StepInfo, *core.Rollout) {
	o := strategytest.Options{Seed: seed}
	r := strategytest.RandomRollout(newRand(seed), o)
	return core.StepInfo{Step: 1, TotalSteps: 10, Algorithm: "grpo", Seed: seed}, r
}

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q\ndoes not contain %q", err, p)
		}
	}
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("plugin process %d still running", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSubprocessConformance runs the conformance kit on in-tree strategies
// served by a real plugin process.
func TestSubprocessConformance(t *testing.T) {
	for _, tr := range transports {
		for _, name := range []string{"ppl", "simhash", "forking_tokens"} {
			t.Run(tr.want+"/"+name, func(t *testing.T) {
				strategytest.Run(t, func() core.Strategy {
					s, _ := mustOpen(t, map[string]any{"strategy": name}, func(c *plugins.Config) { c.Transport = tr.config })
					wantTransport(t, s, tr.config)
					return s
				}, strategytest.Options{})
			})
		}
	}
}

func TestExactHooks(t *testing.T) {
	s, p := mustOpen(t, map[string]any{"strategy": "ppl"}, nil)
	h := core.HooksOf(s)
	if h.RewardBonus == nil {
		t.Error("ppl plugin has no reward bonus")
	}
	if h.Observe == nil {
		t.Error("ppl plugin has no observe")
	}
	for name, ok := range map[string]bool{"AdvantageHook": core.HooksOf(s).AdvantageBonus != nil, "LossHook": core.HooksOf(s).LossTerms != nil,
		"HeadMasker": core.HooksOf(s).HeadMasks != nil, "Stateful": core.HooksOf(s).SaveState != nil} {
		if ok {
			t.Errorf("ppl plugin implements %s, which ppl does not", name)
		}
	}
	if s.Name() != "ppl" || p.Hooks() != "reward_bonus,observe" {
		t.Errorf("name %q hooks %q", s.Name(), p.Hooks())
	}
}

func TestCloseKillsProcess(t *testing.T) {
	s, p := mustOpen(t, map[string]any{"strategy": "ppl"}, nil)
	pid := p.Pid()
	if pid == 0 || !alive(pid) {
		t.Fatalf("pid %d not alive", pid)
	}
	core.HooksOf(s).Close()
	waitGone(t, pid)
	info, r := randomRollout(1)
	_, err := core.HooksOf(s).RewardBonus(info, r)
	wantErr(t, err, "after Close")
}

func TestConfigErrorNamesKey(t *testing.T) {
	_, err := openTest(t, map[string]any{"strategy": "ppl", "params": map[string]any{"kappa": -1}}, nil)
	wantErr(t, err, "strategies[0].params.params.kappa", "must be > 0")
	_, err = openTest(t, map[string]any{"mode": "ok", "bogus": 1}, nil)
	wantErr(t, err, "strategies[0].params.bogus", "unknown key")
}

// TestFailures: every failure gives an error naming the plugin and what
// went wrong, and leaves no process behind.
func TestFailures(t *testing.T) {
	cases := []struct {
		mode  string
		hook  string
		parts []string
	}{
		{"crash", "reward", []string{"RewardBonus", "the plugin process died", "exit status 3", "crashing on purpose"}},
		// A Go fault prints its cause above a long goroutine dump: the error
		// quotes the cause, not just the dump's last lines.
		{"fault", "reward", []string{"RewardBonus", "the plugin process died", "its stderr says: unexpected fault address",
			"fatal error: fault", "[signal SIGSEGV", "; its last stderr lines: "}},
		{"hang", "reward", []string{"RewardBonus", "no answer within 700ms (call_timeout)", "killed"}},
		{"short", "reward", []string{"RewardBonus returned invalid output", "bonuses for"}},
		{"nan", "reward", []string{"RewardBonus returned invalid output", "non-finite bonus NaN for sequence 0"}},
		{"inf", "reward", []string{"RewardBonus returned invalid output", "non-finite bonus +Inf"}},
		{"advlen", "advantage", []string{"AdvantageBonus returned invalid output", "sequence 0:"}},
		{"panic", "reward", []string{"): RewardBonus: panic: testplugin: panicking on purpose"}},
		{"error", "reward", []string{"): RewardBonus: testplugin: failing on purpose"}},
	}
	for _, c := range cases {
		t.Run(c.mode, func(t *testing.T) {
			t.Parallel()
			s, p := mustOpen(t, map[string]any{"mode": c.mode, "at_step": 1}, func(cfg *plugins.Config) {
				cfg.CallTimeout = 700 * time.Millisecond
			})
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
			if err := call(0); err != nil { // a good step first
				t.Fatal(err)
			}
			err := call(1)
			wantErr(t, err, append([]string{"plugin testplugin (" + testPlugin + ")"}, c.parts...)...)
			if n := len(err.Error()); n > 4000 {
				t.Errorf("the error has %d bytes, want at most 4000: %s", n, err)
			}
			if c.mode == "panic" || c.mode == "error" {
				if first, _, _ := strings.Cut(err.Error(), "\n"); strings.Contains(first, "rpc error") || strings.Count(first, "RewardBonus") != 1 {
					t.Fatalf("error %q: want the hook named once, without gRPC's wording", err)
				}
				return // the strategy's own error: the process is fine, Close kills it
			}
			waitGone(t, pid)
			wantErr(t, call(2), "unusable after an earlier failure")
		})
	}
}

func TestStartFailures(t *testing.T) {
	t.Run("missing", func(t *testing.T) {
		_, err := openTest(t, nil, func(c *plugins.Config) { c.Path = filepath.Join(t.TempDir(), "nope") })
		wantErr(t, err, "nope", "binary not found")
	})
	t.Run("not executable", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "plugin")
		os.WriteFile(path, []byte("#!/bin/sh\n"), 0o644)
		_, err := openTest(t, nil, func(c *plugins.Config) { c.Path = path })
		wantErr(t, err, path, "not executable (mode -rw-r--r--")
	})
	t.Run("not a plugin", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "plugin")
		os.WriteFile(path, []byte("#!/bin/sh\necho hello\n"), 0o755)
		_, err := openTest(t, nil, func(c *plugins.Config) { c.Path = path })
		wantErr(t, err, path, "failed to start", `printed "hello" on stdout before the handshake`)
	})
	t.Run("checksum mismatch", func(t *testing.T) {
		_, err := openTest(t, map[string]any{"strategy": "ppl"}, func(c *plugins.Config) { c.SHA256 = strings.Repeat("ab", 32) })
		wantErr(t, err, testPlugin, "sha256 mismatch", "refusing to start")
	})
	t.Run("checksum match", func(t *testing.T) {
		sum, err := plugins.FileSHA256(testPlugin)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := openTest(t, map[string]any{"strategy": "ppl"}, func(c *plugins.Config) { c.SHA256 = "sha256:" + sum }); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("protocol version", func(t *testing.T) {
		t.Setenv("CDE_TESTPLUGIN_VERSION", "4")
		_, err := openTest(t, map[string]any{"strategy": "ppl"}, nil)
		wantErr(t, err, testPlugin, "protocol version mismatch", "speaks strategy protocol versions 1 to 3", "Plugin version: 4")
	})
	t.Run("start timeout", func(t *testing.T) {
		t.Setenv("CDE_TESTPLUGIN_START_DELAY", "5s")
		start := time.Now()
		_, err := openTest(t, nil, func(c *plugins.Config) { c.StartTimeout = 300 * time.Millisecond })
		wantErr(t, err, testPlugin, "handshake within 300ms (start_timeout)")
		if time.Since(start) > 4*time.Second {
			t.Errorf("start timeout took %s", time.Since(start))
		}
	})
}

func TestLogsBridged(t *testing.T) {
	logs := &syncWriter{w: &bytes.Buffer{}}
	mustOpen(t, map[string]any{"mode": "ok"}, func(c *plugins.Config) { c.Log = zerolog.New(logs) })
	deadline := time.Now().Add(3 * time.Second)
	for !strings.Contains(logs.String(), "testplugin configured") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	out := logs.String()
	for _, want := range []string{`"message":"testplugin configured"`, `"plugin":"testplugin"`, `"mode":"ok"`, `"message":"plugin started"`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
}

const hostHelperEnv = "CDE_PLUGINS_TEST_HOST"

// hostHelper is the test binary re-run as a host (as cde-run train would
// be): it starts the plugin, prints its pid, and closes it on SIGINT.
func hostHelper(path string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	params := map[string]any{"strategy": "ppl"}
	if js := os.Getenv(hostHelperParamsEnv); js != "" {
		params = nil
		if err := json.Unmarshal([]byte(js), &params); err != nil {
			fmt.Println("error", err)
			return 1
		}
	}
	s, err := plugins.Open(plugins.Config{Path: path, Params: params, Log: zerolog.Nop(), StartTimeout: testwait.Scale(20 * time.Second)})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	p, _ := plugins.Of(s)
	if os.Getenv(hostHelperCallEnv) != "" {
		// One step's hooks, so that the shared-memory regions exist and
		// the plugin maps them.
		info, r := randomRollout(3)
		if _, err := strategytest.RunStep(s, info, r); err != nil {
			fmt.Println("error", err)
			return 1
		}
	}
	fmt.Println("pid", p.Pid())
	<-ctx.Done()
	core.HooksOf(s).Close()
	return 0
}

// TestNoOrphans: Ctrl-C (SIGINT to the whole foreground process group, as a
// terminal sends it) and kill -9 of the host both leave no plugin process.
func TestNoOrphans(t *testing.T) { noOrphans(t, testPlugin) }

// hostHelperParamsEnv, when set, holds the params (JSON) hostHelper opens
// its plugin with (default {"strategy": "ppl"}).
const hostHelperParamsEnv = "CDE_HOST_HELPER_PARAMS"

// hostHelperCallEnv, when set, makes hostHelper run one step's hooks
// before it prints the plugin's pid.
const hostHelperCallEnv = "CDE_HOST_HELPER_CALL"

// startHost starts the test binary as a host process (hostHelper) in its
// own process group, with the plugin at path and the extra environment,
// and returns it with its plugin's pid; the host is killed when the test
// ends.
func startHost(t *testing.T, path string, env ...string) (*exec.Cmd, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), hostHelperEnv+"="+path), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "pid ") {
		t.Fatalf("host said %q (%v)", line, err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "pid ")))
	return cmd, pid
}

// noOrphans starts a host process (hostHelper) with the plugin at path,
// kills it with SIGINT to its group or SIGKILL to it alone, and checks the
// plugin process is gone.
func noOrphans(t *testing.T, path string) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd, pid := startHost(t, path)
			if !alive(pid) {
				t.Fatalf("plugin %d not running", pid)
			}
			if sig == syscall.SIGINT {
				syscall.Kill(-cmd.Process.Pid, sig) // the whole group, like Ctrl-C
			} else {
				cmd.Process.Signal(sig) // the host only
			}
			cmd.Wait()
			waitGone(t, pid)
		})
	}
}

// TestNeedsCarried: the needs a plugin declares reach the host whole,
// Correct and the least group size too (they were dropped, so a plugin
// declaring Correct was shown and kit-checked as Correct:false), with
// min_group_key named under the entry's params path.
func TestNeedsCarried(t *testing.T) {
	for _, tc := range []struct {
		name   string
		path   func(t *testing.T) string
		params map[string]any
		want   core.Needs
	}{
		{"go", func(*testing.T) string { return testPlugin },
			map[string]any{"mode": "ok", "correct": true, "min_group": 4, "min_group_key": "k"},
			core.Needs{LogProbs: true, Correct: true, MinGroup: 4, MinGroupKey: "strategies[0].params.k"}},
		{"go, a full key", func(*testing.T) string { return testPlugin },
			map[string]any{"mode": "ok", "min_group": 2, "min_group_key": "algorithm.k"},
			core.Needs{LogProbs: true, MinGroup: 2, MinGroupKey: "algorithm.k"}},
		{"go, no key", func(*testing.T) string { return testPlugin },
			map[string]any{"mode": "ok", "min_group": 3},
			core.Needs{LogProbs: true, MinGroup: 3, MinGroupKey: "strategies[0].params (the plugin's min_group)"}},
		{"python", func(t *testing.T) string { return pythonScript(t, pyTestPlugin) },
			map[string]any{"mode": "ok", "correct": true, "min_group": 4, "min_group_key": "k"},
			core.Needs{LogProbs: true, Entropies: true, Correct: true, MinGroup: 4, MinGroupKey: "strategies[0].params.k"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := openPython(t, tc.path(t), tc.params, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Needs(); got != tc.want {
				t.Errorf("Needs() = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestNegativeMinGroupRefused: a least group size below 0 is a broken
// description, refused at start.
func TestNegativeMinGroupRefused(t *testing.T) {
	_, err := openTest(t, map[string]any{"mode": "ok", "min_group": -1}, nil)
	wantErr(t, err, "needs min_group -1")
}
