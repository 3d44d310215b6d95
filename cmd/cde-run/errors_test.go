package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// Off a terminal a failing command's log is JSON lines, and its last line
// is the error once more as plain text, for a person; every other line
// still parses as JSON.
func TestFailurePlainLastLine(t *testing.T) {
	cmd := exec.Command(cdeRun, "train", "--set", "train.stepz=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		t.Fatal("train with an unknown key succeeded")
	}
	lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
	last := lines[len(lines)-1]
	want := "cde-run train: error: config: train.stepz: unknown key, did you mean train.steps?"
	if !strings.HasPrefix(last, want) {
		t.Fatalf("last line %q, want it to begin %q\n%s", last, want, stderr.String())
	}
	for _, l := range lines[:len(lines)-1] {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Errorf("not a JSON line: %q", l)
		}
	}
	if n := strings.Count(stderr.String(), "train.stepz: unknown key"); n != 2 {
		t.Errorf("the error %d times, want twice (the JSON line, the plain one)", n)
	}
}
