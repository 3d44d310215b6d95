package bench

import (
	"encoding/json"
	"image"
	"image/color"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cde-rl/cde/internal/resultstest"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// goodFig is a figure the check passes, written by hand: two arms, two
// seeds each, over steps 0-2, ticks at 0, 1, 2 and 0, 0.5, 1.
func goodFig() figSpec {
	line := func(arm string, lk look, off float64) lineSpec {
		s1 := []xy{{0, 0.1 + off}, {1, 0.3 + off}, {2, 0.5 + off}}
		s2 := []xy{{0, 0.3 + off}, {1, 0.5 + off}, {2, 0.7 + off}}
		return lineSpec{Arm: arm, Look: lk, Mean: []xy{{0, 0.2 + off}, {1, 0.4 + off}, {2, 0.6 + off}}, Seeds: [][]xy{s1, s2}}
	}
	return figSpec{Name: "good", XLabel: "training step", XTicks: []float64{0, 1, 2}, YTicks: []float64{0, 0.5, 1},
		Panels: []panelFig{{YLabel: "held-out accuracy (avg@4)", Lines: []lineSpec{line("a", look{0, 0}, 0), line("b", look{1, 0}, 0.1)}}},
		Note:   "Thick line: the mean over seeds; thin lines: each seed (N = 2 seeds per arm); not smoothed."}
}

// Each thing the issue forbids, put into an otherwise good figure, is
// caught, and only it.
func TestFigureCheckCatches(t *testing.T) {
	if bad := checkFigures([]figSpec{goodFig()}, nil); len(bad) > 0 {
		t.Fatalf("a good figure fails: %v", bad)
	}
	cases := map[string]func(f *figSpec, g *figSpec){
		"x value(s)": func(f, _ *figSpec) {
			for i := range f.Panels[0].Lines {
				l := &f.Panels[0].Lines[i]
				l.Mean = l.Mean[2:]
				for j := range l.Seeds {
					l.Seeds[j] = l.Seeds[j][2:]
				}
			}
		},
		"constant series": func(f, _ *figSpec) {
			l := &f.Panels[0].Lines[1]
			l.Mean = []xy{{0, 0}, {1, 0}, {2, 0}}
			l.Seeds = [][]xy{{{0, 0}, {1, 0}, {2, 0}}}
		},
		"y label \"val/mean/avg@4\" is not words":  func(f, _ *figSpec) { f.Panels[0].YLabel = "val/mean/avg@4" },
		"x label \"critic/head_std\" is not words": func(f, _ *figSpec) { f.XLabel = "critic/head_std" },
		"share the look":                  func(f, _ *figSpec) { f.Panels[0].Lines[1].Look = look{0, 0} },
		"elsewhere as":                    func(_, g *figSpec) { g.Panels[0].Lines[0].Look = look{5, 1} },
		"does not say what the lines are": func(f, _ *figSpec) { f.Note = "Lines: the mean over seeds." },
		"are not at round steps":          func(f, _ *figSpec) { f.XTicks = []float64{0, 90, 180} },
		"no per-seed lines":               func(f, _ *figSpec) { f.Panels[0].Lines[0].Seeds = nil },
		"mean ends before its longest seed": func(f, _ *figSpec) {
			f.Panels[0].Lines[0].Seeds[0] = append(f.Panels[0].Lines[0].Seeds[0], xy{3, 0.6})
		},
	}
	for want, spoil := range cases {
		f, g := goodFig(), goodFig()
		g.Name = "second"
		spoil(&f, &g)
		bad := checkFigures([]figSpec{f, g}, nil)
		if len(bad) == 0 || !strings.Contains(strings.Join(bad, "\n"), want) {
			t.Errorf("spoiled by %q: check says %v", want, bad)
		}
	}
	fs := forestSpec{Note: "bar: its 95% interval; marker: the verdict after Holm's correction", Groups: []forestGroup{{
		Title: "pass@1 (mean over eval sets)", XLabel: "effect d on pass@1", XMin: -0.1, XMax: 0.1, XTicks: []float64{-0.1, -0.05, 0, 0.05, 0.1},
		Rows: []forestRow{{Label: "a vs b", D: 0.02, Lo: -0.01, Hi: 0.05, Verdict: "inconclusive"}}}}}
	if bad := checkFigures(nil, &fs); len(bad) > 0 {
		t.Errorf("a good forest fails: %v", bad)
	}
	fs.Groups[0].Rows[0].D = 0.09
	fs.Groups[0].Title = "val/mean/pass@1"
	if bad := checkFigures(nil, &fs); len(bad) != 2 {
		t.Errorf("a forest with a raw title and an effect outside its interval: %v, want 2 problems", bad)
	}
}

// Round ticks, worked by hand: 0-199 steps by 50; 0.089-0.166 by 0.02;
// 0-25,600 responses by 5,000; spacing 90 is not round, 25 is.
func TestRoundTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   []float64
	}{
		{0, 199, []float64{0, 50, 100, 150}},
		{0.089, 0.166, []float64{0.1, 0.12, 0.14, 0.16}},
		{0, 25600, []float64{0, 5000, 10000, 15000, 20000, 25000}},
		{0, 1, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
	} {
		got := roundTicks(c.lo, c.hi, 6)
		if len(got) != len(c.want) {
			t.Errorf("roundTicks(%v, %v) = %v, want %v", c.lo, c.hi, got, c.want)
			continue
		}
		for i := range got {
			if d := got[i] - c.want[i]; d > 1e-12 || d < -1e-12 {
				t.Errorf("roundTicks(%v, %v) = %v, want %v", c.lo, c.hi, got, c.want)
				break
			}
		}
	}
	if roundTickSet([]float64{0, 90, 180}) || !roundTickSet([]float64{0, 25, 50}) || !roundTickSet([]float64{-0.05, 0, 0.05}) {
		t.Error("roundTickSet: want 0/90/180 not round, 0/25/50 and -0.05/0/0.05 round")
	}
	for v, want := range map[float64]string{25000: "25k", 2500: "2.5k", 1.5e6: "1.5M", 0.12: "0.12", 150: "150"} {
		if got := tickLabel(v); got != want {
			t.Errorf("tickLabel(%v) = %q, want %q", v, got, want)
		}
	}
}

