package bench

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cde-rl/cde/core"
)

// A report's figures are built first as data (figSpec: the series, x
// values, labels, looks and notes a figure draws), then drawn (figdraw.go).
// The figure check (figcheck.go) inspects the data, so what it passes is
// what the PNG shows.

// xy is one point of a line.
type xy struct{ X, Y float64 }

// look is an arm's appearance in every figure of a report: a colour of
// the palette (-1: the base policy's black) and a line style (dash
// pattern and marker).
type look struct{ Colour, Style int }

// lineSpec is one arm in a panel: the mean over its seeds (thick) and each
// seed's own line (thin) beneath it.
type lineSpec struct {
	Arm   string
	Look  look
	Mean  []xy
	Seeds [][]xy
}

// panelFig is one panel of a figure.
type panelFig struct {
	Title, YLabel string
	Lines         []lineSpec
	// Ref, when set, is a dotted horizontal reference line at *Ref.
	Ref *float64
}

// figSpec is one figure: panels side by side on one x axis kind and one
// shared y range, a legend of the arms drawn, and a note drawn in the
// figure that says what the lines are (seeds, N, smoothing, clipping).
type figSpec struct {
	Name    string
	Caption string // the results.md caption
	XLabel  string
	Panels  []panelFig
	XMin    float64
	XMax    float64
	YMin    float64
	YMax    float64
	XTicks  []float64
	YTicks  []float64
	LogX    bool // pass@k against k: a log2 axis ticked at powers of two
	Legend  []legendItem
	Note    string
	Clipped bool
}

// legendItem is an arm's legend entry.
type legendItem struct {
	Arm, Text string
	Look      look
}

// xAxis is what a figure's x is.
type xAxis int

const (
	onSteps xAxis = iota
	onResponses
	onWall
)

var axisSuffix = map[xAxis]string{onSteps: "", onResponses: "_samples", onWall: "_wall"}

// metricFig is a metric figure before it is computed.
type metricFig struct {
	name, what, metric string
	value              func(map[string]float64) (float64, bool)
	smooth             int
	median, withBase   bool
	ref                *float64
	axes               []xAxis
	only               []string // arms to draw; nil: all
	note               string   // said in the figure after what its lines are
}

// reportFigs are a report's figures and the markdown lines of those that
// are not drawn (a table row or a sentence saying why).
type reportFigs struct {
	Figs  []figSpec
	Notes []string // in figure order: a drawn figure's image line or a why-not line
}

// plotData is what the figures are computed from.
type plotData struct {
	spec     *Spec
	runs     map[string][]*armRun
	arms     []string
	families []family
	looks    map[string]look
	batch    map[string]float64 // responses per batch (prompts_per_step x rollout.n), for runs without the total
}

// armLooks gives arm i of the report colour i mod len(palette) and style
// i div len(palette): unique up to len(palette) x len(styles) arms.
func armLooks(arms []string) map[string]look {
	out := map[string]look{BaseArm: {Colour: -1, Style: 0}}
	for i, a := range arms {
		out[a] = look{Colour: i % len(palette), Style: i / len(palette) % len(lineDashes)}
	}
	return out
}

// armBatches is each arm's responses per batch from its config, the
// trainer's own rule for rows that predate train/generated_responses.
func armBatches(spec *Spec, dir string, arms []string) map[string]float64 {
	out := map[string]float64{}
	if spec == nil || len(spec.Seeds) == 0 {
		return out
	}
	for _, name := range arms {
		i := slices.IndexFunc(spec.Arms, func(a Arm) bool { return a.Name == name })
		if i < 0 {
			continue
		}
		cfg, err := spec.ArmConfig(dir, spec.Arms[i], spec.Seeds[0])
		if err != nil {
			continue
		}
		out[name] = float64(cfg.Train.PromptsPerStep * cfg.Rollout.N)
	}
	return out
}

// responsesX is the responses generated before each row's step: samplesX
// where the run logs the total, else counted from the arm's batch size and
// the rows' train/extra_batches (the trainer's rule for older rows). nil
// when neither is known.
func (d *plotData) responsesX(r *armRun) []float64 {
	if xs := samplesX(r); xs != nil {
		return xs
	}
	batch := d.batch[r.Arm]
	if batch == 0 {
		return nil
	}
	xs := make([]float64, len(r.Rows))
	perStep := map[int]float64{}
	for _, row := range r.Rows {
		if _, ok := row["reward/mean"]; ok {
			perStep[int(row["step"])] = batch * (1 + row["train/extra_batches"])
		}
	}
	cum := map[int]float64{}
	total := 0.0
	steps := slices.Sorted(maps.Keys(perStep))
	for _, s := range steps {
		cum[s] = total
		total += perStep[s]
	}
	for i, row := range r.Rows {
		s := int(row["step"])
		if c, ok := cum[s]; ok {
			xs[i] = c
		} else {
			// An evaluation after the last step: everything generated.
			n := 0.0
			for _, t := range steps {
				if t < s {
					n += perStep[t]
				}
			}
			xs[i] = n
		}
	}
	return xs
}

