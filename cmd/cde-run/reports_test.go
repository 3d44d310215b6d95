package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cde-rl/cde/internal/resultstest"
)

// Every committed bench report that keeps its runs (docs/results/NAME with
// runs.tar.xz) is what `bench --report-only` writes from those runs today:
// results.md, results.csv, verdicts.json and every plot, byte for byte but
// for results.md's "Report written by ... on DATE" sentence. A change to the
// report code or the claim rule that is not followed by regenerating the
// committed reports fails here, naming the command that regenerates each.
// The leaderboard keeps its runs in another packed form, restored by its
// own scripts (docs/results/leaderboard/restore.py), and is left out.
func TestCommittedReportsAreCurrent(t *testing.T) {
	root := filepath.Join("..", "..")
	packed, err := filepath.Glob(filepath.Join(root, "docs", "results", "*", "runs.tar.xz"))
	if err != nil || len(packed) < 4 {
		t.Fatalf("committed reports with runs: %v (%v), want the four benches that keep them", packed, err)
	}
	written := regexp.MustCompile(`Report written by .* on \d{4}-\d\d-\d\d \d\d:\d\d UTC`)
	for _, p := range packed {
		committed := filepath.Dir(p)
		name := filepath.Base(committed)
		t.Run(name, func(t *testing.T) {
			cfg := filepath.Join(root, "bench", name+".yaml")
			if _, err := os.Stat(cfg); err != nil {
				t.Fatalf("no bench config for docs/results/%s: %v", name, err)
			}
			dir := resultstest.Unpack(t, committed)
			if out, err := exec.Command(cdeRun, "bench", "-c", cfg, "--out", dir, "--report-only").CombinedOutput(); err != nil {
				t.Fatalf("--report-only: %v\n%s", err, out)
			}
			regen := "regenerate it: tar -xJf docs/results/" + name + "/runs.tar.xz -C docs/results/" + name +
				" && cde-run bench -c bench/" + name + ".yaml --out docs/results/" + name + " --report-only"
			files := []string{"results.md", "results.csv", "verdicts.json"}
			plots, _ := filepath.Glob(filepath.Join(committed, "plots", "*"))
			for _, f := range plots {
				files = append(files, filepath.Join("plots", filepath.Base(f)))
			}
			for _, f := range files {
				want, err := os.ReadFile(filepath.Join(committed, f))
				if err != nil {
					t.Errorf("docs/results/%s/%s: %v; %s", name, f, err, regen)
					continue
				}
				got, err := os.ReadFile(filepath.Join(dir, f))
				if err != nil {
					t.Errorf("the report writes no %s: %v", f, err)
					continue
				}
				if f == "results.md" {
					want, got = written.ReplaceAll(want, nil), written.ReplaceAll(got, nil)
				}
				if !bytes.Equal(want, got) {
					t.Errorf("docs/results/%s/%s differs from what the report code writes from its runs (first difference at line %d); %s",
						name, f, firstDiffLine(want, got), regen)
				}
			}
		})
	}
}

func firstDiffLine(a, b []byte) int {
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}
