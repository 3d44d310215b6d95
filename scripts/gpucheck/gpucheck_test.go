// Package gpucheck holds the test of scripts/gpucheck: its prepare step and
// its run step's dry mode (engine cpu for xla:cuda, PyTorch on the CPU), so
// the script that runs on a GPU machine, its paths, its parsing of the
// checks' output and its summary are exercised on every CI run.
package gpucheck

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const python = "/usr/bin/python3" // Debian's, which has python3-torch

type summary struct {
	Mode   string `json:"mode"`
	Engine string `json:"engine"`
	Checks map[string]struct {
		Status  string          `json:"status"`
		Reason  string          `json:"reason"`
		Error   string          `json:"error"`
		Figures json.RawMessage `json:"figures"`
	} `json:"checks"`
}

func TestDryRun(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds three tagged binaries and runs five checks (minutes)")
	}
	if err := exec.Command(python, "-c", "import torch, numpy").Run(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s cannot import torch and numpy (%v): .ci/run installs python3-torch", python, err)
		}
		t.Skip("PyTorch is not installed for " + python + " (apt-get install python3-torch)")
	}
	bin := t.TempDir()
	prep := exec.Command("bash", "prepare", bin)
	if out, err := prep.CombinedOutput(); err != nil {
		t.Fatalf("prepare: %v\n%s", err, out)
	} else if !regexp.MustCompile(`the working tree \(tracked and not ignored\) [0-9.]+ MiB; together [0-9.]+ MiB, of 61 MiB`).Match(out) {
		t.Errorf("prepare did not report the carried size:\n%s", out)
	}
	for _, f := range []string{"cde-run.xz", "xla.test.xz", "hfbench.xz"} {
		if _, err := os.Stat(filepath.Join(bin, f)); err != nil {
			t.Errorf("prepare left no %s: %v", f, err)
		}
	}
	// The Qwen3 tokenizer travels as the tree commits it, gzipped: prepare
	// packs no copy of its own.
	if _, err := os.Stat(filepath.Join(bin, "qwen3-tokenizer.json.xz")); err == nil {
		t.Error("prepare packed qwen3-tokenizer.json.xz; the tree's tokenizer.json.gz travels instead")
	}
	const tokGz = "../../tokenizer/testdata/qwen3/tokenizer.json.gz"
	wantTok := gunzipFile(t, tokGz)
	_, plainErr := os.Stat(strings.TrimSuffix(tokGz, ".gz"))
	out := filepath.Join(t.TempDir(), "out")
	run := exec.Command(python, "run.py", out, "--dry", "--bin", bin)
	log, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("run.py --dry: %v\n%s", err, log)
	}
	if !strings.Contains(string(log), "Qwen3 tokenizer tokenizer/testdata/qwen3/tokenizer.json.gz (11.4 MB decompressed)") {
		t.Errorf("run.py did not report the tokenizer it checked:\n%s", log)
	}
	// tinyhf.py wrote the tokenizer out, plain, into each checkpoint (where
	// HF transformers reads it), without writing into the tree.
	toks, _ := filepath.Glob(filepath.Join(out, "work", "*", "tokenizer.json"))
	if len(toks) == 0 {
		t.Error("run.py --dry left no checkpoint with a tokenizer.json under OUT/work")
	}
	for _, p := range toks {
		if got := readFile(t, p); got != wantTok {
			t.Errorf("%s differs from tokenizer.json.gz decompressed (%d bytes, want %d)", p, len(got), len(wantTok))
		}
	}
	if _, err := os.Stat(strings.TrimSuffix(tokGz, ".gz")); err == nil && plainErr != nil {
		t.Error("run.py --dry wrote tokenizer/testdata/qwen3/tokenizer.json into the tree")
	}
	b, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s summary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if s.Mode != "dry" || s.Engine != "cpu" {
		t.Errorf("mode %q engine %q, want dry and cpu", s.Mode, s.Engine)
	}
	md, _ := os.ReadFile(filepath.Join(out, "summary.md"))
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "t"} {
		c, ok := s.Checks[k]
		if !ok {
			t.Errorf("check %s missing from summary.json", k)
			continue
		}
		// c needs HF transformers, and f also peft, which CI does not
		// install: they may skip, with that reason, after their train,
		// export and score ran.
		// t needs tensorboard, which CI does not install either: it may
		// skip after its run wrote the event file.
		// h's PyTorch side needs transformers too, and i's peer TRL (with
		// transformers, accelerate and datasets): they may skip after
		// cde's side ran.
		if !(c.Status == "pass" || (k == "c" || k == "f" || k == "h") && c.Status == "skip" && strings.Contains(c.Reason, "transformers") ||
			k == "i" && c.Status == "skip" && strings.Contains(c.Reason, "cde's steps ran") ||
			k == "t" && c.Status == "skip" && strings.Contains(c.Reason, "tensorboard is not installed")) {
			t.Errorf("check %s: %s %s%s", k, c.Status, c.Reason, c.Error)
		}
		if !strings.Contains(string(md), "| "+k+" | ") {
			t.Errorf("summary.md has no row for check %s", k)
		}
	}
	// f: score --adapter equals the merged export exactly, and the plain
	// PyTorch forward of the merged export agrees.
	var f struct {
		Same  bool    `json:"adapter_equals_merged_export"`
		Plain float64 `json:"merged_plain_max_abs_diff"`
		Moved float64 `json:"trained_logprob_change"`
	}
	json.Unmarshal(s.Checks["f"].Figures, &f)
	if !f.Same || f.Plain > 1e-4 || f.Moved <= 1e-3 {
		t.Errorf("check f: %+v", f)
	}
	// g: on the cpu engine the bfloat16 base's run is the float32 base's.
	var g struct {
		Compared  int     `json:"metrics_compared"`
		Worst     float64 `json:"max_rel_diff"`
		Identical bool    `json:"adapters_identical"`
	}
	json.Unmarshal(s.Checks["g"].Figures, &g)
	if g.Compared == 0 || g.Worst != 0 || !g.Identical {
		t.Errorf("check g: %+v", g)
	}
	// The figures the run step parsed from each tool's output.
	var a struct {
		Run struct {
			Passed  bool                          `json:"passed"`
			Metrics map[string]map[string]float64 `json:"metrics"`
			Tests   map[string]string             `json:"tests"`
			WeightD float64                       `json:"max_weight_abs_diff"`
		} `json:"run_default"`
	}
	json.Unmarshal(s.Checks["a"].Figures, &a)
	for _, m := range []string{"actor:actor/loss", "actor:actor/grad_norm", "critic:critic/vf_loss", "critic:critic/grad_norm"} {
		if _, ok := a.Run.Metrics[m]; !ok {
			t.Errorf("check a: metric %s not parsed (have %v)", m, a.Run.Metrics)
		}
	}
	if !a.Run.Passed || a.Run.Tests["TestConformanceCriticStep"] != "PASS" || a.Run.WeightD <= 0 {
		t.Errorf("check a: passed %v, tests %v, weight diff %v", a.Run.Passed, a.Run.Tests, a.Run.WeightD)
	}
	var bfig struct {
		Models map[string]struct {
			Tokens int     `json:"tokens"`
			Diff   float64 `json:"max_abs_diff"`
		} `json:"models"`
	}
	json.Unmarshal(s.Checks["b"].Figures, &bfig)
	if len(bfig.Models) != 6 {
		t.Errorf("check b: %d models, want 6 (3 architectures x F32, BF16)", len(bfig.Models))
	}
	for name, m := range bfig.Models {
		if m.Tokens == 0 || !(m.Diff <= 1e-4) {
			t.Errorf("check b %s: %d tokens, max |diff| %v", name, m.Tokens, m.Diff)
		}
	}
	var d struct {
		Ratio map[string]float64 `json:"ratio_cde_over_torch"`
	}
	json.Unmarshal(s.Checks["d"].Figures, &d)
	for _, k := range []string{"forward_s", "train_s", "decode1_s", "decode2_s"} {
		if !(d.Ratio[k] > 0) {
			t.Errorf("check d: no ratio for %s (%v)", k, d.Ratio)
		}
	}
	// h: cde's decode ran with the loop on the device and on the host.
	var h struct {
		CDE map[string]map[string]any `json:"cde"`
	}
	json.Unmarshal(s.Checks["h"].Figures, &h)
	for _, loop := range []string{"device", "host"} {
		if v, _ := h.CDE[loop]["batch2_ms_per_step"].(float64); !(v > 0) {
			t.Errorf("check h: no batch-2 step time for the %s loop (%v)", loop, h.CDE[loop])
		}
	}
	for _, k := range []string{"spread_slots0_tokens_per_s", "spread_slots2_tokens_per_s"} {
		if v, _ := h.CDE["device"][k].(float64); !(v > 0) {
			t.Errorf("check h: no %s for the device loop (%v)", k, h.CDE["device"])
		}
	}
	// i: cde's GRPO steps ran, each with its phases.
	var i struct {
		CDE struct {
			Steps []struct {
				Step float64 `json:"step_s"`
				Gen  float64 `json:"generation_s"`
			} `json:"steps"`
		} `json:"cde"`
	}
	json.Unmarshal(s.Checks["i"].Figures, &i)
	if len(i.CDE.Steps) != 2 || !(i.CDE.Steps[1].Gen > 0 && i.CDE.Steps[1].Step > i.CDE.Steps[1].Gen) {
		t.Errorf("check i: cde steps %+v", i.CDE.Steps)
	}
	var e map[string]json.RawMessage
	json.Unmarshal(s.Checks["e"].Figures, &e)
	for _, run := range []string{"default", "ppo_multihead"} {
		var r struct {
			PerEngine map[string]struct {
				Steps int `json:"steps"`
			} `json:"per_engine"`
		}
		json.Unmarshal(e[run], &r)
		if len(r.PerEngine) != 2 {
			t.Errorf("check e %s: engines %v", run, r.PerEngine)
		}
		for eng, p := range r.PerEngine {
			if p.Steps != 3 {
				t.Errorf("check e %s on %s: %d steps, want 3", run, eng, p.Steps)
			}
		}
	}
	if t.Failed() {
		t.Logf("run.py output:\n%s", log)
	}
}