// wallX is the training wall-clock time before each row's step, the
// cumulative perf/step_s of the steps before it; nil when the run has no
// perf/step_s (the leaderboard's committed metrics left them out).
func wallX(r *armRun) []float64 {
	per := map[int]float64{}
	for _, row := range r.Rows {
		if v, ok := row["perf/step_s"]; ok {
			per[int(row["step"])] = v
		}
	}
	if len(per) == 0 {
		return nil
	}
	steps := slices.Sorted(maps.Keys(per))
	xs := make([]float64, len(r.Rows))
	for i, row := range r.Rows {
		s := int(row["step"])
		t := 0.0
		for _, u := range steps {
			if u < s {
				t += per[u]
			}
		}
		xs[i] = t
	}
	return xs
}

// seedLine is one run's series: the rows with a value, after the base
// value at x 0 when the run has none at step 0, smoothed; with each
// point's step.
func seedLine(r *armRun, rx []float64, value func(map[string]float64) (float64, bool), smooth int, median bool,
	base func(uint64) (float64, bool)) (steps []int, pts []xy) {
	var xs, ys []float64
	for i, row := range r.Rows {
		v, ok := value(row)
		if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		steps = append(steps, int(row["step"]))
		xs = append(xs, rx[i])
		ys = append(ys, v)
	}
	if base != nil && (len(steps) == 0 || steps[0] != 0) {
		if v, ok := base(r.Seed); ok {
			steps, xs, ys = append([]int{0}, steps...), append([]float64{0}, xs...), append([]float64{v}, ys...)
		}
	}
	sm := smoothSeries(ys, smooth)
	if median {
		sm = rollingMedian(ys, smooth)
	}
	for i := range sm {
		pts = append(pts, xy{xs[i], sm[i]})
	}
	return steps, pts
}

// armLine is an arm's seeds' lines and their mean, step by step (the
// mean's x is the seeds' mean x at the step).
func armLine(rs []*armRun, xOf func(*armRun) []float64, value func(map[string]float64) (float64, bool), smooth int, median bool,
	base func(uint64) (float64, bool)) (mean []xy, seeds [][]xy) {
	ys, xs := map[int][]float64{}, map[int][]float64{}
	for _, r := range rs {
		rx := xOf(r)
		if rx == nil {
			continue
		}
		steps, pts := seedLine(r, rx, value, smooth, median, base)
		if len(pts) == 0 {
			continue
		}
		seeds = append(seeds, pts)
		for i, p := range pts {
			ys[steps[i]] = append(ys[steps[i]], p.Y)
			xs[steps[i]] = append(xs[steps[i]], p.X)
		}
	}
	for _, s := range slices.Sorted(maps.Keys(ys)) {
		mean = append(mean, xy{core.Mean(xs[s]), core.Mean(ys[s])})
	}
	return mean, seeds
}

// collapsedArms are the arms whose held-out accuracy (val) is 0 at every
// evaluation after step 0 in every seed: named in every figure.
func collapsedArms(runs map[string][]*armRun, arms []string, val func(map[string]float64) (float64, bool)) []string {
	if val == nil {
		return nil
	}
	var out []string
	for _, a := range arms {
		n, zero := 0, true
		for _, r := range runs[a] {
			for _, row := range r.Rows {
				if v, ok := val(row); ok && row["step"] != 0 {
					n++
					zero = zero && v == 0
				}
			}
		}
		if n > 0 && zero {
			out = append(out, a)
		}
	}
	return out
}

// constantLine reports whether every value of l (mean and seeds) is the
// same.
func constantLine(l lineSpec) (float64, bool) {
	if len(l.Mean) == 0 {
		return 0, false
	}
	v := l.Mean[0].Y
	for _, p := range l.Mean {
		if p.Y != v {
			return 0, false
		}
	}
	for _, s := range l.Seeds {
		for _, p := range s {
			if p.Y != v {
				return 0, false
			}
		}
	}
	return v, true
}

// clipExt is a line's whole y extent, for saying what an axis cut of it.
type clipExt struct {
	Arm    string
	Lo, Hi float64
}

