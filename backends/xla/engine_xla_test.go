//go:build xla

package xla

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
)

// The XLA build looks for the plugin where findPJRTPlugin says, hands GoMLX
// the path it found (a load failure names that file), and never downloads:
// nothing is written under $HOME, where GoMLX's auto-install would put a
// plugin.
func TestXLAMissingPlugin(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	dir := t.TempDir()
	t.Setenv(pjrtPluginPathEnv, dir)

	_, err := NewEngine("xla:cpu", filepath.Join(dir, "missing.so"))
	want := `backend.engine "xla:cpu": backend.pjrt_plugin "` + filepath.Join(dir, "missing.so") +
		`": no such file or directory (cde looks nowhere else when it is set, and never downloads a plugin)`
	if err == nil || err.Error() != want {
		t.Fatalf("configured path missing: error %v\nwant %s", err, want)
	}

	_, err = NewEngine("xla:cuda", "")
	want = strings.Join([]string{
		`backend.engine "xla:cuda": no PJRT plugin for "cuda" found (cde never downloads one); looked, in order, in PJRT_PLUGIN_LIBRARY_PATH:`,
		"  " + dir + "/pjrt-plugin-cuda.so",
		"  " + dir + "/pjrt_plugin_cuda.so",
		"  " + dir + "/pjrt_c_api_cuda_plugin.so",
		"set backend.pjrt_plugin to the plugin file (or its directory), or PJRT_PLUGIN_LIBRARY_PATH to its directory",
	}, "\n")
	if err == nil || err.Error() != want {
		t.Fatalf("no plugin: error %v\nwant %s", err, want)
	}

	// An empty file where the plugin should be: found, given to GoMLX,
	// and its dlopen failure reported with the path.
	bad := filepath.Join(dir, "pjrt_c_api_cpu_plugin.so")
	if err := os.WriteFile(bad, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = NewEngine("xla:cpu", "")
	if err == nil {
		t.Fatal("an empty file loaded as a PJRT plugin")
	}
	for _, w := range []string{`backend.engine "xla:cpu": PJRT plugin ` + bad + ": ", "failed to load PJRT plugin"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("not a plugin: error %q does not contain %q", err, w)
		}
	}

	// LoadHF (cde-run score --pjrt-plugin) passes the plugin on: the
	// missing file is named.
	hfDir, _ := writeTinyHF(t, "qwen3", "F32", 1)
	if _, err := LoadHF(hfDir, "xla:cpu", filepath.Join(dir, "missing.so")); err == nil || !strings.Contains(err.Error(), `backend.pjrt_plugin "`+filepath.Join(dir, "missing.so")+`"`) {
		t.Errorf("LoadHF with a missing plugin: %v", err)
	}

	entries, err := os.ReadDir(home)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("something was written under $HOME (%d entries, first %s): an auto-install ran", len(entries), entries[0].Name())
	}
}

// With a real plugin (CDE_TEST_PJRT_PLUGIN=/path/to/plugin.so, and
// CDE_TEST_PJRT_ENGINE=xla:cuda for a GPU one; default xla:cpu): the policy
// and critic on XLA compute what GoMLX's pure-Go engine computes from the
// same weights (the conformance suite's forward check and tolerances), the
// KV-cache sampler (which donates its caches) agrees with the scorer on the
// same engine, and one actor step and one critic step give finite metrics
// that agree with the go engine's. Not run in this repository's CI: no
// plugin can be installed there without a download.
func TestXLAPluginTrainStep(t *testing.T) {
	plugin := os.Getenv("CDE_TEST_PJRT_PLUGIN")
	if plugin == "" {
		t.Skip("CDE_TEST_PJRT_PLUGIN is not set: it names a PJRT plugin (.so) to run the XLA engine with; cde never downloads one")
	}
	engine := os.Getenv("CDE_TEST_PJRT_ENGINE")
	if engine == "" {
		engine = "xla:cpu"
	}
	opts := confOptions(engine, confScales[0])
	opts.PJRTPlugin = plugin
	xb, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { xb.Close() })
	t.Logf("engine: %s", xb.Engine())
	gb, err := New(confOptions("go", confScales[0]))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gb.Close() })

	checkForward(t, xb, gb)

	prompts := [][]int32{{1, 5, 6}, {1, 7}, {1, 8, 9, 10, 11}, {1, 4}}
	gens, err := xb.Generate(core.GenerateRequest{Prompts: prompts, Temperature: 0.7, MaxTokens: 6, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	seqs := make([]*core.Sequence, len(gens))
	for i, g := range gens {
		if len(g.Tokens) == 0 || len(g.Tokens) > 6 {
			t.Fatalf("generation %d: %d tokens", i, len(g.Tokens))
		}
		seqs[i] = &core.Sequence{Prompt: prompts[i], Response: g.Tokens}
	}
	lps, _, err := xb.ScoreLogProbs(seqs, 0.7)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range gens {
		for j := range g.Tokens {
			if math.Abs(lps[i][j]-g.LogProbs[j]) > 1e-4 {
				t.Fatalf("seq %d token %d: sampler log-prob %v, scorer %v", i, j, g.LogProbs[j], lps[i][j])
			}
		}
	}

	r := confRollout(t, gb, 8)
	u := core.ActorUpdate{Epochs: 1, Minibatches: 1, ClipLow: 0.2, ClipHigh: 0.28, EntropyCoef: 0.01, Temperature: 0.9, Seed: 4}
	mx, err := xb.UpdateActor(r, u)
	if err != nil {
		t.Fatal(err)
	}
	mg, err := gb.UpdateActor(r, u)
	if err != nil {
		t.Fatal(err)
	}
	checkStats(t, "actor", mx, mg, stepStats)
	cu := core.CriticUpdate{Epochs: 1, Minibatches: 1, Seed: 9}
	cx, err := xb.UpdateCritic(r, cu)
	if err != nil {
		t.Fatal(err)
	}
	cg, err := gb.UpdateCritic(r, cu)
	if err != nil {
		t.Fatal(err)
	}
	checkStats(t, "critic", cx, cg, stepStats)
	for k, v := range mx {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			t.Errorf("actor metric %s = %v", k, v)
		}
	}
}
