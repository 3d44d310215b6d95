package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cde-rl/cde/bench"
	"github.com/cde-rl/cde/trainer"
)

// A bench whose only arm-seed fails (another cde-run holds its
// directory) ends with its readable FAILED line and the closing summary
// naming it, and exits 3; in the default text format off a terminal no
// line is JSON, and --log-format json keeps the JSON log.
func TestBenchFailedSeedExitAndSummary(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "f.yaml")
	writeFile(t, file, "base: {task: {name: arith, levels: [1]}, model: {checkpoint: \"\"}, train: {steps: 1}}\nseeds: [1]\narms: [{name: a}]\n")
	out := filepath.Join(tmp, "out")
	held, err := trainer.LockDir(bench.RunDir(out, "a", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	for _, format := range []string{"", "json"} {
		args := []string{"bench", "-c", file, "--out", out}
		if format != "" {
			args = append(args, "--log-format", format)
		}
		b, err := exec.Command(cdeRun, args...).CombinedOutput()
		text := string(b)
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
			t.Fatalf("format %q: %v, want exit status 3\n%s", format, err, text)
		}
		for _, want := range []string{"bench [1/1] a seed 1: FAILED after ", "is used by another cde-run",
			"to retry it (the finished arm-seeds are kept): cde-run bench -c .../f.yaml --out .../out",
			"== bench finished: 1 arm-seed(s) FAILED, not in the report ==", "failed: a seed 1", "exit status", "3 (arm-seeds failed"} {
			if !strings.Contains(text, want) {
				t.Errorf("format %q: output lacks %q:\n%s", format, want, text)
			}
		}
		json := false
		for _, l := range strings.Split(text, "\n") {
			json = json || strings.HasPrefix(l, "{")
		}
		if json != (format == "json") {
			t.Errorf("format %q: JSON lines %v:\n%s", format, json, text)
		}
	}
	if b, err := exec.Command(cdeRun, "bench", "-c", file, "--log-format", "xml").CombinedOutput(); err == nil || !strings.Contains(string(b), `--log-format "xml": want text or json`) {
		t.Errorf("--log-format xml: %v\n%s", err, b)
	}
}