// robustRange is the y range of a figure's lines that a few arms' spikes
// do not set. Arms are left out of it while leaving them out more than
// halves the range (the others' whole range, with the reference line):
// each round the fewest of the lowest or of the highest arms that do, at
// most a third of the arms in all, and only arms with at least a tenth of
// their points near the others' range (within a quarter of it on
// either side): a spike or an excursion, not an arm that sits elsewhere
// throughout (a collapsed arm at 0 is drawn). The range is then the kept
// arms' whole range, widened to the left-out arms' points near it. With
// no arm left out it is every line's whole range and clipped is nil;
// else clipped is every arm's whole extent (its lines' union, in line
// order), and clipNote says what the drawn axis cuts of them. No line is
// cut for noise: a metric whose every arm is noisy keeps its whole range.
func robustRange(panels []panelFig) (lo, hi float64, clipped []clipExt) {
	type armYs struct {
		ext clipExt
		ys  []float64
	}
	var arms []*armYs
	at := map[string]*armYs{}
	refLo, refHi := math.Inf(1), math.Inf(-1)
	for _, p := range panels {
		if p.Ref != nil {
			refLo, refHi = min(refLo, *p.Ref), max(refHi, *p.Ref)
		}
		for _, l := range p.Lines {
			a := at[l.Arm]
			for _, s := range append([][]xy{l.Mean}, l.Seeds...) {
				for _, pt := range s {
					if a == nil {
						a = &armYs{ext: clipExt{l.Arm, pt.Y, pt.Y}}
						at[l.Arm] = a
						arms = append(arms, a)
					}
					a.ys = append(a.ys, pt.Y)
					a.ext.Lo, a.ext.Hi = min(a.ext.Lo, pt.Y), max(a.ext.Hi, pt.Y)
				}
			}
		}
	}
	if len(arms) == 0 {
		if math.IsInf(refLo, 0) {
			return 0, 1, nil
		}
		return refLo, refHi, nil
	}
	rangeOf := func(skip map[*armYs]bool, not []*armYs) (float64, float64) {
		lo, hi := refLo, refHi
		for _, a := range arms {
			if !skip[a] && !slices.Contains(not, a) {
				lo, hi = min(lo, a.ext.Lo), max(hi, a.ext.Hi)
			}
		}
		return lo, hi
	}
	near := func(a *armYs, lo, hi float64) (n int) {
		w := 0.25 * (hi - lo)
		for _, y := range a.ys {
			if y >= lo-w && y <= hi+w {
				n++
			}
		}
		return n
	}
	// Each round leaves out the fewest arms that more than halve the
	// range: the k lowest or the k highest (two arms collapsed together
	// go as one), k within the third.
	out := map[*armYs]bool{}
	for {
		lo, hi := rangeOf(out, nil)
		var kept []*armYs
		for _, a := range arms {
			if !out[a] {
				kept = append(kept, a)
			}
		}
		var best []*armYs
		half, bestSpan := (hi-lo)/2, 0.0
		for _, side := range []func(a, b *armYs) int{
			func(a, b *armYs) int { return cmp.Compare(a.ext.Lo, b.ext.Lo) },
			func(a, b *armYs) int { return cmp.Compare(b.ext.Hi, a.ext.Hi) },
		} {
			order := slices.Clone(kept)
			slices.SortStableFunc(order, side)
			for k := 1; 3*(len(out)+k) <= len(arms) && (best == nil || k <= len(best)); k++ {
				l, h := rangeOf(out, order[:k])
				if h-l >= half || h <= l {
					continue
				}
				ok := true
				for _, a := range order[:k] {
					ok = ok && 10*near(a, l, h) >= len(a.ys)
				}
				if ok && (best == nil || k < len(best) || (k == len(best) && h-l < bestSpan)) {
					best, bestSpan = order[:k], h-l
				}
			}
		}
		if best == nil {
			break
		}
		for _, a := range best {
			out[a] = true
		}
	}
	lo, hi = rangeOf(out, nil)
	if len(out) == 0 {
		return lo, hi, nil
	}
	w := 0.25 * (hi - lo)
	klo, khi := lo, hi
	for a := range out {
		for _, y := range a.ys {
			if y >= klo-w && y <= khi+w {
				lo, hi = min(lo, y), max(hi, y)
			}
		}
	}
	for _, a := range arms {
		clipped = append(clipped, a.ext)
	}
	return lo, hi, clipped
}

// clipNote says, for each clipped arm, which side of the drawn y axis
// [ymin, ymax] its points pass and how far: "a above 0.42 (up to 1.6)",
// "b below 0.1 (down to -0.3)", both joined by "and"; only the sides
// actually beyond the axis.
func clipNote(clipped []clipExt, ymin, ymax float64) []string {
	var out []string
	for _, c := range clipped {
		var sides []string
		if c.Lo < ymin {
			a, b := apart(ymin, c.Lo)
			sides = append(sides, "below "+a+" (down to "+b+")")
		}
		if c.Hi > ymax {
			a, b := apart(ymax, c.Hi)
			sides = append(sides, "above "+a+" (up to "+b+")")
		}
		if len(sides) > 0 {
			out = append(out, c.Arm+" "+strings.Join(sides, " and "))
		}
	}
	return out
}

// apart writes a and b in 3 significant digits, or as many more as tell
// them apart.
func apart(a, b float64) (string, string) {
	for d := 3; ; d++ {
		sa, sb := strconv.FormatFloat(a, 'g', d, 64), strconv.FormatFloat(b, 'g', d, 64)
		if sa != sb || d >= 17 {
			return sa, sb
		}
	}
}

