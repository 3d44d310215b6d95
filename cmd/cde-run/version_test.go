package main

import (
	"bytes"
	"os/exec"
	"runtime/debug"
	"strings"
	"testing"
)

// cde-run --version and cde-run version print the module path and
// version; a binary without a stamped commit says so.
func TestVersion(t *testing.T) {
	for _, arg := range []string{"--version", "version"} {
		out, err := exec.Command(cdeRun, arg).CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "cde-run  github.com/cde-rl/cde ") || !strings.Contains(string(out), "\ncommit   ") {
			t.Fatalf("cde-run %s: %v\n%s", arg, err, out)
		}
	}
	out, err := exec.Command(cdeRun, "version", "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "usage: cde-run version") {
		t.Fatalf("cde-run version --help: %v\n%s", err, out)
	}
	if err := exec.Command(cdeRun, "version", "extra").Run(); err == nil {
		t.Fatal("cde-run version extra: no error")
	}
}

// The commit lines come from the build's vcs settings, as go version -m
// shows them.
func TestVersionFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.99", Path: "github.com/cde-rl/cde/cmd/cde-run",
		Main: debug.Module{Path: "github.com/cde-rl/cde", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-11-27T10:00:00Z"},
			{Key: "vcs.modified", Value: "true"}, {Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "arm64"}, {Key: "-tags", Value: "xla"}}}
	var b bytes.Buffer
	writeVersion(&b, bi, true)
	want := "cde-run  github.com/cde-rl/cde v1.2.3\ncommit   abc123 (2026-11-27T10:00:00Z), modified: built with uncommitted changes\ngo       go1.99 linux/arm64\ntags     xla\n"
	if b.String() != want {
		t.Errorf("got\n%swant\n%s", b.String(), want)
	}
	b.Reset()
	writeVersion(&b, &debug.BuildInfo{Main: debug.Module{Path: "github.com/cde-rl/cde", Version: "(devel)"}}, true)
	if s := b.String(); !strings.Contains(s, "(devel)") || !strings.Contains(s, "commit   unknown") {
		t.Errorf("a build without vcs settings:\n%s", s)
	}
}