// The responses axis of a run without the total counts prompts_per_step
// x rollout.n per batch, (1 + extra_batches) batches a step: batch 8,
// steps 0-2 with 0, 1, 0 extra batches: before step 0 nothing, before
// step 1 8, before step 2 24, after the last step (the evaluation at 3)
// 32. The wall axis is the cumulative perf/step_s before the step.
func TestResponsesAndWallX(t *testing.T) {
	r := &armRun{Arm: "a", Rows: []map[string]float64{
		{"step": 0, "reward/mean": 1, "perf/step_s": 2},
		{"step": 1, "reward/mean": 1, "train/extra_batches": 1, "perf/step_s": 3},
		{"step": 2, "reward/mean": 1, "perf/step_s": 4},
		{"step": 3, "val/mean/avg@4": 0.5},
	}}
	d := &plotData{batch: map[string]float64{"a": 8}}
	if got := d.responsesX(r); !slices.Equal(got, []float64{0, 8, 24, 32}) {
		t.Errorf("responsesX = %v, want [0 8 24 32]", got)
	}
	if got := wallX(r); !slices.Equal(got, []float64{0, 2, 5, 9}) {
		t.Errorf("wallX = %v, want [0 2 5 9]", got)
	}
	if got := (&plotData{}).responsesX(r); got != nil {
		t.Errorf("no total and no batch size: %v, want nil", got)
	}
}