// niceStep is the tick spacing for [lo, hi]: 1, 2, 2.5 or 5 times a power
// of ten, the smallest that gives at most maxTicks intervals.
func niceStep(lo, hi float64, maxTicks int) float64 {
	span := hi - lo
	if span <= 0 {
		span = math.Max(math.Abs(hi), 1)
	}
	e := math.Floor(math.Log10(span / float64(maxTicks)))
	for {
		for _, m := range []float64{1, 2, 2.5, 5} {
			s := m * math.Pow(10, e)
			if span/s <= float64(maxTicks)+1e-9 {
				return s
			}
		}
		e++
	}
}

// roundTicks are the multiples of niceStep in [lo, hi].
func roundTicks(lo, hi float64, maxTicks int) []float64 {
	s := niceStep(lo, hi, maxTicks)
	var out []float64
	for k := math.Ceil(lo/s - 1e-9); k*s <= hi+1e-9*s; k++ {
		v := k * s
		if math.Abs(v) < 1e-12*s {
			v = 0
		}
		out = append(out, v)
	}
	return out
}

// tickLabel writes a tick value as short as says it exactly: thousands as
// k, millions as M.
func tickLabel(v float64) string {
	for _, u := range []struct {
		div float64
		suf string
	}{{1e6, "M"}, {1e3, "k"}} {
		if math.Abs(v) >= u.div {
			return strconv.FormatFloat(roundTo(v/u.div), 'f', -1, 64) + u.suf
		}
	}
	return strconv.FormatFloat(roundTo(v), 'f', -1, 64)
}

func roundTo(v float64) float64 {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 10, 64), 64)
	return r
}

// smoothText says how a figure's seeds were smoothed.
func smoothText(smooth int, median bool) string {
	switch {
	case smooth <= 1:
		return "not smoothed"
	case median:
		return fmt.Sprintf("each seed smoothed by a centred moving median over %d logged steps", smooth)
	}
	return fmt.Sprintf("each seed smoothed by a centred moving mean over %d logged steps", smooth)
}

// seedsText says N: the seeds per arm drawn.
func seedsText(panels []panelFig) string {
	var ns []int
	for _, p := range panels {
		for _, l := range p.Lines {
			ns = append(ns, len(l.Seeds))
		}
	}
	if len(ns) == 0 {
		return ""
	}
	lo, hi := slices.Min(ns), slices.Max(ns)
	if lo == hi {
		return fmt.Sprintf("N = %d seeds per arm", lo)
	}
	return fmt.Sprintf("N = %d to %d seeds per arm", lo, hi)
}

// heldoutFig is the held-out accuracy figure, from the runs' avg@k keys
// (val/mean/avg@k for each k in avgKs; value nil with none). Where the
// evaluations during training draw fewer samples than the final one
// (eval.k and eval.final_k: avg@16 at step 100, avg@256 at steps 0 and 200
// in the leaderboard) each row's avg@k is taken, the largest k a row has:
// every avg@k estimates the same accuracy, more precisely at larger k.
// Taking one key alone left the leaderboard's curve at one point.
func heldoutFig(avgKs map[int]bool, withBase bool) metricFig {
	mf := metricFig{name: "heldout_accuracy", what: "Held-out accuracy", smooth: 1, withBase: withBase,
		axes: []xAxis{onSteps, onResponses, onWall}}
	order := slices.Sorted(maps.Keys(avgKs))
	switch len(order) {
	case 0:
		return mf
	case 1:
		mf.metric = fmt.Sprintf("val/mean/avg@%d", order[0])
		mf.value = metricValue(mf.metric)
		return mf
	}
	var names []string
	for _, k := range order {
		names = append(names, strconv.Itoa(k))
	}
	slices.Reverse(order)
	mf.metric = "val/mean/avg@k"
	mf.note = "avg@k: a problem's mean correctness over its k samples, k = " + strings.Join(names, " or ") +
		" by evaluation (the final one draws the most); each estimates the same accuracy."
	mf.value = func(row map[string]float64) (float64, bool) {
		for _, k := range order {
			if v, ok := row[fmt.Sprintf("val/mean/avg@%d", k)]; ok {
				return v, true
			}
		}
		return 0, false
	}
	return mf
}

