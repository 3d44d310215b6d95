package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchFlags runs bench/smoke.yaml through the CLI: -c, --out and
// --jobs train both arms; a rerun with --only retrains only that arm's
// unfinished seed; --report-only trains nothing; results.md quotes the
// commands. The runner itself is tested in package bench.
func TestBenchFlags(t *testing.T) {
	out := filepath.Join(t.TempDir(), "smoke")
	smoke := filepath.Join("..", "..", "bench", "smoke.yaml")
	log := run(t, "bench", "-c", smoke, "--out", out, "--jobs", "2")
	for _, want := range []string{"grpo_simhash seed 1: starting", "ppo_mh_ppl seed 1: finished", "[ppo_mh_ppl seed 1] "} {
		if !strings.Contains(log, want) {
			t.Errorf("bench log lacks %q:\n%s", want, log)
		}
	}
	os.Remove(filepath.Join(out, "runs", "ppo_mh_ppl", "seed-1", "DONE"))
	log = run(t, "bench", "-c", smoke, "--out", out, "--only", "ppo_mh_ppl")
	if !strings.Contains(log, "bench [1/1] ppo_mh_ppl seed 1: finished") || strings.Contains(log, "grpo_simhash") {
		t.Fatalf("--only did not train just the one arm:\n%s", log)
	}
	os.Remove(filepath.Join(out, "results.md"))
	if log = run(t, "bench", "-c", smoke, "--out", out, "--report-only"); strings.Contains(log, "starting") {
		t.Fatalf("--report-only trained:\n%s", log)
	}
	md, err := os.ReadFile(filepath.Join(out, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The out dir (absolute, outside the working directory) is recorded
	// as .../NAME, never as this machine's path.
	outShown := ".../" + filepath.Base(out)
	for _, want := range []string{
		"Runs made by `cde-run bench -c " + smoke + " --out " + outShown + " --jobs 2`, then `cde-run bench -c " + smoke + " --out " + outShown + " --only ppo_mh_ppl`",
		"Report written by `cde-run bench -c " + smoke + " --out " + outShown + " --report-only`",
		"| grpo_simhash | 1 |", "## Claims"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("results.md lacks %q:\n%s", want, md)
		}
	}
}

// TestBenchCLIErrors checks exit statuses and messages of bad flags and a
// bad bench file.
func TestBenchCLIErrors(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "bad.yaml")
	good := "base: {task: {name: arith, levels: [1]}, model: {checkpoint: \"\"}}\nseeds: [1]\narms: [{name: a}]\n"
	writeFile(t, file, good+"armz: []\n")
	writeFile(t, filepath.Join(tmp, "good.yaml"), good)
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-c", file, "--out", filepath.Join(tmp, "out")}, 1, "armz: unknown key"},
		{[]string{"-c", filepath.Join(tmp, "good.yaml"), "--out", filepath.Join(tmp, "out"), "--only", "b"}, 1, "--only b: no such arm"},
		{[]string{"--out", tmp}, 2, "-c BENCH.yaml is required"},
		{[]string{"-c", file, "--jobs", "0"}, 2, "--jobs must be >= 1"},
		{[]string{"-c", filepath.Join(tmp, "missing.yaml")}, 1, "missing.yaml"},
	}
	for _, c := range cases {
		out, err := exec.Command(cdeRun, append([]string{"bench"}, c.args...)...).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != c.code || !strings.Contains(string(out), c.want) {
			t.Errorf("cde-run bench %s: %v (want exit %d naming %q)\n%s", strings.Join(c.args, " "), err, c.code, c.want, out)
		}
	}
	if out, err := exec.Command(cdeRun, "bench", "--help").CombinedOutput(); err != nil || !strings.Contains(string(out), "usage: cde-run bench") {
		t.Fatalf("bench --help: %v\n%s", err, out)
	}
}