func gunzipFile(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Check h reads where the device memory goes from go-xla's compile log
// (hfbench --xla-memory-log): the lines below follow go-xla's format
// strings ("Compiling %q", then "Memory usage: On Device: [Code:%s,
// Inputs:%s, Outputs:%s, Aliases:%s, Temporary:%s]; On Host: [...]" with
// go-humanize's SI sizes), with klog's prefix. The dry run has no xla
// engine, so only this test feeds the parser such lines.
func TestXLAMemoryLog(t *testing.T) {
	if err := exec.Command(python, "-c", "1").Run(); err != nil {
		t.Skip("no " + python)
	}
	log := `I1127 19:40:00.100000   123 executable.go:85] Compiling "decode"
I1127 19:40:01.200000   123 executable.go:94] Compiled in 1.1s
I1127 19:40:01.200000   123 executable.go:95] Memory usage: On Device: [Code:12 kB, Inputs:2.4 GB, Outputs:1.1 GB, Aliases:1.0 GB, Temporary:19 MB]; On Host: [Code:0 B, Inputs:0 B, Outputs:0 B, Aliases:0 B, Temporary:0 B]
I1127 19:40:01.300000   123 executable.go:225] Executing "decode"
I1127 19:40:02.000000   123 executable.go:85] Compiling "prefill"
I1127 19:40:03.000000   123 executable.go:95] Memory usage: On Device: [Code:1 kB, Inputs:512 B, Outputs:3.0 GB, Aliases:0 B, Temporary:4.5 GB]; On Host: [Code:0 B, Inputs:0 B, Outputs:0 B, Aliases:0 B, Temporary:0 B]
`
	cmd := exec.Command(python, "-c", "import json, sys, run; print(json.dumps(run.xla_memory(sys.stdin.read())))")
	cmd.Dir = "."
	cmd.Stdin = strings.NewReader(log)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var graphs []map[string]any
	if err := json.Unmarshal(out, &graphs); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// prefill: 512 B + 3.0 GB + 4.5 GB before decode's 2.4 + 1.1 GB + 19 MB.
	mib := func(b float64) float64 { return b / (1 << 20) }
	want := []map[string]any{
		{"graph": "prefill", "code_mib": mib(1e3), "inputs_mib": mib(512), "outputs_mib": mib(3e9), "aliases_mib": 0.0, "temporary_mib": mib(4.5e9)},
		{"graph": "decode", "code_mib": mib(12e3), "inputs_mib": mib(2.4e9), "outputs_mib": mib(1.1e9), "aliases_mib": mib(1e9), "temporary_mib": mib(19e6)},
	}
	if len(graphs) != len(want) {
		t.Fatalf("graphs %v, want %v", graphs, want)
	}
	for i := range want {
		for k, v := range want[i] {
			if f, ok := v.(float64); ok {
				if g, _ := graphs[i][k].(float64); g < f*(1-1e-12) || g > f*(1+1e-12) {
					t.Errorf("graph %d %s = %v, want %v", i, k, graphs[i][k], f)
				}
			} else if graphs[i][k] != v {
				t.Errorf("graph %d %s = %v, want %v", i, k, graphs[i][k], v)
			}
		}
	}
}