// buildReportFigs computes the report's figures.
func buildReportFigs(d *plotData) reportFigs {
	d.looks = armLooks(d.arms)
	avgKs := map[int]bool{}
	sets := map[string]bool{}
	ks := map[int]bool{}
	for _, arm := range d.arms {
		for _, r := range d.runs[arm] {
			for _, row := range r.Rows {
				for k := range row {
					if n, err := strconv.Atoi(strings.TrimPrefix(k, "val/mean/avg@")); err == nil && strings.HasPrefix(k, "val/mean/avg@") {
						avgKs[n] = true
					}
				}
			}
			if row, ok := lastEval(r); ok {
				for k := range row {
					if m := valKeyRE.FindStringSubmatch(k); m != nil && m[2] == "pass" {
						if m[1] != "mean" {
							sets[m[1]] = true
						} else if n, err := strconv.Atoi(m[3]); err == nil {
							ks[n] = true
						}
					}
				}
			}
		}
	}
	heldout := heldoutFig(avgKs, d.spec.BaseEval)
	collapsed := collapsedArms(d.runs, d.arms, heldout.value)
	kMax := 0
	for k := range ks {
		kMax = max(kMax, k)
	}
	three := []xAxis{onSteps, onResponses, onWall}
	one := 1.0
	var mfs []metricFig
	if heldout.value != nil {
		mfs = append(mfs, heldout)
	}
	mfs = append(mfs, metricFig{name: "train_reward", what: "Training reward (the batch's mean reward)", metric: "reward/mean", smooth: 5, axes: three})
	if kMax > 1 {
		key := fmt.Sprintf("val/mean/pass@%d", kMax)
		mfs = append(mfs, metricFig{name: "passk_step", what: fmt.Sprintf("pass@%d (mean over eval sets)", kMax), metric: key, smooth: 1, withBase: d.spec.BaseEval, axes: []xAxis{onSteps}})
	}
	mfs = append(mfs,
		metricFig{name: "entropy", what: "Policy entropy of the rollouts", metric: "rollout/entropy", smooth: 5, axes: []xAxis{onSteps, onResponses}},
		metricFig{name: "calibration", what: "Calibration gap (the paper's Figure 6): the batch's mean perplexity of incorrect rollouts over that of correct ones; above 1 (dotted), confidence tracks correctness",
			metric: "calib/ppl_incorrect / calib/ppl_correct", value: ratioValue("calib/ppl_incorrect", "calib/ppl_correct"), smooth: 9, median: true, ref: &one, axes: []xAxis{onSteps}},
		metricFig{name: "auroc", what: "Calibration AUROC (perplexity separating correct from incorrect rollouts)", metric: "calib/auroc", smooth: 5, axes: []xAxis{onSteps}},
		metricFig{name: "critic_head_std", what: "Critic head std on the training batch (B_critic), arms with a critic", metric: "critic/head_std", smooth: 5, axes: []xAxis{onSteps}},
		metricFig{name: "simhash_cells", what: "SimHash occupied cells, arms with SimHash", metric: "simhash/occupied_cells", smooth: 1, axes: []xAxis{onSteps}},
	)
	var out reportFigs
	for _, mf := range mfs {
		for _, ax := range mf.axes {
			f, why := d.metricFigure(mf, ax, collapsed)
			if why != "" {
				if why != "-" {
					out.Notes = append(out.Notes, why)
				}
				if ax == onSteps {
					break // its other axes would say it again, or less
				}
				continue
			}
			out.Figs = append(out.Figs, f)
			out.Notes = append(out.Notes, figureLines(f))
		}
	}
	f, why := d.passKFigure(sets, slices.Sorted(maps.Keys(ks)), collapsed)
	if why != "" {
		if why != "-" {
			out.Notes = append(out.Notes, why)
		}
	} else {
		out.Figs = append(out.Figs, f)
		out.Notes = append(out.Notes, figureLines(f))
	}
	return out
}

// figureLines are the results.md lines that show a drawn figure: its
// caption in bold (one full stop at its end) and the image.
func figureLines(f figSpec) string {
	return fmt.Sprintf("**%s.**\n\n![%s](plots/%s.png)\n", strings.TrimRight(f.Caption, ". "), f.Name, f.Name)
}

var axisWords = map[xAxis]string{onSteps: "training step", onResponses: "responses generated", onWall: "wall-clock training time"}