// One arm's spike does not set the y range: nine flat lines at 0.1-0.18
// over 100 points; j at 0.19 is 1.6 at two of its points and a dips to
// -0.5 at three. Worked by hand: the whole range is -0.5 to 1.6 (2.1);
// without j it is -0.5 to 0.18 (0.68, under half), and j has 98 points
// near it, so j is left out; then without a 0.11 to 0.18 (0.07, under
// half of 0.68), a's 97 points at 0.1 near it (within 0.0175), so a is
// left out; leaving out a third (b: 0.12 to 0.18) does not halve 0.07. The
// range is 0.11 to 0.18 widened to the left-out arms' points near it (a's
// 0.1, j's 0.19): 0.1 to 0.19, padded 4% of 0.09 (0.0036) to the axis
// 0.0964 to 0.1936. The note names only the side each arm passes: a below
// it (down to -0.5), j above it (up to 1.6); b-i, inside, are not named.
func TestRobustRangeClipsSpike(t *testing.T) {
	flat := func(arm string, y float64, spikes map[int]float64) lineSpec {
		var pts []xy
		for x := range 100 {
			v := y
			if s, ok := spikes[x]; ok {
				v = s
			}
			pts = append(pts, xy{float64(x), v})
		}
		return lineSpec{Arm: arm, Mean: pts}
	}
	var p panelFig
	for i := range 10 {
		spikes := map[int]float64{}
		if i == 9 {
			spikes = map[int]float64{40: 1.6, 41: 1.6}
		}
		if i == 0 {
			spikes = map[int]float64{10: -0.5, 11: -0.5, 12: -0.5}
		}
		p.Lines = append(p.Lines, flat(string(rune('a'+i)), 0.1+0.01*float64(i), spikes))
	}
	lo, hi, exts := robustRange([]panelFig{p})
	if math.Abs(lo-0.1) > 1e-12 || math.Abs(hi-0.19) > 1e-12 || len(exts) != 10 {
		t.Fatalf("robustRange = %v, %v, %v; want 0.1, 0.19 and the 10 arms' extents", lo, hi, exts)
	}
	pad := 0.04 * (hi - lo)
	got := clipNote(exts, lo-pad, hi+pad)
	want := []string{"a below 0.0964 (down to -0.5)", "j above 0.194 (up to 1.6)"}
	if !slices.Equal(got, want) {
		t.Errorf("clipNote = %q, want %q", got, want)
	}
	// Both sides: an arm from -1 to 2 on the axis 0 to 1.
	if got := clipNote([]clipExt{{"k", -1, 2}}, 0, 1); !slices.Equal(got, []string{"k below 0 (down to -1) and above 1 (up to 2)"}) {
		t.Errorf("clipNote both sides = %q", got)
	}
	// Noise, not a spike: every arm of four spikes once, so leaving one
	// out never halves the range; the whole range is drawn.
	var q panelFig
	for i := range 4 {
		q.Lines = append(q.Lines, flat(string(rune('a'+i)), 0.1+0.01*float64(i), map[int]float64{10 * i: 0.6 + 0.1*float64(i)}))
	}
	if lo, hi, exts := robustRange([]panelFig{q}); math.Abs(lo-0.1) > 1e-12 || math.Abs(hi-0.9) > 1e-12 || exts != nil {
		t.Errorf("robustRange with every arm spiking = %v, %v, %v; want 0.1, 0.9, nil", lo, hi, exts)
	}
	// Two arms that collapse together (0.87 to 0, as the leaderboard's
	// simhash arms on pass@256) go as one: leaving out either alone keeps
	// the other's 0, both (two of eight, within the third) leave the six
	// live arms' 0.85 to 0.88, and their first point, 0.87, is near it.
	// Padded 4% of 0.03, the axis starts at 0.8488.
	var two panelFig
	for i := range 6 {
		d := 0.004 * float64(i)
		two.Lines = append(two.Lines, lineSpec{Arm: string(rune('a' + i)), Mean: []xy{{0, 0.87}, {1, 0.86 + d}, {2, 0.85 + d}}})
	}
	for _, a := range []string{"x", "y"} {
		two.Lines = append(two.Lines, lineSpec{Arm: a, Mean: []xy{{0, 0.87}, {1, 0.4}, {2, 0}}})
	}
	lo, hi, exts = robustRange([]panelFig{two})
	if math.Abs(lo-0.85) > 1e-12 || math.Abs(hi-0.88) > 1e-12 || len(exts) != 8 {
		t.Errorf("robustRange with two arms collapsed together = %v, %v, %v; want 0.85, 0.88 and 8 extents", lo, hi, exts)
	} else if got := clipNote(exts, lo-0.04*(hi-lo), hi+0.04*(hi-lo)); !slices.Equal(got, []string{"x below 0.849 (down to 0)", "y below 0.849 (down to 0)"}) {
		t.Errorf("clipNote with two arms collapsed together = %q", got)
	}
	// An arm that sits elsewhere throughout (collapsed at 0, eight arms at
	// 0.4-0.47) is no spike: none of its points is near the others'
	// range, so it sets the range with them.
	var c panelFig
	for i := range 8 {
		c.Lines = append(c.Lines, flat(string(rune('a'+i)), 0.4+0.01*float64(i), nil))
	}
	c.Lines = append(c.Lines, flat("dead", 0, nil))
	if lo, hi, exts := robustRange([]panelFig{c}); lo != 0 || math.Abs(hi-0.47) > 1e-12 || exts != nil {
		t.Errorf("robustRange with a collapsed arm = %v, %v, %v; want 0, 0.47, nil", lo, hi, exts)
	}
}

