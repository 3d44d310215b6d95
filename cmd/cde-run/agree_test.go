package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// cde-run agree on the committed leaderboard: the first part (with the
// extra arms) against its rerun, which judged two of its arms again on
// new seeds. Each expected line is read off the two verdicts.json files.
func TestAgreeCommand(t *testing.T) {
	lb := filepath.Join("..", "..", "docs", "results", "leaderboard")
	var out, errb bytes.Buffer
	code := runAgree([]string{"--label-a", "main", "--label-b", "rerun",
		"--a", filepath.Join(lb, "main", "verdicts.json"), "--a", filepath.Join(lb, "extra", "verdicts.json"),
		"--b", filepath.Join(lb, "rerun", "verdicts.json")}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{
		// outcome_ucb's pass@1: -0.04741 on the first part, +0.002027 on
		// the rerun; dapo's: +0.009308 and +0.00738.
		"| `val/mean/pass@1` | 2 | 1 / 2 | 0.7500 | 0 / 0 | undefined | - |",
		"| outcome_ucb | grpo | -0.04741 [-0.06372, -0.0311] | not held | +0.002027 [-0.001606, +0.005659] | inconclusive | differs |",
		"| all | | 9 / 10 | | 0 / 0 | | |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	// With --later-wins the rerun's claims replace the first part's on
	// side A, so A and B hold the same 10 claims: every sign agrees.
	out.Reset()
	if code := runAgree([]string{"--later-wins", "--a", filepath.Join(lb, "main", "verdicts.json"), "--a", filepath.Join(lb, "rerun", "verdicts.json"),
		"--b", filepath.Join(lb, "rerun", "verdicts.json")}, &out, &errb); code != 0 {
		t.Fatalf("--later-wins: exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "| all | | 10 / 10 |") || strings.Count(out.String(), "rerun/verdicts.json replaces") != 10 {
		t.Errorf("--later-wins report:\n%s", out.String())
	}
	if code := runAgree([]string{"--a", filepath.Join(lb, "main", "verdicts.json"), "--a", filepath.Join(lb, "rerun", "verdicts.json"),
		"--b", filepath.Join(lb, "rerun", "verdicts.json")}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "later-wins") {
		t.Errorf("a claim on both files of A without --later-wins: exit %d, %q", code, errb.String())
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--a", "x.json"}, 2, "at least one --a and one --b"},
		{[]string{"--a", "x.json", "--b", "y.json", "--metric", "pass@1"}, 2, `--metric "pass@1": want A_METRIC=B_METRIC`},
		{[]string{"--a", filepath.Join(t.TempDir(), "missing.json"), "--b", "y.json"}, 1, "missing.json"},
		{[]string{"--a", filepath.Join(lb, "rerun", "verdicts.json"), "--b", filepath.Join(lb, "rerun", "verdicts.json"), "stray"}, 2, `unexpected argument "stray"`},
		{[]string{"--a", filepath.Join(lb, "rerun", "verdicts.json"), "--b", filepath.Join(lb, "rerun", "verdicts.json"),
			"--metric", "val/mean/pass@1=none", "--metric", "val/mean/pass@256=none", "--metric", "val/mean/maj@16=none",
			"--metric", "val/mean/distinct@256=none", "--metric", "rollout/entropy=none"}, 1, "no claim of A"},
	} {
		out.Reset()
		errb.Reset()
		if code := runAgree(c.args, &out, &errb); code != c.code || !strings.Contains(errb.String(), c.want) {
			t.Errorf("agree %v: exit %d, %q; want exit %d naming %q", c.args, code, errb.String(), c.code, c.want)
		}
	}
}