// metricFigure is one metric against one x axis, or why not: "-" for a
// figure left out silently (an alternative axis of a figure not drawn).
func (d *plotData) metricFigure(mf metricFig, ax xAxis, collapsed []string) (figSpec, string) {
	value := mf.value
	if value == nil {
		value = metricValue(mf.metric)
	}
	var base func(uint64) (float64, bool)
	if mf.withBase {
		base = func(seed uint64) (float64, bool) {
			for _, r := range d.runs[BaseArm] {
				if r.Seed != seed {
					continue
				}
				for _, row := range r.Rows {
					if v, ok := value(row); ok && row["step"] == 0 {
						return v, true
					}
				}
			}
			return 0, false
		}
	}
	xOf := stepX
	switch ax {
	case onResponses:
		xOf = d.responsesX
	case onWall:
		xOf = wallX
	}
	label := axisLabel(mf.metric)
	f := figSpec{Name: mf.name + axisSuffix[ax], XLabel: axisWords[ax]}
	var constant, without, single []string
	for _, fam := range d.families {
		p := panelFig{YLabel: label, Ref: mf.ref}
		if len(d.families) > 1 {
			p.Title = fam.Name
		}
		for _, a := range fam.Arms {
			if len(d.runs[a]) == 0 {
				continue
			}
			mean, seeds := armLine(d.runs[a], xOf, value, mf.smooth, mf.median, base)
			if len(mean) == 0 {
				if ax != onSteps {
					if _, any := armLine(d.runs[a], stepX, value, mf.smooth, mf.median, base); len(any) > 0 {
						without = append(without, a)
					}
				}
				continue
			}
			l := lineSpec{Arm: a, Look: d.looks[a], Mean: mean, Seeds: seeds}
			if len(mean) < 2 {
				single = append(single, a)
				continue
			}
			if v, ok := constantLine(l); ok {
				constant = append(constant, fmt.Sprintf("%s (%s)", a, fmtNum(v)))
				continue
			}
			p.Lines = append(p.Lines, l)
		}
		if len(p.Lines) > 0 {
			f.Panels = append(f.Panels, p)
		}
	}
	what := mf.what
	if ax == onWall && len(f.Panels) == 0 && len(without) > 0 {
		return f, fmt.Sprintf("- %s against wall-clock time: the runs keep no step times (perf/step_s); not plotted.", what)
	}
	if ax != onSteps && len(f.Panels) == 0 {
		return f, "-"
	}
	if len(f.Panels) == 0 && len(single) > 0 {
		step := 0.0
		for _, r := range d.runs[single[0]] {
			for _, row := range r.Rows {
				if _, ok := value(row); ok {
					step = row["step"]
				}
			}
		}
		return f, fmt.Sprintf("- %s: measured at one step only (step %s), so not plotted: the Results table gives its value.", what, fmtNum(step))
	}
	if len(f.Panels) == 0 {
		if len(constant) > 0 {
			return f, fmt.Sprintf("- %s: constant in every arm that logs it, so not plotted: %s.", what, strings.Join(constant, ", "))
		}
		return f, fmt.Sprintf("- %s: no finished arm logs it; not plotted.", what)
	}
	xs := map[float64]bool{}
	f.XMin, f.XMax = math.Inf(1), math.Inf(-1)
	for _, p := range f.Panels {
		for _, l := range p.Lines {
			for _, s := range append([][]xy{l.Mean}, l.Seeds...) {
				for _, pt := range s {
					xs[pt.X] = true
					f.XMin, f.XMax = min(f.XMin, pt.X), max(f.XMax, pt.X)
				}
			}
		}
	}
	if len(xs) < 2 {
		if ax != onSteps {
			return f, "-"
		}
		return f, fmt.Sprintf("- %s: measured at one step only (step %s), so not plotted: the Results table gives its value.", what, fmtNum(f.XMin))
	}
	f.XMin = min(0, f.XMin)
	xScale := 1.0
	switch {
	case ax == onWall && f.XMax > 3*3600:
		xScale, f.XLabel = 3600, f.XLabel+" (hours)"
	case ax == onWall && f.XMax > 180:
		xScale, f.XLabel = 60, f.XLabel+" (minutes)"
	case ax == onWall:
		f.XLabel += " (seconds)"
	}
	if xScale != 1 {
		for i := range f.Panels {
			for j := range f.Panels[i].Lines {
				l := &f.Panels[i].Lines[j]
				for k := range l.Mean {
					l.Mean[k].X /= xScale
				}
				for _, s := range l.Seeds {
					for k := range s {
						s[k].X /= xScale
					}
				}
			}
		}
		f.XMin, f.XMax = f.XMin/xScale, f.XMax/xScale
	}
	if s := niceStep(f.XMin, f.XMax, 6); math.Ceil(f.XMax/s)*s-f.XMax < 0.1*(f.XMax-f.XMin) {
		f.XMax = math.Ceil(f.XMax/s-1e-9) * s
	}
	f.XTicks = roundTicks(f.XMin, f.XMax, 6)
	lo, hi, exts := robustRange(f.Panels)
	pad := 0.04 * (hi - lo)
	if pad == 0 {
		pad = 0.05 * math.Max(math.Abs(hi), 1)
	}
	f.YMin, f.YMax = lo-pad, hi+pad
	if isAccuracy(mf.metric) {
		f.YMin, f.YMax = math.Max(f.YMin, 0), math.Min(f.YMax, 1)
	}
	clipped := clipNote(exts, f.YMin, f.YMax)
	f.Clipped = len(clipped) > 0
	f.YTicks = roundTicks(f.YMin, f.YMax, 6)
	// The legend and the note.
	drawn := map[string]bool{}
	for _, p := range f.Panels {
		for _, l := range p.Lines {
			drawn[l.Arm] = true
		}
	}
	for _, a := range d.arms {
		if drawn[a] {
			text := a
			if slices.Contains(collapsed, a) {
				text += " (collapsed)"
			}
			f.Legend = append(f.Legend, legendItem{a, text, d.looks[a]})
		}
	}
	var note []string
	note = append(note, "Thick line: the mean over seeds; thin lines: each seed ("+seedsText(f.Panels)+"); "+smoothText(mf.smooth, mf.median)+".")
	if mf.note != "" {
		note = append(note, mf.note)
	}
	if len(f.Panels) > 1 {
		note = append(note, "Panels share the y axis.")
	}
	if mf.withBase && ax != onWall {
		note = append(note, "Lines start at the base policy's evaluation.")
	}
	if ax == onResponses && d.anyCounted() {
		note = append(note, "Responses: every batch drawn, dynamic sampling's dropped groups included.")
	}
	if short := shortMeans(f); len(short) > 0 {
		note = append(note, shortMeanNote(ax, short, len(drawn)))
	}
	if len(clipped) > 0 {
		note = append(note, "y axis clipped: "+strings.Join(clipped, "; ")+".")
	}
	var coll []string
	for _, a := range collapsed {
		if drawn[a] {
			coll = append(coll, a)
		}
	}
	if len(coll) > 0 {
		note = append(note, "Collapsed (held-out accuracy 0 after step 0): "+strings.Join(coll, ", ")+".")
	}
	if len(constant) > 0 {
		note = append(note, "Constant, not drawn: "+strings.Join(constant, ", ")+".")
	}
	if len(single) > 0 {
		note = append(note, "Not drawn, one point only: "+strings.Join(single, ", ")+".")
	}
	if len(without) > 0 {
		note = append(note, "Not drawn, no "+map[xAxis]string{onResponses: "response count", onWall: "step times (perf/step_s)"}[ax]+" in their runs: "+strings.Join(without, ", ")+".")
	}
	f.Note = strings.Join(note, " ")
	f.Caption = what + " (" + mf.metric + ") against the " + axisWords[ax]
	if ax == onResponses {
		f.Caption += " (" + GeneratedTotalMetric + " before the step; for runs made before it, prompts_per_step x rollout.n per batch)"
	}
	if ax == onWall {
		f.Caption += " (the cumulative perf/step_s)"
	}
	f.Caption += ". " + f.Note
	return f, ""
}