// A metric measured at one step and a constant one are lines of text, not
// figures; a collapsed arm is named in every figure that draws it.
func TestFiguresSingleStepConstantCollapsed(t *testing.T) {
	runs := map[string][]*armRun{}
	for i, a := range []string{"grpo", "dead"} {
		for seed := uint64(1); seed <= 2; seed++ {
			var rows []map[string]float64
			for step := range 10 {
				rows = append(rows, map[string]float64{"step": float64(step), "reward/mean": float64(step*(1-i)) + float64(seed),
					"rollout/entropy": 0.5 - 0.01*float64(step) + 0.1*float64(i), "critic/head_std": 0})
			}
			acc := 0.3 * float64(1-i)
			rows = append(rows, map[string]float64{"step": 10, "val/mean/avg@4": acc + 0.01*float64(seed)*float64(1-i)})
			runs[a] = append(runs[a], &armRun{Arm: a, Seed: seed, Rows: rows})
		}
	}
	rf := buildReportFigs(&plotData{spec: &Spec{}, runs: runs, arms: []string{"grpo", "dead"}, families: []family{{Name: "f", Arms: []string{"grpo", "dead"}}}})
	notes := strings.Join(rf.Notes, "\n")
	if !strings.Contains(notes, "Held-out accuracy: measured at one step only (step 10)") {
		t.Errorf("no table line for the one-step held-out accuracy:\n%s", notes)
	}
	if !strings.Contains(notes, "constant in every arm that logs it, so not plotted: grpo (0), dead (0)") {
		t.Errorf("no line for the constant critic head std:\n%s", notes)
	}
	var names []string
	for _, f := range rf.Figs {
		names = append(names, f.Name)
	}
	if !slices.Equal(names, []string{"train_reward", "entropy"}) {
		t.Errorf("figures %v, want train_reward and entropy", names)
	}
	if bad := checkFigures(rf.Figs, nil); len(bad) > 0 {
		t.Errorf("figure check: %v", bad)
	}
	// dead's held-out accuracy is 0 after step 0: collapsed, and said so.
	for _, f := range rf.Figs {
		if f.Name == "train_reward" {
			continue // dead's reward is constant per seed but not across seeds
		}
		if !strings.Contains(f.Note, "Collapsed (held-out accuracy 0 after step 0): dead.") {
			t.Errorf("%s: note %q does not name the collapsed arm", f.Name, f.Note)
		}
	}
}

