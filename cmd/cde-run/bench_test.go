package main

import (
	"encoding/csv"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBenchSmoke runs bench/smoke.yaml end to end (two arm-seeds at a
// time), then again (nothing is
// rerun), then with one DONE marker removed (that arm-seed resumes from its
// checkpoint), then --report-only.
func TestBenchSmoke(t *testing.T) {
	out := filepath.Join(t.TempDir(), "smoke")
	bench := filepath.Join("..", "..", "bench", "smoke.yaml")
	log := run(t, "bench", "-c", bench, "--out", out, "--jobs", "2")
	for _, want := range []string{"grpo_simhash seed 1: starting", "ppo_mh_ppl seed 1: finished", "ETA", "[ppo_mh_ppl seed 1] "} {
		if !strings.Contains(log, want) {
			t.Errorf("bench log lacks %q:\n%s", want, log)
		}
	}
	for _, f := range []string{"results.md", "results.csv"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"heldout_accuracy", "entropy", "calibration", "critic_head_std", "simhash_cells"} {
		for _, ext := range []string{".png", ".svg"} {
			if st, err := os.Stat(filepath.Join(out, "plots", p+ext)); err != nil || st.Size() == 0 {
				t.Errorf("plot %s%s: %v", p, ext, err)
			}
		}
	}
	f, err := os.Open(filepath.Join(out, "results.csv"))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 || recs[1][0] != "grpo_simhash" || recs[2][0] != "ppo_mh_ppl" {
		t.Fatalf("results.csv: want a header and one row per arm, got %v", recs)
	}
	for _, col := range []string{"val/l1/avg@2_mean", "val/l2/pass@2_std", "val/ood/avg@2_mean", "val/mean/avg@2_mean", "train/acc_mean", "wall_s_mean"} {
		if !contains(recs[0], col) {
			t.Errorf("results.csv lacks column %s: %v", col, recs[0])
		}
	}
	md, _ := os.ReadFile(filepath.Join(out, "results.md"))
	for _, want := range []string{"| grpo_simhash | 1 |", "ood Pass@2", "## Claims", "PPO + multi-head + PPL beats GRPO + SimHash",
		"## Critic head std by prompt set", "| ppo_mh_ppl | 2 |", "plots/heldout_accuracy.png"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("results.md lacks %q:\n%s", want, md)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "runs", "ppo_mh_ppl", "seed-1", headStdFile)); err != nil {
		t.Errorf("no critic head std measurement for the multi-head arm: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "runs", "grpo_simhash", "seed-1", headStdFile)); err == nil {
		t.Errorf("critic head std measured for an arm without a critic")
	}

	// A second run reruns nothing.
	done := map[string]time.Time{}
	for _, arm := range []string{"grpo_simhash", "ppo_mh_ppl"} {
		st, err := os.Stat(filepath.Join(out, "runs", arm, "seed-1", doneFile))
		if err != nil {
			t.Fatal(err)
		}
		done[arm] = st.ModTime()
	}
	log = run(t, "bench", "-c", bench, "--out", out)
	if strings.Count(log, "done, skipping") != 2 || strings.Contains(log, "starting") {
		t.Fatalf("second bench run did not skip both finished arm-seeds:\n%s", log)
	}
	for arm, mt := range done {
		st, _ := os.Stat(filepath.Join(out, "runs", arm, "seed-1", doneFile))
		if !st.ModTime().Equal(mt) {
			t.Errorf("%s: DONE rewritten by the second run", arm)
		}
	}

	// An unfinished arm-seed with a checkpoint resumes instead of restarting.
	os.Remove(filepath.Join(out, "runs", "ppo_mh_ppl", "seed-1", doneFile))
	log = run(t, "bench", "-c", bench, "--out", out, "--only", "ppo_mh_ppl")
	if !strings.Contains(log, "ppo_mh_ppl seed 1: resuming from") || !strings.Contains(log, "bench [1/1] ppo_mh_ppl seed 1: finished") {
		t.Fatalf("did not resume the unfinished arm-seed:\n%s", log)
	}
	if rows := readMetrics(t, filepath.Join(out, "runs", "ppo_mh_ppl", "seed-1", "metrics.jsonl")); len(rows) != 5 {
		t.Errorf("resumed run has %d metric lines, want 5 (steps 0..3 and the final eval)", len(rows))
	}

	os.Remove(filepath.Join(out, "results.md"))
	log = run(t, "bench", "-c", bench, "--out", out, "--report-only")
	if strings.Contains(log, "starting") {
		t.Fatalf("--report-only trained:\n%s", log)
	}
	if _, err := os.Stat(filepath.Join(out, "results.md")); err != nil {
		t.Fatal(err)
	}

	// A changed arm config is refused rather than mixed with old results.
	changed := filepath.Join(t.TempDir(), "smoke.yaml")
	data, _ := os.ReadFile(bench)
	writeFile(t, changed, strings.Replace(string(data), "bits: 8", "bits: 12", 1))
	cmd := exec.Command(cdeRun, "bench", "-c", changed, "--out", out)
	if o, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(o), "changed since this run was made") {
		t.Fatalf("a changed arm config was not refused (%v):\n%s", err, o)
	}
}

// TestBenchConfigErrors checks that bench file errors name the key.
func TestBenchConfigErrors(t *testing.T) {
	tmp := t.TempDir()
	base := "base: {task: {name: arith, levels: [1]}, model: {checkpoint: \"\"}}\nseeds: [1]\n"
	arms := "arms: [{name: a}, {name: b, config: {algorithm: {name: ppo}}}]\n"
	cases := []struct{ name, yaml, want string }{
		{"unknown top key", base + arms + "armz: []\n", "armz: unknown key"},
		{"unknown arm key", base + "arms: [{name: a, confg: {}}]\n", "arms[0].confg: unknown key"},
		{"bad arm name", base + "arms: [{name: \"a/b\"}]\n", "arms[0].name"},
		{"duplicate arm", base + "arms: [{name: a}, {name: a}]\n", "arms[1].name"},
		{"bad config key in arm", base + "arms: [{name: a, config: {train: {stepz: 3}}}]\n", "train.stepz"},
		{"bad strategy key in arm", base + "arms: [{name: a, config: {strategies: [{name: ppl, kapa: 1}]}}]\n", "strategies[0].kapa"},
		{"bad base key", "base: {trian: {}}\nseeds: [1]\n" + arms, "trian"},
		{"no seeds", "base: {}\n" + arms, "seeds"},
		{"bad seed", "base: {}\nseeds: [x]\n" + arms, "seeds[0]"},
		{"claim unknown arm", base + arms + "claims: [{name: c, better: a, than: z, metric: m}]\n", "claims[0].than"},
		{"claim unknown key", base + arms + "claims: [{name: c, better: a, than: b, metric: m, lower: true}]\n", "claims[0].lower"},
		{"claim missing metric", base + arms + "claims: [{name: c, better: a, than: b}]\n", "claims[0].metric"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(tmp, "bad.yaml")
			writeFile(t, file, c.yaml)
			spec, err := loadBenchSpec(file)
			if err == nil {
				err = validateBench(spec, filepath.Join(tmp, "out"))
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v does not name %q", err, c.want)
			}
		})
	}
	// Through the CLI: the message names the key and the exit status is 1.
	file := filepath.Join(tmp, "bad.yaml")
	writeFile(t, file, base+arms+"armz: []\n")
	out, err := exec.Command(cdeRun, "bench", "-c", file, "--out", filepath.Join(tmp, "out")).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "armz") {
		t.Fatalf("cde-run bench on a bad file: %v\n%s", err, out)
	}
	if out, err := exec.Command(cdeRun, "bench", "--help").CombinedOutput(); err != nil || !strings.Contains(string(out), "usage: cde-run bench") {
		t.Fatalf("bench --help: %v\n%s", err, out)
	}
}

