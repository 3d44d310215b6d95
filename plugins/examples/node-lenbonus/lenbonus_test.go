// Package lenbonus_test runs the JavaScript plugin of this directory
// (plugin.js, Node.js >= 20, dependencies from `npm ci`) through cde's
// real plugin host: the conformance kit, its numbers, its params errors
// and its state. Nothing is built: the host starts `plugin.js` (its
// #!/usr/bin/env node line) as it would start any plugin executable.
package lenbonus_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/core/strategytest"
	"github.com/cde-rl/cde/internal/testwait"
	"github.com/cde-rl/cde/plugins"
)

// pluginPath returns plugin.js once node and node_modules are there. Only
// outside CI (CI unset) may a missing one skip the tests: CI installs them
// (.ci/run runs npm ci here) and must run these tests for real.
func pluginPath(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	missing := func(why string) {
		t.Helper()
		if os.Getenv("CI") != "" {
			t.Fatalf("%s; CI is set, so this test must run", why)
		}
		t.Skipf("skipping the Node.js plugin tests: %s (CI is unset)", why)
	}
	out, err := exec.Command("node", "--version").Output()
	if err != nil {
		missing("node is not installed (Node.js >= 20)")
	}
	v := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
	if major, _ := strconv.Atoi(strings.Split(v, ".")[0]); major < 20 {
		missing("node " + v + " is older than 20")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@grpc", "grpc-js", "package.json")); err != nil {
		missing("node_modules is missing: run `npm ci` in " + dir)
	}
	return filepath.Join(dir, "plugin.js")
}

func open(t *testing.T, params map[string]any, weight core.Schedule) (core.Strategy, error) {
	t.Helper()
	s, err := plugins.Open(plugins.Config{Path: pluginPath(t), Params: params, ParamsPath: "strategies[0].params",
		Weight: weight, StartTimeout: testwait.Scale(20 * time.Second), Log: zerolog.Nop()})
	if err == nil {
		t.Cleanup(func() { core.HooksOf(s).Close() })
	}
	return s, err
}

func mustOpen(t *testing.T, params map[string]any, weight core.Schedule) core.Strategy {
	t.Helper()
	s, err := open(t, params, weight)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestConformance: the strategy contract, every instance a fresh node
// process.
func TestConformance(t *testing.T) {
	pluginPath(t)
	strategytest.Run(t, func() core.Strategy {
		s, err := open(t, map[string]any{"scale": 0.5}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, strategytest.Options{})
}

// rollout has three responses of 0, 1 and 3 tokens.
func rollout() *core.Rollout {
	r := &core.Rollout{Algorithm: "grpo"}
	for i, n := range []int{0, 1, 3} {
		r.Seqs = append(r.Seqs, core.Sequence{Group: i, ProblemID: "p", Prompt: []int32{1, 2},
			Response: make([]int32, n), LogProbs: make([]float64, n), Reward: 1, Correct: true})
	}
	return r
}

// TestNumbers: bonus = scale / (1 + T); metrics under explore/lenbonus/;
// the batch count survives SaveState / LoadState into a new process; the
// entry's weight multiplies the bonus.
func TestNumbers(t *testing.T) {
	s := mustOpen(t, map[string]any{"scale": 0.5}, nil)
	if s.Name() != "lenbonus" {
		t.Fatalf("name %q", s.Name())
	}
	if p, _ := plugins.Of(s); p.Hooks() != "reward_bonus,observe,state" {
		t.Fatalf("hooks %s", p.Hooks())
	}
	info := core.StepInfo{Step: 0, TotalSteps: 4, Algorithm: "grpo", Seed: 1}
	r := rollout()
	bonus, err := core.HooksOf(s).RewardBonus(info, r)
	if err != nil {
		t.Fatal(err)
	}
	// 0.5/(1+0), 0.5/(1+1), 0.5/(1+3)
	if want := []float64{0.5, 0.25, 0.125}; !reflect.DeepEqual(bonus, want) {
		t.Fatalf("bonus %v, want %v", bonus, want)
	}
	var m map[string]float64
	for range 2 {
		if m, err = core.HooksOf(s).Observe(info, r); err != nil {
			t.Fatal(err)
		}
	}
	// mean length (0+1+3)/3; two batches observed.
	if want := map[string]float64{"explore/lenbonus/mean_length": 4.0 / 3, "explore/lenbonus/batches": 2}; !reflect.DeepEqual(m, want) {
		t.Fatalf("metrics %v, want %v", m, want)
	}
	state, err := core.HooksOf(s).SaveState()
	if err != nil || string(state) != `{"batches":2}` {
		t.Fatalf("state %q, %v", state, err)
	}
	restored := mustOpen(t, map[string]any{"scale": 0.5}, nil)
	if err := core.HooksOf(restored).LoadState(state); err != nil {
		t.Fatal(err)
	}
	if m, err = core.HooksOf(restored).Observe(info, r); err != nil || m["explore/lenbonus/batches"] != 3 {
		t.Fatalf("after LoadState: %v, %v; want batches 3", m, err)
	}
	err = core.HooksOf(restored).LoadState([]byte(`{"batches":-1}`))
	if err == nil || !strings.Contains(err.Error(), "LoadState") || !strings.Contains(err.Error(), "batches = -1") {
		t.Fatalf("bad state: %v", err)
	}

	// weight: constant 4 -> 4 x the bonus; explore/lenbonus/weight = 4 is
	// the host's, next to the plugin's own metrics.
	w := mustOpen(t, map[string]any{"scale": 0.5}, core.WeightSchedule{Kind: "constant", W0: 4})
	if bonus, err = core.HooksOf(w).RewardBonus(info, r); err != nil || !reflect.DeepEqual(bonus, []float64{2, 1, 0.5}) {
		t.Fatalf("weighted bonus %v, %v; want [2 1 0.5]", bonus, err)
	}
	if m, err = core.HooksOf(w).Observe(info, r); err != nil || m["explore/lenbonus/weight"] != 4 || m["explore/lenbonus/batches"] != 1 {
		t.Fatalf("weighted metrics %v, %v", m, err)
	}
}

// TestParamsErrors: the plugin's own strict params reading reaches the
// user as a config error naming the key.
func TestParamsErrors(t *testing.T) {
	pluginPath(t)
	for _, c := range []struct {
		params map[string]any
		want   string
	}{
		{map[string]any{"scale": -1}, "config: strategies[0].params.scale: must be > 0, got -1"},
		{map[string]any{"scale": "big"}, `config: strategies[0].params.scale: want a number, got "big"`},
		{map[string]any{"scael": 1}, "config: strategies[0].params.scael: unknown key"},
	} {
		_, err := open(t, c.params, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.params, err, c.want)
		}
	}
}
