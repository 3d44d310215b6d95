package bench

import (
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/plot/vg/draw"
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

// The calibration line is PPL(incorrect)/PPL(correct) per row; the
// held-out line starts at the base's step-0 value of the same seed, and an
// arm at 0 after the base is left out.
func TestSeedBandOfBaseAndRatio(t *testing.T) {
	rows := func(vals ...[3]float64) []map[string]float64 {
		var out []map[string]float64
		for _, v := range vals {
			out = append(out, map[string]float64{"step": v[0], "calib/ppl_incorrect": v[1], "calib/ppl_correct": v[2]})
		}
		return out
	}
	rs := []*armRun{
		{Seed: 1, Rows: rows([3]float64{1, 3, 2}, [3]float64{2, 4, 2})},
		{Seed: 2, Rows: rows([3]float64{1, 1, 1}, [3]float64{2, 6, 2})},
	}
	b := seedBandOf(rs, ratioValue("calib/ppl_incorrect", "calib/ppl_correct"), 1, false, nil)
	// step 1: 1.5 and 1; step 2: 2 and 3.
	if !slices.Equal(b.X, []float64{1, 2}) || !slices.Equal(b.Mean, []float64{1.25, 2.5}) || !slices.Equal(b.Lo, []float64{1, 2}) || !slices.Equal(b.Hi, []float64{1.5, 3}) {
		t.Errorf("ratio band %+v", b)
	}
	base := func(seed uint64) (float64, bool) { return float64(seed) / 10, true }
	b = seedBandOf(rs, metricValue("calib/ppl_correct"), 1, false, base)
	if !slices.Equal(b.X, []float64{0, 1, 2}) || math.Abs(b.Mean[0]-0.15) > 1e-15 || b.Lo[0] != 0.1 || b.Hi[0] != 0.2 {
		t.Errorf("band with base %+v", b)
	}
	for _, c := range []struct {
		b    band
		want bool
	}{
		{band{X: []float64{0, 100, 200}, Lo: []float64{0.09, 0, 0}, Hi: []float64{0.09, 0, 0}}, true},
		{band{X: []float64{0, 100, 200}, Lo: []float64{0.09, 0, 0}, Hi: []float64{0.09, 0.01, 0}}, false},
		{band{X: []float64{0}, Lo: []float64{0}, Hi: []float64{0}}, false},
	} {
		if got := allZeroAfterBase(c.b); got != c.want {
			t.Errorf("allZeroAfterBase(%+v) = %v", c.b, got)
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
	want := "| ppl | 2 | 2 ± 0 | 60.0 ± 14.1 | 50.0-70.0 | 60.0 ± 14.1 |"
	if !strings.Contains(b.String(), want) || strings.Contains(b.String(), "| grpo |") {
		t.Errorf("section lacks %q or has a grpo row:\n%s", want, b.String())
	}
	b.Reset()
	writePPLCapSection(&b, map[string][]*armRun{"grpo": runs["grpo"]}, []string{"grpo"})
	if b.Len() != 0 {
		t.Errorf("a section without any PPL arm: %q", b.String())
	}
}

// Every tick label says exactly where its tick is, and no two are equal:
// over many axis ranges, a label read back is its tick's value.
func TestReadableTicksSayWhere(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	ranges := [][2]float64{{0.36, 0.64}, {0.93, 1.82}, {0, 1}, {-1, 1}, {1e-3, 2e-3}}
	for range 500 {
		lo := rng.Float64()*4 - 2
		ranges = append(ranges, [2]float64{lo, lo + math.Pow(10, rng.Float64()*4-3)})
	}
	for _, r := range ranges {
		seen := map[string]bool{}
		for _, tk := range (readableTicks{}).Ticks(r[0], r[1]) {
			if tk.Label == "" {
				continue
			}
			back, err := strconv.ParseFloat(tk.Label, 64)
			if err != nil || math.Abs(back-tk.Value) > 1e-9*math.Max(1, math.Abs(tk.Value)) {
				t.Fatalf("range %v: tick at %v labelled %q", r, tk.Value, tk.Label)
			}
			if seen[tk.Label] {
				t.Fatalf("range %v: label %q twice", r, tk.Label)
			}
			seen[tk.Label] = true
		}
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
	b := seedBandAt([]*armRun{r}, metricValue("val/mean/avg@4"), 1, false, base, samplesX)
	if !slices.Equal(b.X, []float64{0, 24}) || !slices.Equal(b.Mean, []float64{0.3, 0.5}) {
		t.Errorf("held-out band on samples %+v, want x 0 24, y 0.3 0.5", b)
	}
}

// Two seeds of a dynamic-sampling arm generate different numbers: seed 1
// steps of 4, 12, 8 responses (x 0, 4, 16), seed 2 of 8, 4, 4 (x 0, 8,
// 12). By step, the band's x is the seeds' mean, 0, 6, 14, and its y the
// mean and range of entropies (1, .9), (.8, .7), (.6, .5): 0.95, 0.75,
// 0.55. A third seed without the total is left out on the samples axis,
// kept on the step axis.
func TestSeedBandOnSamples(t *testing.T) {
	e := "rollout/entropy"
	rs := []*armRun{
		{Seed: 1, Rows: []map[string]float64{genRow(0, 4, 4, e, 1.0), genRow(1, 12, 16, e, 0.8), genRow(2, 8, 24, e, 0.6)}},
		{Seed: 2, Rows: []map[string]float64{genRow(0, 8, 8, e, 0.9), genRow(1, 4, 12, e, 0.7), genRow(2, 4, 16, e, 0.5)}},
		{Seed: 3, Rows: []map[string]float64{{"step": 0, e: 5}, {"step": 1, e: 5}, {"step": 2, e: 5}}},
	}
	b := seedBandAt(rs, metricValue(e), 1, false, nil, samplesX)
	near := func(got, want []float64) bool {
		if len(got) != len(want) {
			return false
		}
		for i := range got {
			if math.Abs(got[i]-want[i]) > 1e-12 {
				return false
			}
		}
		return true
	}
	if !slices.Equal(b.X, []float64{0, 6, 14}) || !near(b.Mean, []float64{0.95, 0.75, 0.55}) ||
		!near(b.Lo, []float64{0.9, 0.7, 0.5}) || !near(b.Hi, []float64{1, 0.8, 0.6}) {
		t.Errorf("band on samples %+v", b)
	}
	b = seedBandOf(rs, metricValue(e), 1, false, nil)
	if !slices.Equal(b.X, []float64{0, 1, 2}) || b.Hi[0] != 5 {
		t.Errorf("band on steps %+v: want every seed, x 0 1 2", b)
	}
}

// writePlots draws entropy and held-out accuracy against the responses
// generated beside the per-step figures, names an arm whose runs predate
// the total, and says so when no arm logs it.
func TestWritePlotsSamples(t *testing.T) {
	e, v := "rollout/entropy", "val/mean/avg@4"
	run := func(seed uint64, gens ...float64) *armRun {
		var rows []map[string]float64
		total := 0.0
		for i, g := range gens {
			total += g
			rows = append(rows, genRow(float64(i), g, total, e, 1-0.1*float64(i), v, 0.2+0.1*float64(i)))
		}
		rows = append(rows, map[string]float64{"step": float64(len(gens)), v: 0.6})
		return &armRun{Seed: seed, Rows: rows}
	}
	old := &armRun{Seed: 1, Rows: []map[string]float64{{"step": 0, e: 0.9, v: 0.2}, {"step": 1, e: 0.8}, {"step": 2, v: 0.3}}}
	runs := map[string][]*armRun{
		"grpo": {run(1, 4, 4, 4), run(2, 4, 4, 4)},
		"dapo": {run(1, 8, 12, 4), run(2, 4, 8, 8)},
		"old":  {old},
	}
	arms := []string{"grpo", "dapo", "old"}
	dir := t.TempDir()
	notes, err := writePlots(&Spec{}, runs, arms, []family{{Name: "critic-free", Arms: arms}}, dir)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(notes, "\n")
	for _, f := range []string{"entropy", "entropy_samples", "heldout_accuracy", "heldout_accuracy_samples"} {
		for _, ext := range []string{".png", ".svg"} {
			if st, err := os.Stat(filepath.Join(dir, f+ext)); err != nil || st.Size() == 0 {
				t.Errorf("plot %s%s: %v", f, ext, err)
			}
		}
		if !strings.Contains(all, "(plots/"+f+".svg)") {
			t.Errorf("notes do not show %s:\n%s", f, all)
		}
	}
	if want := "Not drawn, no " + GeneratedTotalMetric + " in their runs (made before the metric): old."; strings.Count(all, want) != 2 {
		t.Errorf("notes do not name the arm without the total in both samples figures (%q):\n%s", want, all)
	}
	notes, err = writePlots(&Spec{}, map[string][]*armRun{"old": {old}}, []string{"old"}, []family{{Name: "critic-free", Arms: []string{"old"}}}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	all = strings.Join(notes, "\n")
	if strings.Contains(all, GeneratedTotalMetric) || strings.Contains(all, "entropy_samples.svg") || !strings.Contains(all, "(plots/entropy.svg)") {
		t.Errorf("a bench from before the total: want the per-step entropy only, and no note on the samples figures:\n%s", all)
	}
}

// plotTestRuns are runs of arms with every metric the figures draw:
// entropy, calibration, AUROC, held-out avg@4 and pass@1, 2, 4 on eval sets
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
					"calib/ppl_incorrect": 1.3 + off, "calib/ppl_correct": 1, "calib/auroc": 0.6 + off}
				if step%4 == 0 {
					acc := 0.1 + off + 0.01*float64(step)
					if zero[a] {
						acc = 0
					}
					row["val/mean/avg@4"] = acc
					for _, set := range []string{"mean", "a", "b", "c"} {
						for k := 1; k <= 4; k *= 2 {
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

func sameLine(a, b draw.LineStyle) bool {
	r1, g1, b1, a1 := a.Color.RGBA()
	r2, g2, b2, a2 := b.Color.RGBA()
	return r1 == r2 && g1 == g2 && b1 == b2 && a1 == a2 && a.Width == b.Width && slices.Equal(a.Dashes, b.Dashes)
}

// Up to maxDistinctArms (24) arms, no two share colour and line style, and
// none is the base policy's black; every figure of a report draws an arm
// in the same look, its report-wide one.
func TestPlotArmLooksDistinctAndStable(t *testing.T) {
	if maxDistinctArms < 24 {
		t.Fatalf("%d distinct looks, want at least 24", maxDistinctArms)
	}
	var arms []string
	for i := range maxDistinctArms {
		arms = append(arms, "arm"+strconv.Itoa(i))
	}
	st := plotStyle{}
	for i, a := range arms {
		st[a] = i
	}
	base := st.line(BaseArm)
	if r, g, b, _ := base.Color.RGBA(); r|g|b != 0 || len(base.Dashes) != 0 {
		t.Errorf("the base policy's line %+v, want solid black", base)
	}
	for i, a := range arms {
		if sameLine(st.line(a), base) {
			t.Errorf("%s looks like the base policy", a)
		}
		for _, b := range arms[:i] {
			if sameLine(st.line(a), st.line(b)) {
				t.Errorf("%s and %s share colour and line style %+v", a, b, st.line(a))
			}
		}
	}
	runs := plotTestRuns(arms, nil)
	runs[BaseArm] = runs[arms[0]]
	families := []family{{Name: "critic-free", Arms: arms[:15]}, {Name: "with a critic", Critic: true, Arms: arms[15:]}}
	figs, err := makeFigures(&Spec{BaseEval: true}, runs, arms, families)
	if err != nil {
		t.Fatal(err)
	}
	drawnIn := map[string]int{}
	for _, f := range figs {
		if len(f.Plots) == 0 {
			continue
		}
		for a, d := range f.Drawn {
			drawnIn[a]++
			for _, l := range d.Lines {
				if !sameLine(l, st.line(a)) {
					t.Errorf("figure %s draws %s as %+v, want its look %+v", f.Name, a, l, st.line(a))
				}
			}
			for _, g := range d.Glyphs {
				if g != st.glyph(a) {
					t.Errorf("figure %s marks %s with %+v, want %+v", f.Name, a, g, st.glyph(a))
				}
			}
		}
		if len(f.Legend) != len(f.Drawn) {
			t.Errorf("figure %s: %d legend entries for %d arms drawn", f.Name, len(f.Legend), len(f.Drawn))
		}
	}
	for _, a := range arms {
		// heldout, entropy, calibration, AUROC, one pass@k figure.
		if drawnIn[a] != 5 {
			t.Errorf("%s drawn in %d figures, want 5", a, drawnIn[a])
		}
	}
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
		"rollout/entropy":    "policy entropy (nats/token)",
		"step":               "training step",
		GeneratedTotalMetric: "responses generated",
		"calib/ppl_incorrect / calib/ppl_correct": "calibration ratio PPL(incorrect) / PPL(correct)",
		"some/new_metric":                         "some/new_metric",
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

// An accuracy's axis is [0, 1] whatever its values, all 0 included (not
// gonum's -1 to 1); so is a non-negative metric that is 0 everywhere.
func TestPlotAccuracyAxisIsUnit(t *testing.T) {
	zero := map[string]bool{"z1": true, "z2": true}
	runs := plotTestRuns([]string{"z1", "z2", "live"}, zero)
	for _, c := range []struct {
		arms   []string
		metric string
		unit   bool
	}{
		{[]string{"z1", "z2"}, "val/mean/avg@4", true},
		{[]string{"live"}, "val/mean/avg@4", true},
		{[]string{"z1", "z2"}, "calib/zero", false},
	} {
		ps := panelSpec{YLabel: axisLabel(c.metric), Unit: c.unit, SkipZero: true}
		for _, a := range c.arms {
			for _, r := range runs[a] {
				for _, row := range r.Rows {
					row["calib/zero"] = 0
				}
			}
			ps.Lines = append(ps.Lines, series{Arm: a, Metric: c.metric})
		}
		var skipped []string
		p, ok, err := drawPanel(ps, runs, plotStyle{}, map[string]*drawnArm{}, &skipped)
		if err != nil || !ok {
			t.Fatalf("%v %s: drawn %v, %v", c.arms, c.metric, ok, err)
		}
		if p.Y.Min != 0 || p.Y.Max != 1 {
			t.Errorf("%v %s: y axis [%v, %v], want [0, 1]", c.arms, c.metric, p.Y.Min, p.Y.Max)
		}
	}
	runs = plotTestRuns([]string{"grpo"}, nil)
	ps := panelSpec{PassK: true, Set: "mean", Unit: true, Lines: []series{{Arm: "grpo"}}}
	if p, ok, err := drawPanel(ps, runs, plotStyle{}, map[string]*drawnArm{}, new([]string)); err != nil || !ok || p.Y.Min != 0 || p.Y.Max != 1 {
		t.Errorf("pass@k panel: drawn %v (%v), want a y axis [0, 1]", ok, err)
	}
}

// Every figure written is at most twice as wide as it is tall: one panel,
// two, and four pass@k panels with 24 arms in the legend.
func TestPlotFiguresAtMostTwoToOne(t *testing.T) {
	for _, n := range []int{1, 3, 24} {
		var arms []string
		for i := range n {
			arms = append(arms, "grpo_arm_"+strconv.Itoa(i))
		}
		runs := plotTestRuns(arms, nil)
		runs[BaseArm] = runs[arms[0]]
		families := []family{{Name: "critic-free", Arms: arms[:(n+1)/2]}}
		if n > 1 {
			families = append(families, family{Name: "with a critic", Critic: true, Arms: arms[(n+1)/2:]})
		}
		dir := t.TempDir()
		if _, err := writePlots(&Spec{BaseEval: true}, runs, arms, families, dir); err != nil {
			t.Fatal(err)
		}
		pngs, _ := filepath.Glob(filepath.Join(dir, "*.png"))
		if len(pngs) < 5 {
			t.Fatalf("%d arms: %d figures written", n, len(pngs))
		}
		for _, f := range pngs {
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
				t.Errorf("%d arms: %s is %dx%d, wider than 2:1", n, filepath.Base(f), cfg.Width, cfg.Height)
			}
		}
	}
}