// shortMeans are the arms of f whose mean line ends short of their
// longest seed's: the mean is taken step by step and drawn at the seeds'
// mean x, so where seeds reach the last step at different x (wall-clock
// time; responses, where dynamic sampling draws more for some seeds) it
// ends at their mean, before the seed that ran longest. Short by more than
// half a percent of the x axis; each arm once.
func shortMeans(f figSpec) []string {
	var out []string
	tol := 0.005 * (f.XMax - f.XMin)
	for _, p := range f.Panels {
		for _, l := range p.Lines {
			if len(l.Mean) == 0 || slices.Contains(out, l.Arm) {
				continue
			}
			end := l.Mean[len(l.Mean)-1].X
			for _, sd := range l.Seeds {
				if len(sd) > 0 && sd[len(sd)-1].X > end+tol {
					out = append(out, l.Arm)
					break
				}
			}
		}
	}
	return out
}

// shortMeanNote says which means end short of their longest seed (of
// the figure's drawn arms), and why.
func shortMeanNote(ax xAxis, short []string, drawn int) string {
	what := map[xAxis]string{onSteps: "step", onResponses: "response count", onWall: "training time"}[ax]
	arms := strings.Join(short, ", ")
	if len(short) == drawn && drawn > 1 {
		arms = everyArm
	}
	return fmt.Sprintf("Seeds end at different %ss: each mean is taken step by step at its seeds' mean %s, so it ends at their mean, before its longest seed's line (%s).",
		what, what, arms)
}

// everyArm stands for the list of a figure's arms where it is all of them.
const everyArm = "every arm"

// anyCounted reports whether any run's responses are counted.
func (d *plotData) anyCounted() bool {
	for _, rs := range d.runs {
		for _, r := range rs {
			if samplesX(r) != nil {
				return true
			}
		}
	}
	return false
}

