package main

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// The usage line of --help names every flag the command takes (a newcomer
// reads the first line).
func TestSynopsisNamesEveryFlag(t *testing.T) {
	flagLine := regexp.MustCompile(`(?m)^  -([a-z][a-z-]*)`)
	for _, cmd := range []string{"bench", "shape"} {
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