// Every committed report's figures pass the figure check, built from its
// runs as the report builds them (the packed runs unpacked, the
// leaderboard's parts and transfer restored), with the forest plot from
// its committed verdicts.json.
func TestCommittedFiguresPass(t *testing.T) {
	root := filepath.Join("..")
	results := filepath.Join(root, "docs", "results")
	type rep struct{ name, cfg, part, main string }
	var reps []rep
	packed, _ := filepath.Glob(filepath.Join(results, "*", "runs.tar.xz"))
	for _, p := range packed {
		n := filepath.Base(filepath.Dir(p))
		reps = append(reps, rep{name: n, cfg: filepath.Join(root, "bench", n+".yaml"), part: filepath.Dir(p)})
	}
	lb := filepath.Join(results, "leaderboard")
	reps = append(reps,
		rep{"leaderboard/main", filepath.Join(root, "bench", "leaderboard.yaml"), filepath.Join(lb, "main"), ""},
		rep{"leaderboard/extra", filepath.Join(root, "bench", "leaderboard-extra.yaml"), filepath.Join(lb, "extra"), filepath.Join(lb, "main")},
		rep{"leaderboard/rerun", filepath.Join(root, "bench", "leaderboard-rerun.yaml"), filepath.Join(lb, "rerun"), ""},
		rep{"transfer", filepath.Join(root, "bench", "transfer.yaml"), filepath.Join(results, "transfer"), ""})
	if len(reps) < 9 {
		t.Fatalf("%d committed reports, want the 5 packed (quick's among them) and 4 restored", len(reps))
	}
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		python = "python3"
	}
	for _, r := range reps {
		t.Run(strings.ReplaceAll(r.name, "/", "-"), func(t *testing.T) {
			var dir string
			if _, err := os.Stat(filepath.Join(r.part, "runs.tar.xz")); err == nil {
				dir = resultstest.Unpack(t, r.part)
			} else {
				dir = t.TempDir()
				args := []string{filepath.Join(lb, "restore.py"), r.part, dir}
				if r.main != "" {
					args = append(args, "--main", r.main)
				}
				if out, err := exec.Command(python, args...).CombinedOutput(); err != nil {
					t.Fatalf("restore.py: %v\n%s", err, out)
				}
			}
			spec, err := Load(r.cfg)
			if err != nil {
				t.Fatal(err)
			}
			runs, _, err := loadRuns(spec, dir)
			if err != nil {
				t.Fatal(err)
			}
			var arms []string
			for _, a := range spec.Arms {
				if len(runs[a.Name]) > 0 {
					arms = append(arms, a.Name)
				}
			}
			wd, _ := os.Getwd()
			if err := os.Chdir(root); err != nil { // the transfer bench's paths are relative to the repository root
				t.Fatal(err)
			}
			fams, ferr := armFamilies(spec, dir, arms)
			batch := armBatches(spec, dir, arms)
			os.Chdir(wd)
			if ferr != nil {
				t.Fatal(ferr)
			}
			rf := buildReportFigs(&plotData{spec: spec, runs: runs, arms: arms, families: fams, batch: batch})
			var forest *forestSpec
			if data, err := os.ReadFile(filepath.Join(r.part, VerdictsFile)); err == nil {
				var vs []ClaimVerdict
				if err := json.Unmarshal(data, &vs); err != nil {
					t.Fatal(err)
				}
				if f, ok := buildForest(vs); ok {
					forest = &f
				}
			}
			for _, b := range checkFigures(rf.Figs, forest) {
				t.Error(b)
			}
			// The committed plots are the figures the code draws, no more.
			want := []string{}
			for _, f := range rf.Figs {
				want = append(want, f.Name+".png")
			}
			if forest != nil {
				want = append(want, ForestFile)
			}
			got, _ := filepath.Glob(filepath.Join(r.part, "plots", "*"))
			for i := range got {
				got[i] = filepath.Base(got[i])
			}
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("docs/results/%s/plots holds %v, the report draws %v", r.name, got, want)
			}
		})
	}
}

// A panel is drawn on the figure's own ranges: lines past a y axis cut for
// a spike do not widen it again (plot.Add widens the axes to each
// plotter's data, so the ranges are set after the lines).
func TestPanelKeepsClippedRange(t *testing.T) {
	f := goodFig()
	f.YMin, f.YMax, f.XMin, f.XMax = 0, 0.5, 0, 2
	f.Panels[0].Lines[1].Mean[2].Y = 3
	pl, err := panelPlot(f, f.Panels[0])
	if err != nil {
		t.Fatal(err)
	}
	if pl.Y.Min != 0 || pl.Y.Max != 0.5 || pl.X.Min != 0 || pl.X.Max != 2 {
		t.Errorf("panel drawn on x %v-%v, y %v-%v; want the figure's 0-2, 0-0.5", pl.X.Min, pl.X.Max, pl.Y.Min, pl.Y.Max)
	}
}

