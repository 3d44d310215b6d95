package main

import (
	"os/exec"
	"strings"
	"testing"
)

// plugins check --help lists every registered algorithm for --algorithm,
// not just grpo and ppo.
func TestPluginsHelpListsAlgorithms(t *testing.T) {
	out, err := exec.Command(cdeRun, "plugins", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := "(one of: dr_grpo, grpo, grpo_passk, maxrl, ppo, reinforce_pp, reinforce_pp_baseline, rloo, rs_grpo)"
	if !strings.Contains(string(out), want) || !strings.Contains(string(out), "-algorithm-params") {
		t.Fatalf("help does not list %s and --algorithm-params:\n%s", want, out)
	}
}
