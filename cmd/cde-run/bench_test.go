package main

import (
	"encoding/csv"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cde-rl/cde/internal/resultstest"
)

// TestBenchFlags runs bench/smoke.yaml through the CLI: -c, --out and
// --jobs train both arms; a rerun with --only retrains only that arm's
// unfinished seed; --report-only trains nothing; results.md quotes the
// commands. The runner itself is tested in package bench.
func TestBenchFlags(t *testing.T) {
	out := filepath.Join(t.TempDir(), "smoke")
	smoke := filepath.Join("..", "..", "bench", "smoke.yaml")
	log := run(t, "bench", "-c", smoke, "--out", out, "--jobs", "2")
	for _, want := range []string{"grpo_simhash seed 1: starting", "ppo_mh_ppl seed 1: finished", "[ppo_mh_ppl seed 1] "} {
		if !strings.Contains(log, want) {
			t.Errorf("bench log lacks %q:\n%s", want, log)
		}
	}
	// An arm-seed's summary table goes to its run directory, not to the
	// bench's output, which ends with the bench's own.
	if strings.Contains(log, "train finished") {
		t.Errorf("an arm-seed's summary table is in the bench output:\n%s", log)
	}
	for _, arm := range []string{"grpo_simhash", "ppo_mh_ppl"} {
		if b, err := os.ReadFile(filepath.Join(out, "runs", arm, "seed-1", "summary.txt")); err != nil || !strings.Contains(string(b), "== train finished ==") {
			t.Errorf("%s seed 1: summary.txt (%v): %s", arm, err, b)
		}
	}
	os.Remove(filepath.Join(out, "runs", "ppo_mh_ppl", "seed-1", "DONE"))
	log = run(t, "bench", "-c", smoke, "--out", out, "--only", "ppo_mh_ppl")
	trained, _, _ := strings.Cut(log, "== bench finished ==") // the summary lists every arm
	if !strings.Contains(trained, "bench [1/1] ppo_mh_ppl seed 1: finished") || strings.Contains(trained, "grpo_simhash") {
		t.Fatalf("--only did not train just the one arm:\n%s", log)
	}
	os.Remove(filepath.Join(out, "results.md"))
	if log = run(t, "bench", "-c", smoke, "--out", out, "--report-only"); strings.Contains(log, "starting") {
		t.Fatalf("--report-only trained:\n%s", log)
	}
	md, err := os.ReadFile(filepath.Join(out, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The bench ends with a table: per arm, mean ± std of results.csv's
	// val/mean/* columns, train/acc and wall_s.
	_, table, ok := strings.Cut(log, "== bench finished ==\n")
	if !ok || !strings.Contains(table, "report     "+filepath.Join(out, "results.md")) {
		t.Fatalf("no bench summary:\n%s", log)
	}
	csvData, err := os.ReadFile(filepath.Join(out, "results.csv"))
	if err != nil {
		t.Fatal(err)
	}
	recs, _ := csv.NewReader(strings.NewReader(string(csvData))).ReadAll()
	col := slices.Index(recs[0], "val/mean/avg@2_mean")
	if col < 0 {
		t.Fatalf("results.csv header %v", recs[0])
	}
	for _, r := range recs[1:] {
		m, _ := strconv.ParseFloat(r[col], 64)
		sd, _ := strconv.ParseFloat(r[col+1], 64)
		want := fmt.Sprintf("%s ± %s", strconv.FormatFloat(m, 'g', 4, 64), strconv.FormatFloat(sd, 'g', 4, 64))
		line := ""
		for _, l := range strings.Split(table, "\n") {
			if f := strings.Fields(l); len(f) > 2 && f[0] == r[0] {
				line = l
			}
		}
		if f := strings.Fields(line); len(f) < 5 || f[1] != r[1] || f[2]+" ± "+f[4] != want {
			t.Errorf("arm %s: summary line %q, want seeds %s and val/mean/avg@2 %s", r[0], line, r[1], want)
		}
	}
	// The out dir (absolute, outside the working directory) is recorded
	// as .../NAME, never as this machine's path.
	outShown := ".../" + filepath.Base(out)
	for _, want := range []string{
		"Runs made by `cde-run bench -c " + smoke + " --out " + outShown + " --jobs 2`, then `cde-run bench -c " + smoke + " --out " + outShown + " --only ppo_mh_ppl`",
		"Report written by `cde-run bench -c " + smoke + " --out " + outShown + " --report-only`",
		"| grpo_simhash | 1 |", "## Claims"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("results.md lacks %q:\n%s", want, md)
		}
	}
}

// TestBenchCLIErrors checks exit statuses and messages of bad flags and a
// bad bench file.
func TestBenchCLIErrors(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "bad.yaml")
	good := "base: {task: {name: arith, levels: [1]}, model: {checkpoint: \"\"}}\nseeds: [1]\narms: [{name: a}]\n"
	writeFile(t, file, good+"armz: []\n")
	writeFile(t, filepath.Join(tmp, "good.yaml"), good)
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-c", file, "--out", filepath.Join(tmp, "out")}, 1, "armz: unknown key"},
		{[]string{"-c", filepath.Join(tmp, "good.yaml"), "--out", filepath.Join(tmp, "out"), "--only", "b"}, 1, "--only b: no such arm"},
		{[]string{"--out", tmp}, 2, "-c BENCH.yaml is required"},
		{[]string{"-c", file, "--jobs", "0"}, 2, "--jobs must be >= 1"},
		{[]string{"-c", filepath.Join(tmp, "missing.yaml")}, 1, "missing.yaml"},
	}
	for _, c := range cases {
		out, err := exec.Command(cdeRun, append([]string{"bench"}, c.args...)...).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != c.code || !strings.Contains(string(out), c.want) {
			t.Errorf("cde-run bench %s: %v (want exit %d naming %q)\n%s", strings.Join(c.args, " "), err, c.code, c.want, out)
		}
	}
	if out, err := exec.Command(cdeRun, "bench", "--help").CombinedOutput(); err != nil || !strings.Contains(string(out), "usage: cde-run bench") {
		t.Fatalf("bench --help: %v\n%s", err, out)
	}
}