// On the wall-clock axis seeds that ran at different speeds end at
// different times, and the mean, taken step by step at the seeds' mean
// time, ends at their mean: a's two seeds of 1 s and 3 s steps, steps
// 0-2, reach step 2 at 2 s and 6 s, the mean at 4 s; b's seeds, both 2 s
// a step, end with their mean. The note names a only, and the figure
// check holds it; on the step axis nothing is said.
func TestWallMeanEndsShortSaid(t *testing.T) {
	run := func(arm string, seed uint64, dt float64) *armRun {
		r := &armRun{Arm: arm, Seed: seed}
		for step := range 3 {
			r.Rows = append(r.Rows, map[string]float64{"step": float64(step), "reward/mean": float64(step) + float64(seed), "perf/step_s": dt})
		}
		return r
	}
	runs := map[string][]*armRun{"a": {run("a", 1, 1), run("a", 2, 3)}, "b": {run("b", 1, 2), run("b", 2, 2)}}
	rf := buildReportFigs(&plotData{spec: &Spec{}, runs: runs, arms: []string{"a", "b"}, families: []family{{Name: "f", Arms: []string{"a", "b"}}}})
	var wall, step *figSpec
	for i := range rf.Figs {
		switch rf.Figs[i].Name {
		case "train_reward_wall":
			wall = &rf.Figs[i]
		case "train_reward":
			step = &rf.Figs[i]
		}
	}
	if wall == nil || step == nil {
		t.Fatalf("figures %v: want train_reward and train_reward_wall", rf.Notes)
	}
	l := wall.Panels[0].Lines[0]
	if end := l.Mean[len(l.Mean)-1].X; l.Arm != "a" || end != 4 {
		t.Errorf("%s's wall mean ends at %v s, want a's at 4", l.Arm, end)
	}
	if !strings.Contains(wall.Note, "Seeds end at different training times: each mean is taken step by step at its seeds' mean training time, so it ends at their mean, before its longest seed's line (a).") {
		t.Errorf("wall note: %s", wall.Note)
	}
	if strings.Contains(step.Note, "step by step") {
		t.Errorf("step note says the mean ends short: %s", step.Note)
	}
	if bad := checkFigures(rf.Figs, nil); len(bad) > 0 {
		t.Errorf("figure check: %v", bad)
	}
	wall.Note = strings.Replace(wall.Note, "(a)", "(b)", 1)
	if bad := checkFigures([]figSpec{*wall}, nil); len(bad) != 1 || !strings.Contains(bad[0], "a's mean ends before its longest seed") {
		t.Errorf("figure check with b named instead of a: %v", bad)
	}
}

// A forest of many claims puts its families side by side, one row per
// comparison across them, when every family has the same six or more rows
// (the leaderboard: 21 arms against grpo on five metrics); the panels'
// data areas are then one width and one height, so the rows line up,
// whatever the first panel's labels and each panel's wrapped title take.
func TestForestSideBySide(t *testing.T) {
	group := func(title string, labels ...string) forestGroup {
		g := forestGroup{Title: title, XLabel: "effect d on " + title, XMin: -1, XMax: 1, XTicks: []float64{-1, 0, 1}}
		for _, l := range labels {
			g.Rows = append(g.Rows, forestRow{Label: l, D: 0.1, Lo: -0.2, Hi: 0.4, Verdict: "inconclusive"})
		}
		return g
	}
	rows := []string{"a vs grpo", "a much longer arm name vs grpo", "c vs grpo", "d vs grpo", "e vs grpo", "f vs grpo"}
	f := forestSpec{Groups: []forestGroup{group("pass@1", rows...), group("distinct correct answers over every eval set (distinct@256)", rows...)}}
	if !sideBySide(f) {
		t.Error("two families with the same six rows: not side by side")
	}
	if sideBySide(forestSpec{Groups: []forestGroup{group("pass@1", rows...), group("pass@2", rows[:5]...)}}) ||
		sideBySide(forestSpec{Groups: []forestGroup{group("pass@1", rows[:5]...), group("pass@2", rows[:5]...)}}) {
		t.Error("families with other rows, or five rows: side by side")
	}
	var plots []*plot.Plot
	for i, g := range f.Groups {
		p, err := forestPanel(g, i == 0, forestPanelW-16)
		if err != nil {
			t.Fatal(err)
		}
		plots = append(plots, p)
	}
	img := vgimg.NewWith(vgimg.UseWH(8*vg.Inch, 4*vg.Inch), vgimg.UseDPI(figureDPI))
	cs := alignRow(plots, draw.New(img), 10)
	d0, d1 := plots[0].DataCanvas(cs[0]), plots[1].DataCanvas(cs[1])
	for _, c := range []struct {
		what string
		a, b vg.Length
	}{{"width", d0.Max.X - d0.Min.X, d1.Max.X - d1.Min.X}, {"bottom", d0.Min.Y, d1.Min.Y}, {"top", d0.Max.Y, d1.Max.Y}} {
		if math.Abs(float64(c.a-c.b)) > 0.01 {
			t.Errorf("data areas' %s: %v and %v", c.what, c.a, c.b)
		}
	}
	if d0.Min.X-cs[0].Min.X < d1.Min.X-cs[1].Min.X+20 {
		t.Errorf("the first panel has no room for its labels: %v vs %v", d0.Min.X-cs[0].Min.X, d1.Min.X-cs[1].Min.X)
	}
}

