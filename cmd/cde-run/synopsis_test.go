package main

import (
	"os"
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
	for _, cmd := range []string{"bench", "shape", "train", "pretrain", "eval"} {
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

// The bench's record of its command (commands.txt, results.md) carries no
// absolute path of this machine.
func TestDisplayPath(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ in, want string }{
		{"bench/smoke.yaml", "bench/smoke.yaml"},
		{filepath.Join(wd, "bench", "smoke.yaml"), filepath.Join("bench", "smoke.yaml")},
		{"/elsewhere/zoo/out", ".../out"},
		{filepath.Dir(wd), ".../" + filepath.Base(filepath.Dir(wd))},
	} {
		if got := displayPath(tc.in); got != tc.want {
			t.Errorf("displayPath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// --engine and --pjrt-plugin on the config-driven commands are --set
// backend.engine and backend.pjrt_plugin, and a --set of those keys wins.
func TestEngineFlag(t *testing.T) {
	for _, tc := range []struct {
		cf           configFlags
		want, plugin string
	}{
		{configFlags{engine: "go"}, "go", ""},
		{configFlags{engine: "xla:cuda", plugin: "/p.so"}, "xla:cuda", "/p.so"},
		{configFlags{engine: "go", sets: stringList{"backend.engine=cpu"}}, "cpu", ""},
		{configFlags{}, "auto", ""},
	} {
		cfg, err := tc.cf.load()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Backend.Engine != tc.want || cfg.Backend.PJRTPlugin != tc.plugin {
			t.Errorf("%+v: engine %q plugin %q, want %q %q", tc.cf, cfg.Backend.Engine, cfg.Backend.PJRTPlugin, tc.want, tc.plugin)
		}
	}
	if (&configFlags{engine: "go"}).given() != true {
		t.Error("--engine does not count as changing the config (train --resume must refuse it)")
	}
}