// TestBenchPresetsValidate checks that every preset in bench/ parses and
// that every arm-seed config is valid.
func TestBenchPresetsValidate(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "bench", "*.yaml"))
	if len(files) < 2 {
		t.Fatalf("presets: %v", files)
	}
	for _, f := range files {
		spec, err := loadBenchSpec(f)
		if err == nil {
			err = validateBench(spec, t.TempDir())
		}
		if err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestMeanStd(t *testing.T) {
	cases := []struct {
		xs        []float64
		mean, std float64
	}{
		{[]float64{1, 2, 3, 4}, 2.5, math.Sqrt(5.0 / 3)}, // squares 2.25+0.25+0.25+2.25 = 5, n-1 = 3
		{[]float64{0.2, 0.4}, 0.3, math.Sqrt(0.02)},      // (0.01+0.01)/1
		{[]float64{7}, 7, 0},
	}
	for _, c := range cases {
		m, s := meanStd(c.xs)
		if math.Abs(m-c.mean) > 1e-12 || math.Abs(s-c.std) > 1e-12 {
			t.Errorf("meanStd(%v) = %v, %v; want %v, %v", c.xs, m, s, c.mean, c.std)
		}
	}
	if m, s := meanStd(nil); !math.IsNaN(m) || !math.IsNaN(s) {
		t.Errorf("meanStd(nil) = %v, %v; want NaN", m, s)
	}
	if got := fmtPM([]float64{0.5}, 100, 1); got != "50.0 ± 0" {
		t.Errorf("fmtPM one seed = %q", got)
	}
	if got := fmtPM([]float64{0.2, 0.4}, 100, 1); got != "30.0 ± 14.1" {
		t.Errorf("fmtPM = %q", got)
	}
}

func TestJudgeClaim(t *testing.T) {
	// a = [0.5 0.6 0.7], b = [0.2 0.3 0.4]: means 0.6, 0.3; sample stds 0.1;
	// d = 0.3; SE = sqrt(0.01/3 + 0.01/3) = 0.08165; 2 SE = 0.1633 < d.
	r := judgeClaim([]float64{0.5, 0.6, 0.7}, []float64{0.2, 0.3, 0.4}, false)
	if r.Verdict != verdictHeld || math.Abs(r.Diff-0.3) > 1e-12 || math.Abs(r.SE-math.Sqrt(0.02/3)) > 1e-12 {
		t.Errorf("clear win: %+v", r)
	}
	// b = [0.4 0.5 0.6]: d = 0.1 < 2 SE = 0.1633: inconclusive.
	if r := judgeClaim([]float64{0.5, 0.6, 0.7}, []float64{0.4, 0.5, 0.6}, false); r.Verdict != verdictInconclusive {
		t.Errorf("within spread: %+v", r)
	}
	// Reversed: b better by 0.3 > 2 SE.
	if r := judgeClaim([]float64{0.2, 0.3, 0.4}, []float64{0.5, 0.6, 0.7}, false); r.Verdict != verdictNotHeld || !strings.Contains(r.Why, "other arm") {
		t.Errorf("reversed: %+v", r)
	}
	// Slightly worse, within noise: still did not hold (no improvement).
	if r := judgeClaim([]float64{0.45, 0.55, 0.65}, []float64{0.5, 0.6, 0.7}, false); r.Verdict != verdictNotHeld || r.Why != "no improvement" {
		t.Errorf("slightly worse: %+v", r)
	}
	// Lower is better: perplexities 2, 3, 4 vs 5, 6, 7: d = 3 > 2 SE = 2*sqrt(2/3) = 1.633.
	if r := judgeClaim([]float64{2, 3, 4}, []float64{5, 6, 7}, true); r.Verdict != verdictHeld || math.Abs(r.Diff-3) > 1e-12 {
		t.Errorf("lower is better: %+v", r)
	}
	if r := judgeClaim([]float64{5, 6, 7}, []float64{2, 3, 4}, true); r.Verdict != verdictNotHeld {
		t.Errorf("lower is better, reversed: %+v", r)
	}
	// One seed: a win is inconclusive, a loss did not hold.
	if r := judgeClaim([]float64{0.9}, []float64{0.1}, false); r.Verdict != verdictInconclusive {
		t.Errorf("one seed win: %+v", r)
	}
	if r := judgeClaim([]float64{0.1}, []float64{0.9}, false); r.Verdict != verdictNotHeld {
		t.Errorf("one seed loss: %+v", r)
	}
	if r := judgeClaim(nil, []float64{0.9, 0.8}, false); r.Verdict != verdictInconclusive || !strings.Contains(r.Why, "missing") {
		t.Errorf("missing metric: %+v", r)
	}
}
