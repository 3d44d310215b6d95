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

// --log-level is taken out of any command's arguments (both spellings);
// a bad value is an error naming the flag.
func TestTakeLogLevel(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want []string
		lvl  string
	}{
		{[]string{"--set", "a=1"}, []string{"--set", "a=1"}, "info"},
		{[]string{"--log-level", "debug", "--set", "a=1"}, []string{"--set", "a=1"}, "debug"},
		{[]string{"--set", "a=1", "-log-level=warn"}, []string{"--set", "a=1"}, "warn"},
	} {
		got, lvl, err := takeLogLevel(tc.in)
		if err != nil || strings.Join(got, " ") != strings.Join(tc.want, " ") || lvl.String() != tc.lvl {
			t.Errorf("%v: %v %v %v, want %v %s", tc.in, got, lvl, err, tc.want, tc.lvl)
		}
	}
	for _, bad := range [][]string{{"--log-level"}, {"--log-level", "loud"}} {
		if _, _, err := takeLogLevel(bad); err == nil || !strings.Contains(err.Error(), "--log-level") {
			t.Errorf("%v: %v", bad, err)
		}
	}
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
