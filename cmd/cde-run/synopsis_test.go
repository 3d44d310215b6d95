package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The usage line of --help names every flag the command takes (a newcomer
// reads the first line).
func TestSynopsisNamesEveryFlag(t *testing.T) {
	flagLine := regexp.MustCompile(`(?m)^  -([a-z][a-z-]*)`)
	for _, cmd := range []string{"bench", "shape", "train", "pretrain", "eval", "board", "agree"} {
		out, err := exec.Command(cdeRun, cmd, "--help").CombinedOutput()
		if err != nil {
			t.Fatalf("%s --help: %v\n%s", cmd, err, out)
		}
		usage, _, _ := strings.Cut(string(out), "\n")
		for _, m := range flagLine.FindAllStringSubmatch(string(out), -1) {
			if !regexp.MustCompile(`(^|[ |\[])--?` + regexp.QuoteMeta(m[1]) + `\b`).MatchString(usage) {
				t.Errorf("%s --help: the usage line %q does not name -%s", cmd, usage, m[1])
			}
		}
	}
}

// Without a terminal the log is info-level JSON unless --log-level asks
// otherwise (internal/cli's TestTakeLogLevel parses the flag).
func TestLogLevelFlag(t *testing.T) {
	// Without a terminal the log is info-level JSON unless asked: debug
	// lines (a checkpoint written) appear only with --log-level debug.
	tmp := t.TempDir()
	cfg := filepath.Join(tmp, "tiny.yaml")
	writeFile(t, cfg, tinyBase+"train: {steps: 2, prompts_per_step: 4, checkpoint_every: 1}\n")
	quiet := run(t, "train", "--config", cfg, "--run-dir", filepath.Join(tmp, "a"))
	loud := run(t, "train", "--log-level", "debug", "--config", cfg, "--run-dir", filepath.Join(tmp, "b"))
	if strings.Contains(quiet, `"level":"debug"`) || !strings.Contains(loud, `"level":"debug"`) {
		t.Errorf("debug lines: %v by default, %v with --log-level debug", strings.Contains(quiet, `"level":"debug"`), strings.Contains(loud, `"level":"debug"`))
	}
}
