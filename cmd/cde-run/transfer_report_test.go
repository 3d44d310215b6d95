package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// transferAgreeArgs is the `cde-run agree` command that wrote
// docs/results/transfer/agreement.md (its README quotes it), run from the
// repository root: countdown's verdicts are the leaderboard's three parts,
// the rerun's replacing the first part's claims for the arms it reran;
// pass@256 and distinct@256 there are pass@32 and distinct@32 here.
var transferAgreeArgs = []string{"agree", "--label-a", "countdown", "--label-b", "wordprob", "--later-wins",
	"--a", "docs/results/leaderboard/main/verdicts.json",
	"--a", "docs/results/leaderboard/extra/verdicts.json",
	"--a", "docs/results/leaderboard/rerun/verdicts.json",
	"--b", "docs/results/transfer/verdicts.json",
	"--metric", "val/mean/pass@256=val/mean/pass@32",
	"--metric", "val/mean/distinct@256=val/mean/distinct@32"}

// The transfer bench (bench/transfer.yaml) is committed packed as the
// leaderboard's parts are: records.csv.xz and metrics.tar.xz, no runs.
// Restored by the leaderboard's restore.py, its runs must give, through
// `bench --report-only` and the current claim rule, the committed
// verdicts.json and results.md's sections from "## Claims" on (what comes
// before holds wall times, which a restored directory lacks); and `cde-run
// agree` must write the committed agreement.md. A change to the claim rule,
// the report or the agreement table that is not followed by regenerating
// docs/results/transfer fails here.
func TestCommittedTransferIsCurrent(t *testing.T) {
	root := filepath.Join("..", "..")
	part := filepath.Join(root, "docs", "results", "transfer")
	python := "/usr/bin/python3" // Debian's; restore.py needs only the standard library
	if _, err := os.Stat(python); err != nil {
		python = "python3"
	}
	dir := t.TempDir()
	if out, err := exec.Command(python, filepath.Join(root, "docs", "results", "leaderboard", "restore.py"), part, dir).CombinedOutput(); err != nil {
		t.Fatalf("restore.py: %v\n%s", err, out)
	}
	report := exec.Command(cdeRun, "bench", "-c", "bench/transfer.yaml", "--out", dir, "--report-only")
	report.Dir = root // the bench's model.hf and task.tokenizer are relative to the repository root
	if out, err := report.CombinedOutput(); err != nil {
		t.Fatalf("--report-only: %v\n%s", err, out)
	}
	regen := "regenerate it as docs/results/transfer/README.md says (\"Regenerating the verdicts\")"
	compare := func(name string, want, got []byte) {
		t.Helper()
		if !bytes.Equal(want, got) {
			t.Errorf("docs/results/transfer/%s differs from what the current code writes (first difference at line %d); %s",
				name, firstDiffLine(want, got), regen)
		}
	}
	read := func(path string) []byte {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	compare("verdicts.json", read(filepath.Join(part, "verdicts.json")), read(filepath.Join(dir, "verdicts.json")))
	claims := func(md []byte) []byte {
		t.Helper()
		i := bytes.Index(md, []byte("\n## Claims"))
		if i < 0 {
			t.Fatalf("results.md has no \"## Claims\" section")
		}
		return md[i:]
	}
	compare("results.md (from \"## Claims\" on)", claims(read(filepath.Join(part, "results.md"))), claims(read(filepath.Join(dir, "results.md"))))

	agreed := filepath.Join(t.TempDir(), "agreement.md")
	cmd := exec.Command(cdeRun, append(transferAgreeArgs, "--out", agreed)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("agree: %v\n%s", err, out)
	}
	compare("agreement.md", read(filepath.Join(part, "agreement.md")), read(agreed))
}
