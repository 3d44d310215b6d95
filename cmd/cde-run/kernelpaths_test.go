package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cde-rl/cde/engines/cpu/gemm"
)

// kernelRunProcs are the GOMAXPROCS values TestTrainKernelPathsBitIdentical
// runs every kernel path at (all four on the "go" path too).
var kernelRunProcs = []int{1, 2, 3, 8}

// kernelRunSets is a short default training (the default model from the
// shipped base policy, GRPO, the cpu engine): 4 steps of 4 prompts x 4
// responses, and evaluations at steps 0, 2 and 4 of 4 problems per set,
// 2 samples each. pretrain.dir keeps the extracted base out of the
// repository.
func kernelRunSets(base string) []string {
	var args []string
	for _, s := range []string{"backend.engine=cpu", "train.steps=4", "train.prompts_per_step=4", "rollout.n=4",
		"eval.every=2", "eval.max_problems=4", "eval.k=2", "pretrain.dir=" + base} {
		args = append(args, "--set", s)
	}
	return args
}

// wallClockKey reports whether a metrics.jsonl key holds a timing, the
// only keys that may differ between runs: every perf/* key (a default
// training writes perf/gen_s, perf/gen_tokens_per_s, perf/step_s and
// perf/update_s; rollout.servers adds perf/sync_s). No other key of a
// training's metrics.jsonl reads the clock: step, actor/*, calib/*,
// response/*, reward/*, rollout/*, train/* and val/* are functions of the
// config, the seeds and the arithmetic.
func wallClockKey(k string) bool { return strings.HasPrefix(k, "perf/") }

// metricLine is one line of metrics.jsonl without its timings: sorted
// keys, each value's JSON text as written (numbers keep their exact text).
type metricLine struct {
	keys []string
	vals map[string]string
}

// readMetricLines reads metrics.jsonl line by line with a json.Decoder
// that keeps numbers as written (UseNumber) and drops the wall-clock keys.
func readMetricLines(t *testing.T, path string) []metricLine {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []metricLine
	for i, line := range bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n")) {
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber()
		var row map[string]any
		if err := dec.Decode(&row); err != nil {
			t.Fatalf("%s line %d: %v: %q", path, i+1, err, line)
		}
		m := metricLine{vals: map[string]string{}}
		for k, v := range row {
			if wallClockKey(k) {
				continue
			}
			text, err := json.Marshal(v) // a json.Number marshals as its own text
			if err != nil {
				t.Fatalf("%s line %d key %s: %v", path, i+1, k, err)
			}
			m.keys = append(m.keys, k)
			m.vals[k] = string(text)
		}
		slices.Sort(m.keys)
		out = append(out, m)
	}
	return out
}