// Figures are written in 256 colours: an image of at most 256 colours
// keeps every pixel; one of more keeps its 256 most frequent and draws
// each other pixel as the nearest of them. Worked by hand.
func TestPalettedPNG(t *testing.T) {
	im := image.NewRGBA(image.Rect(0, 0, 30, 20))
	for y := range 20 {
		for x := range 30 {
			im.Set(x, y, color.RGBA{R: uint8(10 * (x % 10)), G: uint8(10 * y), B: 7, A: 255}) // 200 colours
		}
	}
	p := paletted(im).(*image.Paletted)
	for y := range 20 {
		for x := range 30 {
			if p.At(x, y) != im.At(x, y) {
				t.Fatalf("200 colours: pixel %d,%d is %v, was %v", x, y, p.At(x, y), im.At(x, y))
			}
		}
	}
	// 266 colours: (i, 0, 0) for i = 0-255 twice each, (0, 0, 50+j) for
	// j = 0-9 once: the ten blues go, each drawn as (0, 0, 0) (distance
	// 50+j, against 51+j for (1, 0, 0)).
	im = image.NewRGBA(image.Rect(0, 0, 522, 1))
	for x := range 512 {
		im.Set(x, 0, color.RGBA{R: uint8(x / 2), A: 255})
	}
	for j := range 10 {
		im.Set(512+j, 0, color.RGBA{B: uint8(50 + j), A: 255})
	}
	p = paletted(im).(*image.Paletted)
	if len(p.Palette) != 256 {
		t.Errorf("%d colours kept, want 256", len(p.Palette))
	}
	for j := range 10 {
		if got := p.At(512+j, 0); got != (color.RGBA{A: 255}) {
			t.Errorf("the blue (0, 0, %d) drawn as %v, want black", 50+j, got)
		}
	}
}

// Held-out accuracy from evaluations of two sample counts (the
// leaderboard's eval.k 16 at step 100, final_k 256 at step 200, the base
// at step 0 with 256): one line through all three, each row's avg@k, the
// figure saying so. With one key alone it was a single point, not drawn.
func TestHeldoutAcrossSampleCounts(t *testing.T) {
	var rs []*armRun
	for seed := uint64(1); seed <= 2; seed++ {
		s := 0.01 * float64(seed)
		rs = append(rs, &armRun{Arm: "a", Seed: seed, Rows: []map[string]float64{
			{"step": 0, "reward/mean": 0.1},
			{"step": 100, "reward/mean": 0.2, "val/mean/avg@16": 0.3 + s},
			{"step": 199, "reward/mean": 0.3},
			{"step": 200, "val/mean/avg@256": 0.4 + s},
		}})
	}
	base := []*armRun{{Arm: BaseArm, Seed: 1, Rows: []map[string]float64{{"step": 0, "val/mean/avg@256": 0.2}}},
		{Arm: BaseArm, Seed: 2, Rows: []map[string]float64{{"step": 0, "val/mean/avg@256": 0.2}}}}
	rf := buildReportFigs(&plotData{spec: &Spec{BaseEval: true}, runs: map[string][]*armRun{"a": rs, BaseArm: base},
		arms: []string{"a"}, families: []family{{Name: "f", Arms: []string{"a"}}}})
	if len(rf.Figs) == 0 || rf.Figs[0].Name != "heldout_accuracy" {
		t.Fatalf("no held-out accuracy figure: %v", rf.Notes)
	}
	f := rf.Figs[0]
	mean := f.Panels[0].Lines[0].Mean
	want := []xy{{0, 0.2}, {100, 0.315}, {200, 0.415}}
	if len(mean) != 3 {
		t.Fatalf("mean %v, want %v", mean, want)
	}
	for i := range want {
		if mean[i].X != want[i].X || math.Abs(mean[i].Y-want[i].Y) > 1e-12 {
			t.Errorf("mean %v, want %v", mean, want)
			break
		}
	}
	if f.Panels[0].YLabel != "held-out accuracy (avg@k)" || !strings.Contains(f.Note, "k = 16 or 256 by evaluation") {
		t.Errorf("label %q, note %q", f.Panels[0].YLabel, f.Note)
	}
	if bad := checkFigures(rf.Figs, nil); len(bad) > 0 {
		t.Errorf("figure check: %v", bad)
	}
}
