package bench

import (
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Worked by hand. Window 3 (2 at the ends): the spike 100 is never the
// median of its window. Window 5 over (4, 1, 3, 2): the windows are
// (4, 1, 3), all four, all four, (1, 3, 2): medians 3, 2.5, 2.5, 2.
func TestRollingMedian(t *testing.T) {
	for _, c := range []struct {
		ys   []float64
		w    int
		want []float64
	}{
		{[]float64{1, 2, 100, 3, 4}, 3, []float64{1.5, 2, 3, 4, 3.5}},
		{[]float64{5, 1, 3}, 1, []float64{5, 1, 3}},
		{[]float64{4, 1, 3, 2}, 5, []float64{3, 2.5, 2.5, 2}},
	} {
		if got := rollingMedian(c.ys, c.w); !slices.Equal(got, c.want) {
			t.Errorf("rollingMedian(%v, %d) = %v, want %v", c.ys, c.w, got, c.want)
		}
	}
}

// The cap's binding fraction, worked by hand. Seed 1: steps 50, 100, 150
// with clip_frac 0.6, 0.8, 0.2 and weight 1, 1, 0: on-steps mean 0.7,
// steps 1-100 mean 0.7. Seed 2: 0.4, 0.6, 0.9 with weight 1, 1, 0: 0.5
// and 0.5. Mean over seeds 60.0, std (n-1) sqrt(0.02) = 14.1 points,
// range 50.0-70.0. An arm without the metric has no row.
func TestPPLCapSection(t *testing.T) {
	mk := func(seed uint64, f [3]float64) *armRun {
		var rows []map[string]float64
		for i, w := range []float64{1, 1, 0} {
			rows = append(rows, map[string]float64{"step": float64(50 * (i + 1)), "explore/ppl/clip_frac": f[i], "explore/ppl/weight": w})
		}
		return &armRun{Seed: seed, Rows: rows}
	}
	runs := map[string][]*armRun{"ppl": {mk(1, [3]float64{0.6, 0.8, 0.2}), mk(2, [3]float64{0.4, 0.6, 0.9})},
		"grpo": {{Seed: 1, Rows: []map[string]float64{{"step": 1, "reward/acc": 0.5}}}}}
	var b strings.Builder
	writePPLCapSection(&b, runs, []string{"grpo", "ppl"})
	// Seed 1: (0.6 + 0.8)/2 = 0.7 on its two steps with the bonus on, seed
	// 2: (0.4 + 0.6)/2 = 0.5; over seeds 0.6 ± 0.1414 (n-1), range
	// 0.5-0.7; steps 1-100 are the same two steps.
	want := "| ppl | 2 | 2 ± 0 | 0.600 ± 0.141 | 0.500-0.700 | 0.600 ± 0.141 |"
	if !strings.Contains(b.String(), want) || strings.Contains(b.String(), "| grpo |") {
		t.Errorf("section lacks %q or has a grpo row:\n%s", want, b.String())
	}
	b.Reset()
	writePPLCapSection(&b, map[string][]*armRun{"grpo": runs["grpo"]}, []string{"grpo"})
	if b.Len() != 0 {
		t.Errorf("a section without any PPL arm: %q", b.String())
	}
}

// genRow is a training row of step with gen responses generated in it
// (total up to it) and more metrics.
func genRow(step, gen, total float64, kv ...any) map[string]float64 {
	row := map[string]float64{"step": step, GeneratedMetric: gen, GeneratedTotalMetric: total}
	for i := 0; i < len(kv); i += 2 {
		row[kv[i].(string)] = kv[i+1].(float64)
	}
	return row
}

// A row's x on the samples axis is what the steps before it generated:
// steps generating 4, 12 and 8 responses sit at 0, 4 and 16, and the
// final evaluation (step 3, no training metrics) at 24. A run that does not
// log the total has no samples axis. With the base value of its seed
// (0.3) the held-out line starts at x = 0.
func TestSamplesX(t *testing.T) {
	r := &armRun{Seed: 1, Rows: []map[string]float64{
		genRow(0, 4, 4), genRow(1, 12, 16), genRow(2, 8, 24), {"step": 3, "val/mean/avg@4": 0.5},
	}}
	if got := samplesX(r); !slices.Equal(got, []float64{0, 4, 16, 24}) {
		t.Errorf("samplesX = %v, want 0 4 16 24", got)
	}
	if got := stepX(r); !slices.Equal(got, []float64{0, 1, 2, 3}) {
		t.Errorf("stepX = %v", got)
	}
	if got := samplesX(&armRun{Rows: []map[string]float64{{"step": 0, "rollout/entropy": 1}}}); got != nil {
		t.Errorf("a run without %s: samplesX = %v, want nil", GeneratedTotalMetric, got)
	}
	base := func(seed uint64) (float64, bool) { return 0.3, true }
	mean, seeds := armLine([]*armRun{r}, samplesX, metricValue("val/mean/avg@4"), 1, false, base)
	if want := []xy{{0, 0.3}, {24, 0.5}}; !slices.Equal(mean, want) || len(seeds) != 1 || !slices.Equal(seeds[0], want) {
		t.Errorf("held-out line on samples %v (seeds %v), want %v", mean, seeds, want)
	}
}

// plotTestRuns are runs of arms with every metric the figures draw:
// entropy, calibration, AUROC, reward, step times, held-out avg@4 and pass@1, 2, 4, 8 on eval sets
// a, b and c (and their mean), two seeds each; arm i's values are offset
// by i so that every line is its own. zero arms score 0 everywhere.
func plotTestRuns(arms []string, zero map[string]bool) map[string][]*armRun {
	runs := map[string][]*armRun{}
	for i, a := range arms {
		for seed := uint64(1); seed <= 2; seed++ {
			var rows []map[string]float64
			for step := range 12 {
				off := 0.01*float64(i) + 0.005*float64(seed)
				row := map[string]float64{"step": float64(step), "rollout/entropy": 0.5 + off - 0.01*float64(step),
					"calib/ppl_incorrect": 1.3 + off + 0.01*float64(step), "calib/ppl_correct": 1, "calib/auroc": 0.6 + off + 0.01*float64(step),
					"reward/mean": off + 0.02*float64(step), "perf/step_s": 1 + off}
				if step%4 == 0 {
					acc := 0.1 + off + 0.01*float64(step)
					if zero[a] {
						acc = 0
					}
					row["val/mean/avg@4"] = acc
					for _, set := range []string{"mean", "a", "b", "c"} {
						for k := 1; k <= 8; k *= 2 {
							row["val/"+set+"/pass@"+strconv.Itoa(k)] = min(1, acc*float64(k))
						}
					}
				}
				rows = append(rows, row)
			}
			runs[a] = append(runs[a], &armRun{Seed: seed, Rows: rows})
		}
	}
	return runs
}

// Metric keys read as words on an axis; a key it does not know is its own
// label.
func TestPlotAxisLabels(t *testing.T) {
	for key, want := range map[string]string{
		"val/mean/avg@64":    "held-out accuracy (avg@64)",
		"val/c3/avg@16":      "held-out accuracy on c3 (avg@16)",
		"val/mean/pass@k":    "pass@k (mean over eval sets)",
		"val/ood/pass@64":    "pass@64 on ood",
		"val/mean/maj@8":     "majority-vote accuracy (maj@8)",
		"rollout/entropy":    "policy entropy (nats per token)",
		"step":               "training step",
		GeneratedTotalMetric: "responses generated",
		"calib/ppl_incorrect / calib/ppl_correct": "PPL(incorrect) over PPL(correct)",
		"some/new_metric":                         "new metric",
		"val/mean/distinct@256":                   "distinct correct answers (distinct@256)",
	} {
		if got := axisLabel(key); got != want {
			t.Errorf("axisLabel(%q) = %q, want %q", key, got, want)
		}
	}
	for key, want := range map[string]bool{"val/mean/avg@64": true, "val/c3/pass@8": true, "val/mean/maj@4": true,
		"reward/acc": true, "rollout/entropy": false, "calib/auroc": false, "critic/head_std": false} {
		if isAccuracy(key) != want {
			t.Errorf("isAccuracy(%q) = %v", key, !want)
		}
	}
}

// 27 arms each get their own look, none the base policy's black, the same
// in every figure; every figure written is a PNG at most twice as wide as
// tall, shown by its note; the figures pass the figure check.
func TestPlotLooksAndFiles(t *testing.T) {
	var arms []string
	for i := range len(palette) * len(lineDashes) {
		arms = append(arms, "arm"+strconv.Itoa(i))
	}
	looks := armLooks(arms)
	seen := map[look]string{looks[BaseArm]: BaseArm}
	for _, a := range arms {
		if o, ok := seen[looks[a]]; ok {
			t.Errorf("%s and %s share the look %v", a, o, looks[a])
		}
		seen[looks[a]] = a
	}
	if c := looks[BaseArm].colour(); c.R|c.G|c.B != 0 {
		t.Errorf("the base policy is %v, want black", c)
	}
	runs := plotTestRuns(arms[:5], nil)
	runs[BaseArm] = runs[arms[0]]
	fams := []family{{Name: "critic-free", Arms: arms[:3]}, {Name: "with a critic", Critic: true, Arms: arms[3:5]}}
	dir := t.TempDir()
	notes, err := writePlots(&Spec{BaseEval: true}, runs, arms[:5], fams, dir)
	if err != nil {
		t.Fatal(err)
	}
	rf := buildReportFigs(&plotData{spec: &Spec{BaseEval: true}, runs: runs, arms: arms[:5], families: fams})
	if bad := checkFigures(rf.Figs, nil); len(bad) > 0 {
		t.Errorf("figure check: %v", bad)
	}
	pngs, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(pngs) != len(rf.Figs) || len(pngs) < 5 {
		t.Fatalf("%d files written for %d figures", len(pngs), len(rf.Figs))
	}
	all := strings.Join(notes, "\n")
	for _, f := range pngs {
		if !strings.Contains(all, "(plots/"+filepath.Base(f)+")") {
			t.Errorf("no note shows %s", filepath.Base(f))
		}
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := png.DecodeConfig(fh)
		fh.Close()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Width > 2*cfg.Height {
			t.Errorf("%s is %dx%d, wider than 2:1", filepath.Base(f), cfg.Width, cfg.Height)
		}
	}
}