// firstMetricDiff is the first line (1-based) and key where got differs
// from want, with both values ("(absent)" for a missing key or line);
// line 0 when they agree.
func firstMetricDiff(want, got []metricLine) (line int, key, a, b string) {
	for i := range max(len(want), len(got)) {
		if i >= len(want) || i >= len(got) {
			return i + 1, "(the whole line)", fmt.Sprintf("%d lines", len(want)), fmt.Sprintf("%d lines", len(got))
		}
		keys := slices.Clone(want[i].keys)
		for _, k := range got[i].keys {
			if _, ok := want[i].vals[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			va, oka := want[i].vals[k]
			vb, okb := got[i].vals[k]
			if !oka {
				va = "(absent)"
			}
			if !okb {
				vb = "(absent)"
			}
			if va != vb {
				return i + 1, k, va, vb
			}
		}
	}
	return 0, "", "", ""
}

// TestTrainKernelPathsBitIdentical trains the same short default run once
// per kernel path of this CPU (gemm.Paths(): the pure-Go path is on every
// host, so an AVX2 host compares at least two, and every host compares
// thread counts) and per GOMAXPROCS in
// kernelRunProcs, with CDE_CPU_KERNEL and GOMAXPROCS set in cde-run's
// environment, and requires metrics.jsonl to be the same text in every
// run once the timings (wallClockKey) are removed: every sampled token,
// reward, loss, gradient norm and evaluation depends on the engine's
// arithmetic, so one differing bit anywhere shows.
//
//	go test ./cmd/cde-run -run '^TestTrainKernelPathsBitIdentical$' -v
func TestTrainKernelPathsBitIdentical(t *testing.T) {
	paths := gemm.Paths()
	if len(paths) == 0 || paths[len(paths)-1] != gemm.PathGo {
		t.Fatalf("gemm.Paths() = %v: want \"go\" last (a CPU without AVX2 has only \"go\": its runs still compare thread counts)", paths)
	}
	tmp := t.TempDir()
	base := filepath.Join(tmp, "base")
	type result struct {
		path  string
		procs int
		lines []metricLine
		ckpt  map[string][]byte
	}
	var runs []result
	start := time.Now()
	for _, p := range paths {
		for _, procs := range kernelRunProcs {
			dir := filepath.Join(tmp, fmt.Sprintf("%s-%d", p, procs))
			began := time.Now()
			out, err := cdeRunEnv([]string{gemm.KernelEnv + "=" + p, "GOMAXPROCS=" + strconv.Itoa(procs)},
				append([]string{"train", "--run-dir", dir}, kernelRunSets(base)...)...)
			if err != nil {
				t.Fatalf("cde-run train with %s=%s GOMAXPROCS=%d: %v\n%s", gemm.KernelEnv, p, procs, err, out)
			}
			lines := readMetricLines(t, filepath.Join(dir, "metrics.jsonl"))
			t.Logf("path %-6s GOMAXPROCS %d: %d metric lines in %.1f s", p, procs, len(lines), time.Since(began).Seconds())
			runs = append(runs, result{p, procs, lines, readTree(t, filepath.Join(dir, "checkpoints", "step-000004"))})
		}
	}
	t.Logf("%d trainings in %.1f s", len(runs), time.Since(start).Seconds())
	ref := runs[0]
	if len(ref.lines) != 5 { // steps 0..3 and the final evaluation at step 4
		t.Fatalf("the reference run wrote %d metric lines, want 5", len(ref.lines))
	}
	for _, r := range runs[1:] {
		line, key, a, b := firstMetricDiff(ref.lines, r.lines)
		if line == 0 {
			t.Logf("path %-6s GOMAXPROCS %d: metrics.jsonl identical to path %s GOMAXPROCS %d (timings aside)", r.path, r.procs, ref.path, ref.procs)
			continue
		}
		t.Errorf("path %s GOMAXPROCS %d: metrics.jsonl line %d, key %s: %s, but %s with path %s GOMAXPROCS %d",
			r.path, r.procs, line, key, b, a, ref.path, ref.procs)
	}
	// The final checkpoints are the same bytes too (weights, Adam moments,
	// state.json, MANIFEST.json): the engine's arithmetic agrees, and the
	// checkpoint is written in a fixed order (gob would write a map of
	// variables in Go's random order).
	if len(ref.ckpt) < 3 {
		t.Fatalf("the reference run's final checkpoint holds %d files, want at least 3", len(ref.ckpt))
	}
	for _, r := range runs[1:] {
		if err := sameTree(ref.ckpt, r.ckpt); err != nil {
			t.Errorf("path %s GOMAXPROCS %d: final checkpoint differs from path %s GOMAXPROCS %d's: %v", r.path, r.procs, ref.path, ref.procs, err)
		}
	}
}

// readTree reads every file under dir, by slash path relative to dir.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		files[filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// sameTree says which file of two readTree results differs, if any.
func sameTree(want, got map[string][]byte) error {
	for _, name := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[name]
		switch {
		case !ok:
			return fmt.Errorf("%s missing", name)
		case !bytes.Equal(g, want[name]):
			return fmt.Errorf("%s differs (%d and %d bytes)", name, len(want[name]), len(g))
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			return fmt.Errorf("%s is extra", name)
		}
	}
	return nil
}
