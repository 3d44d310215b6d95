package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The same PPO run with multihead (4 heads, bootstrap masks) and ppl, three
// ways: in-tree, served by the test plugin over the gRPC messages, and over
// shared memory, where the step's columns live in the plugins' arena. The
// metrics are equal bit for bit (perf/* aside), and the shared-memory
// plugins read the columns in place (their close log counts the bytes).
func TestPluginArenaSameNumbers(t *testing.T) {
	_, test := buildPlugins(t)
	tmp := t.TempDir()
	mh := "{heads: 4, kappa: 3, alpha: 0.5, zeta: 0.5}"
	base := tinyBase + "algorithm: {name: ppo}\ntrain: {steps: 3, prompts_per_step: 4}\n"
	configs := map[string]string{
		"in-tree": "strategies:\n  - {name: multihead, heads: 4, kappa: 3, alpha: 0.5, zeta: 0.5}\n  - {name: ppl}\n",
		"messages": "strategies:\n  - {plugin: " + test + ", transport: messages, params: {strategy: multihead, params: " + mh + "}}\n" +
			"  - {plugin: " + test + ", transport: messages, params: {strategy: ppl}}\n",
		"shm": "strategies:\n  - {plugin: " + test + ", params: {strategy: multihead, params: " + mh + "}}\n" +
			"  - {plugin: " + test + ", params: {strategy: ppl}}\n",
	}
	rows := map[string][]map[string]any{}
	var shmLog string
	for name, strategies := range configs {
		cfg := filepath.Join(tmp, name+".yaml")
		writeFile(t, cfg, base+strategies)
		runDir := filepath.Join(tmp, name)
		out := run(t, "train", "--config", cfg, "--run-dir", runDir)
		if name == "shm" {
			shmLog = out
		}
		rows[name] = readMetrics(t, filepath.Join(runDir, "metrics.jsonl"))
	}
	// A plugin's Observe metrics are namespaced (explore/<name>/...): the
	// multihead plugin's critic/head_std appears once more, under its name,
	// and must equal the trainer's own.
	for _, name := range []string{"messages", "shm"} {
		for i, r := range rows[name] {
			if v, ok := r["explore/multihead/critic/head_std"]; ok {
				if v != r["critic/head_std"] {
					t.Errorf("%s step %d: explore/multihead/critic/head_std %v, critic/head_std %v", name, i, v, r["critic/head_std"])
				}
				delete(r, "explore/multihead/critic/head_std")
			}
		}
	}
	if len(rows["in-tree"]) != 4 {
		t.Fatalf("%d rows in-tree, want 4", len(rows["in-tree"]))
	}
	for _, name := range []string{"messages", "shm"} {
		if len(rows[name]) != len(rows["in-tree"]) {
			t.Fatalf("%s: %d rows, in-tree %d", name, len(rows[name]), len(rows["in-tree"]))
		}
		for i, want := range rows["in-tree"] {
			got := rows[name][i]
			for k := range mergeKeys(want, got) {
				if strings.HasPrefix(k, "perf/") {
					continue
				}
				a, _ := json.Marshal(want[k])
				b, _ := json.Marshal(got[k])
				if string(a) != string(b) {
					t.Errorf("%s step %d: %s = %s, in-tree %s", name, i, k, b, a)
				}
			}
		}
	}
	// Both shared-memory plugins handed columns over in place (the arena
	// has a region from the second step on).
	re := regexp.MustCompile(`in_place_bytes[=":]+([0-9]+)`)
	m := re.FindAllStringSubmatch(shmLog, -1)
	if len(m) != 2 {
		t.Fatalf("%d shared-memory close lines in the log, want 2:\n%s", len(m), shmLog)
	}
	for _, s := range m {
		if n, _ := strconv.Atoi(s[1]); n == 0 {
			t.Errorf("a plugin read no column in place: %s", s[0])
		}
	}
}

func mergeKeys(a, b map[string]any) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}