// passKFigure is pass@k against k at the final evaluation, one panel per
// eval set (the mean over sets first), every arm and the base policy in
// each; only with 4 or more k (ks, sorted), else a line saying where
// the values are: the pass@k curves table (2 or 3 k), the Results table
// (one k).
func (d *plotData) passKFigure(sets map[string]bool, ks []int, collapsed []string) (figSpec, string) {
	f := figSpec{Name: "passk", XLabel: "k (log scale)", LogX: true}
	var constant []string
	switch len(ks) {
	case 0:
		return f, "-"
	case 1:
		return f, fmt.Sprintf("- pass@k against k: the runs evaluate one value of k only (pass@%d), so there is no curve to draw: the Results table gives it.", ks[0])
	case 2, 3:
		var names []string
		for _, k := range ks {
			names = append(names, fmt.Sprintf("pass@%d", k))
		}
		return f, fmt.Sprintf("- pass@k against k: %d values of k only (%s), so not plotted: the pass@k curves table gives them.", len(ks), strings.Join(names, ", "))
	}
	for _, set := range append([]string{"mean"}, slices.Sorted(maps.Keys(sets))...) {
		p := panelFig{Title: "eval set " + strings.ReplaceAll(set, "_", " "), YLabel: "pass@k"}
		if set == "mean" {
			p.Title = "mean over eval sets"
		}
		var per []*armRun
		seen := map[uint64]bool{}
		for _, a := range d.arms {
			for _, r := range d.runs[a] {
				if _, ok := firstEval(r); ok && !seen[r.Seed] {
					seen[r.Seed] = true
					per = append(per, r)
				}
			}
		}
		add := func(arm string, rs []*armRun, at func(*armRun) (map[string]float64, bool)) {
			var seeds [][]xy
			for _, r := range rs {
				b := passCurve([]*armRun{r}, set, at)
				var s []xy
				for i := range b.X {
					s = append(s, xy{b.X[i], b.Mean[i]})
				}
				if len(s) > 0 {
					seeds = append(seeds, s)
				}
			}
			b := passCurve(rs, set, at)
			if len(b.X) < 2 {
				return
			}
			l := lineSpec{Arm: arm, Look: d.looks[arm], Seeds: seeds}
			for i := range b.X {
				l.Mean = append(l.Mean, xy{b.X[i], b.Mean[i]})
			}
			if v, ok := constantLine(l); ok {
				if c := fmt.Sprintf("%s (%s)", arm, fmtNum(v)); !slices.Contains(constant, c) {
					constant = append(constant, c)
				}
				return
			}
			p.Lines = append(p.Lines, l)
		}
		add(BaseArm, per, firstEval)
		for _, a := range d.arms {
			add(a, d.runs[a], lastEval)
		}
		if len(p.Lines) > 0 {
			f.Panels = append(f.Panels, p)
		}
	}
	if len(f.Panels) == 0 {
		return f, "-"
	}
	f.XMin, f.XMax = math.Inf(1), math.Inf(-1)
	for _, p := range f.Panels {
		for _, l := range p.Lines {
			for _, pt := range l.Mean {
				f.XMin, f.XMax = min(f.XMin, pt.X), max(f.XMax, pt.X)
			}
		}
	}
	for k := 1.0; k <= f.XMax; k *= 2 {
		if k >= f.XMin {
			f.XTicks = append(f.XTicks, k)
		}
	}
	lo, hi, exts := robustRange(f.Panels)
	pad := 0.04 * (hi - lo)
	f.YMin, f.YMax = math.Max(0, lo-pad), math.Min(1, hi+pad)
	f.YTicks = roundTicks(f.YMin, f.YMax, 6)
	clipped := clipNote(exts, f.YMin, f.YMax)
	f.Clipped = len(clipped) > 0
	drawn := map[string]bool{}
	for _, p := range f.Panels {
		for _, l := range p.Lines {
			drawn[l.Arm] = true
		}
	}
	for _, a := range append([]string{BaseArm}, d.arms...) {
		if drawn[a] {
			text := a
			if a == BaseArm {
				text = "base policy (step 0)"
			} else if slices.Contains(collapsed, a) {
				text += " (collapsed)"
			}
			f.Legend = append(f.Legend, legendItem{a, text, d.looks[a]})
		}
	}
	note := "Thick line: the mean over seeds; thin lines: each seed (" + seedsText(f.Panels) + "); not smoothed; at the final evaluation, unbiased from its n samples per problem. Panels share the y axis."
	if len(clipped) > 0 {
		note += " y axis clipped: " + strings.Join(clipped, "; ") + "."
	}
	if len(constant) > 0 {
		note += " Constant, not drawn: " + strings.Join(constant, ", ") + "."
	}
	f.Note = note
	f.Caption = "pass@k against k at the final evaluation, per eval set, with the base policy in black. " + note
	return f, ""
}

// writePlots draws the report's figures into dir (PNG only) and returns
// the markdown lines that show (or explain the absence of) each.
func writePlots(spec *Spec, runs map[string][]*armRun, arms []string, families []family, dir string) ([]string, error) {
	rf := buildReportFigs(&plotData{spec: spec, runs: runs, arms: arms, families: families, batch: armBatches(spec, filepath.Dir(dir), arms)})
	if err := removeOldPlots(dir); err != nil {
		return nil, err
	}
	for _, f := range rf.Figs {
		if err := renderFig(f, filepath.Join(dir, f.Name+".png")); err != nil {
			return nil, err
		}
	}
	return rf.Notes, nil
}

// plotsIntro opens results.md's Plots section.
const plotsIntro = "One figure per metric and x axis (training step, responses generated, wall-clock time). Each arm has one colour, line style and marker " +
	"in every figure; a thick line is the mean over its seeds, thin lines each seed, and each figure says its N and smoothing. The GRPO and PPO families " +
	"are in panels side by side on one y range; a y axis is cut where one arm's spike would set it, and the figure says so. A metric measured at one step " +
	"or constant is a line of text instead of a figure. PNG only (80 dpi, best compression)."
