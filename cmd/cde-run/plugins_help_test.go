package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
)

// plugins check --help lists every registered algorithm for --algorithm,
// not just grpo and ppo. The list is the registry's (this test binary links
// the same algorithms as cde-run), so adding an algorithm does not break it.
func TestPluginsHelpListsAlgorithms(t *testing.T) {
	algos := core.Algorithms()
	for _, builtin := range []string{"grpo", "ppo", "rloo"} {
		if !slices.Contains(algos, builtin) {
			t.Fatalf("algorithm %s is not registered in cde-run (registered: %v)", builtin, algos)
		}
	}
	out, err := exec.Command(cdeRun, "plugins", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := "(one of: " + strings.Join(algos, ", ") + ")"
	if !strings.Contains(string(out), want) || !strings.Contains(string(out), "-algorithm-params") {
		t.Fatalf("help does not list %s and --algorithm-params:\n%s", want, out)
	}
}