// An absolute --out inside the working directory is recorded relative to
// it: the arm-seeds' configs (pretrain.dir, the base policy the bench
// resolved) and the report hold no absolute path of the machine (they
// held /tmp/.../o/base before).
func TestBenchOutInsideWorkdirIsRelative(t *testing.T) {
	wd := t.TempDir()
	writeFile(t, filepath.Join(wd, "b.yaml"), `description: paths
base:
  train: {steps: 1, prompts_per_step: 2, checkpoint_every: 1}
  rollout: {n: 2, max_response_tokens: 8}
  eval: {every: 0, k: 1, max_problems: 4}
seeds: [1]
arms:
  - name: a
`)
	cmd := exec.Command(cdeRun, "bench", "-c", "b.yaml", "--out", filepath.Join(wd, "o"))
	cmd.Dir = wd
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	cfg, err := os.ReadFile(filepath.Join(wd, "o", "runs", "a", "seed-1", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"checkpoint: o/base/", "dir: o/base\n"} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("config.yaml lacks %q:\n%s", want, cfg)
		}
	}
	err = filepath.WalkDir(filepath.Join(wd, "o"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !slices.Contains([]string{".yaml", ".md", ".txt", ".json", ".jsonl", ".csv"}, filepath.Ext(path)) {
			return err
		}
		b, err := os.ReadFile(path)
		if err == nil && strings.Contains(string(b), wd) {
			t.Errorf("%s names the absolute path %s", path, wd)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// bench --plan on the committed paper-countdown runs: with the pilot's own
// 5 seeds the planned MDE equals the current one and the report's Power
// table; with 20 seeds it is smaller wherever seeds carry variance.
func TestBenchPlan(t *testing.T) {
	dir := resultstest.Unpack(t, filepath.Join("..", "..", "docs", "results", "paper-countdown"))
	run := func(n string) map[string][]string {
		out, err := exec.Command(cdeRun, "bench", "-c", "paper-countdown", "--out", dir, "--plan", n).Output()
		if err != nil {
			t.Fatalf("--plan %s: %v\n%s", n, err, out)
		}
		rows := map[string][]string{}
		for _, l := range strings.Split(string(out), "\n") {
			f := strings.Split(l, " | ")
			if len(f) == 9 && strings.HasPrefix(l, "| ") && !strings.HasPrefix(l, "| claim") {
				rows[strings.TrimPrefix(f[0], "| ")] = f
			}
		}
		return rows
	}
	five, twenty := run("5"), run("20")
	const claim = "Staircase beats no decay (avg@64)"
	// The committed report's Power row for the claim: its MDE column.
	report, err := os.ReadFile(filepath.Join(dir, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	mde := ""
	for _, l := range strings.Split(string(report), "\n") {
		if f := strings.Split(l, " | "); len(f) == 11 && f[0] == "| "+claim {
			mde = f[5]
		}
	}
	if len(five) != 19 || five[claim][3] != five[claim][4] || mde == "" || five[claim][3] != mde {
		t.Fatalf("--plan 5: %d rows; %q; the report's MDE %q", len(five), five[claim], mde)
	}
	now, _ := strconv.ParseFloat(twenty[claim][3], 64)
	planned, _ := strconv.ParseFloat(twenty[claim][4], 64)
	if !(planned < now) || twenty[claim][5] != "0.024" || twenty[claim][6] != "3" {
		t.Errorf("--plan 20: %q", twenty[claim])
	}
	if out, err := exec.Command(cdeRun, "bench", "-c", "paper-countdown", "--out", dir, "--plan", "-2").CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "--plan -2: want a number of seeds >= 1") {
		t.Errorf("--plan -2: %v\n%s", err, out)
	}
}
