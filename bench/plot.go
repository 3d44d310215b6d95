package bench

import (
	"fmt"
	"image/color"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/session"
)

// band is an arm's metric over steps: the mean over its seeds and the
// range (min, max) over them, at every step where any seed has a value.
type band struct {
	X, Mean, Lo, Hi []float64
}

// smoothSeries is the centred moving average of ys over a window of w
// points (shorter at the ends); w <= 1 returns ys.
func smoothSeries(ys []float64, w int) []float64 {
	if w <= 1 {
		return ys
	}
	out := make([]float64, len(ys))
	for i := range ys {
		lo, hi := max(0, i-w/2), min(len(ys), i+w/2+1)
		s := 0.0
		for _, y := range ys[lo:hi] {
			s += y
		}
		out[i] = s / float64(hi-lo)
	}
	return out
}

// rollingMedian is the centred moving median of ys over a window of w
// points (shorter at the ends); w <= 1 returns ys. Unlike a mean it
// ignores a one-step spike (a batch with one degenerate response).
func rollingMedian(ys []float64, w int) []float64 {
	if w <= 1 {
		return ys
	}
	out := make([]float64, len(ys))
	win := make([]float64, 0, w+1)
	for i := range ys {
		lo, hi := max(0, i-w/2), min(len(ys), i+w/2+1)
		win = append(win[:0], ys[lo:hi]...)
		slices.Sort(win)
		n := len(win)
		out[i] = (win[(n-1)/2] + win[n/2]) / 2
	}
	return out
}

// allZeroAfterBase reports whether every value of b past step 0 (the base
// policy's, when drawn) is 0, and there is one.
func allZeroAfterBase(b band) bool {
	n := 0
	for i, x := range b.X {
		if x == 0 {
			continue
		}
		if b.Lo[i] != 0 || b.Hi[i] != 0 {
			return false
		}
		n++
	}
	return n > 0
}

// metricValue reads one metric of a row.
func metricValue(metric string) func(map[string]float64) (float64, bool) {
	return func(row map[string]float64) (float64, bool) {
		v, ok := row[metric]
		return v, ok
	}
}

// ratioValue reads num / den of a row.
func ratioValue(num, den string) func(map[string]float64) (float64, bool) {
	return func(row map[string]float64) (float64, bool) {
		a, okA := row[num]
		b, okB := row[den]
		if !okA || !okB || b == 0 {
			return 0, false
		}
		return a / b, true
	}
}

// seedBandOf is the band of value over rs against step, each seed's
// series first smoothed over smooth points (a moving median when median is
// set). base, when not nil, gives a seed's value at step 0 (the base
// policy's evaluation), put before its series when the series has none.
func seedBandOf(rs []*armRun, value func(map[string]float64) (float64, bool), smooth int, median bool,
	base func(seed uint64) (float64, bool)) band {
	return seedBandAt(rs, value, smooth, median, base, stepX)
}

// GeneratedTotalMetric is the trainer's count of the responses generated
// from a run's start to the end of a step, dynamic sampling's dropped
// groups included; GeneratedMetric the step's own.
const (
	GeneratedTotalMetric = "train/generated_responses_total"
	GeneratedMetric      = "train/generated_responses"
)

// stepX is the x of every row of r on the step axis: its step.
func stepX(r *armRun) []float64 {
	xs := make([]float64, len(r.Rows))
	for i, row := range r.Rows {
		xs[i] = row["step"]
	}
	return xs
}

// samplesX is the x of every row of r on the generated-responses axis: the
// responses generated in the steps before the row's step (the row's
// GeneratedTotalMetric less its GeneratedMetric), so that step 0 is at 0
// as on the step axis, and an evaluation at step s, made before step s
// trains, sits at what the policy had generated. A row without them (the
// evaluation after the last step) takes the total of the rows before it.
// nil when no row of r has GeneratedTotalMetric (a run from before it).
func samplesX(r *armRun) []float64 {
	xs := make([]float64, len(r.Rows))
	total, found := 0.0, false
	for i, row := range r.Rows {
		t, ok := row[GeneratedTotalMetric]
		if !ok {
			xs[i] = total
			continue
		}
		found = true
		xs[i], total = t-row[GeneratedMetric], t
	}
	if !found {
		return nil
	}
	return xs
}

// seedBandAt is seedBandOf against the x that xOf gives each row of a run
// (a run it gives nil is left out; the base value is at x = 0). Seeds are
// combined step by step: the band's x at a step is the mean over the seeds
// of their x there (the step itself on the step axis).
func seedBandAt(rs []*armRun, value func(map[string]float64) (float64, bool), smooth int, median bool,
	base func(seed uint64) (float64, bool), xOf func(*armRun) []float64) band {
	vals, xs := map[int][]float64{}, map[int][]float64{}
	for _, r := range rs {
		rx := xOf(r)
		if rx == nil {
			continue
		}
		var steps []int
		var xv, ys []float64
		for i, row := range r.Rows {
			v, ok := value(row)
			if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			steps = append(steps, int(row["step"]))
			xv = append(xv, rx[i])
			ys = append(ys, v)
		}
		if base != nil && (len(steps) == 0 || steps[0] != 0) {
			if v, ok := base(r.Seed); ok {
				steps, xv, ys = append([]int{0}, steps...), append([]float64{0}, xv...), append([]float64{v}, ys...)
			}
		}
		sm := smoothSeries(ys, smooth)
		if median {
			sm = rollingMedian(ys, smooth)
		}
		for i, y := range sm {
			vals[steps[i]] = append(vals[steps[i]], y)
			xs[steps[i]] = append(xs[steps[i]], xv[i])
		}
	}
	var b band
	for _, s := range slices.Sorted(maps.Keys(vals)) {
		v := vals[s]
		b.X = append(b.X, core.Mean(xs[s]))
		b.Mean = append(b.Mean, core.Mean(v))
		b.Lo = append(b.Lo, slices.Min(v))
		b.Hi = append(b.Hi, slices.Max(v))
	}
	return b
}

// readableTicks are gonum's default tick positions with labels written
// with as many decimals as the spacing of the major ticks needs, and more
// until every label says exactly where its tick is and no two are equal
// (gonum's own labels can read "1.1, 1, 1"; ticks at 0.35, 0.45, 0.55
// written with one decimal read 0.3, 0.5, 0.6).
type readableTicks struct{}

func (readableTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	var major []float64
	for _, t := range ts {
		if t.Label != "" {
			major = append(major, t.Value)
		}
	}
	dec := 0
	if len(major) > 1 {
		dec = max(0, int(math.Ceil(-math.Log10(major[1]-major[0])-1e-9)))
	}
	for ; dec < 8; dec++ {
		seen := map[string]bool{}
		bad := false
		for _, v := range major {
			l := strconv.FormatFloat(v, 'f', dec, 64)
			back, _ := strconv.ParseFloat(l, 64)
			bad = bad || seen[l] || math.Abs(back-v) > 1e-9*math.Max(1, math.Abs(v))
			seen[l] = true
		}
		if !bad {
			break
		}
	}
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', dec, 64)
		}
	}
	return ts
}

// logTicks mark a log axis at 1, 2 and 5 times the powers of ten in
// range, labelled readably.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if v >= lo*0.9999 && v <= hi*1.0001 {
				ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', max(0, int(-e)), 64)})
			}
		}
	}
	return ts
}

// log10Ticks mark an axis of log10 values as logTicks would mark the
// values on a log axis.
type log10Ticks struct{}

func (log10Ticks) Ticks(lo, hi float64) []plot.Tick {
	ts := logTicks{}.Ticks(math.Pow(10, lo), math.Pow(10, hi))
	for i := range ts {
		ts[i].Value = math.Log10(ts[i].Value)
	}
	return ts
}

// spiky reports whether positive values span more than a factor of 30, when
// a log scale shows them better (a single spike otherwise flattens the rest).
func spiky(ys []float64) bool {
	lo, hi := math.Inf(1), 0.0
	for _, y := range ys {
		if y <= 0 {
			return false
		}
		lo, hi = min(lo, y), max(hi, y)
	}
	return hi > 30*lo
}

// family is a group of arms drawn in one panel.
type family struct {
	Name   string
	Critic bool
	Arms   []string
}

// series is one line of a panel.
type series struct {
	Arm    string
	Metric string
	// Value, when set, computes the line's value from a metrics row
	// instead of reading Metric (which then only names it).
	Value func(map[string]float64) (float64, bool)
}

// panelSpec is one plot: lines with seed bands.
type panelSpec struct {
	Title, XLabel, YLabel string
	Lines                 []series
	Smooth                int
	// PassK draws pass@k vs k at the final evaluation instead of metric vs
	// step, for eval set Set ("mean": the mean over sets).
	PassK bool
	Set   string
	// Median smooths with a moving median instead of a mean.
	Median bool
	// WithBase starts every seed's line at step 0 with the base policy's
	// value of the same metric (the base arm's evaluation of that seed).
	WithBase bool
	// SkipZero leaves out an arm whose every value past step 0 is 0 (a
	// collapsed arm, a line along the axis); the caption names it.
	SkipZero bool
	// Ref draws a thin dashed horizontal line at RefLine.
	Ref     bool
	RefLine float64
	// Samples draws against the responses generated before each step
	// (samplesX) instead of the step; a run that does not log them is
	// left out.
	Samples bool
	// Unit fixes the y axis to [0, 1] (an accuracy: avg@k, pass@k, maj@k).
	Unit bool
}

// okabeIto is the colour-blind-safe qualitative palette of M. Okabe and
// K. Ito, "Color Universal Design (CUD): how to make figures and
// presentations that are friendly to colorblind people" (2002/2008), in
// the order blue, orange, bluish green, vermillion, sky blue, reddish
// purple. Its black is the base policy's; its yellow (#F0E442) is left
// out, too faint on white for a thin line.
var okabeIto = []color.Color{
	color.RGBA{R: 0x00, G: 0x72, B: 0xB2, A: 0xFF},
	color.RGBA{R: 0xE6, G: 0x9F, B: 0x00, A: 0xFF},
	color.RGBA{R: 0x00, G: 0x9E, B: 0x73, A: 0xFF},
	color.RGBA{R: 0xD5, G: 0x5E, B: 0x00, A: 0xFF},
	color.RGBA{R: 0x56, G: 0xB4, B: 0xE9, A: 0xFF},
	color.RGBA{R: 0xCC, G: 0x79, B: 0xA7, A: 0xFF},
}

// lineDashes are the line styles crossed with the palette: solid, dashed,
// dotted, dash-dot; with the palette's 6 colours, 24 arms of a report each
// have their own (colour, style). markers go with them, for the points of
// a line with few.
var (
	lineDashes = [][]vg.Length{
		nil,
		{vg.Points(6), vg.Points(3)},
		{vg.Points(1.5), vg.Points(2.5)},
		{vg.Points(7), vg.Points(2.5), vg.Points(1.5), vg.Points(2.5)},
	}
	markers = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.BoxGlyph{}, draw.PyramidGlyph{}, draw.CrossGlyph{}}
)

// maxDistinctArms is how many arms get a look of their own.
var maxDistinctArms = len(okabeIto) * len(lineDashes)

// plotStyle gives each arm its place in the report's arm order, and with
// it its colour, line style and marker in every figure of the report: arm
// i has colour i mod 6 and style i div 6 (arms 0-5 solid, 6-11 dashed,
// ...); past 24 arms the looks repeat. The base policy is black and solid.
type plotStyle map[string]int

func (st plotStyle) color(arm string) color.Color {
	if arm == BaseArm {
		return color.Black
	}
	return okabeIto[st[arm]%len(okabeIto)]
}

func (st plotStyle) styleIndex(arm string) int {
	if arm == BaseArm {
		return 0
	}
	return st[arm] / len(okabeIto) % len(lineDashes)
}

// line is arm's line style.
func (st plotStyle) line(arm string) draw.LineStyle {
	return draw.LineStyle{Color: st.color(arm), Width: vg.Points(1.6), Dashes: lineDashes[st.styleIndex(arm)]}
}

// glyph is arm's marker.
func (st plotStyle) glyph(arm string) draw.GlyphStyle {
	return draw.GlyphStyle{Color: st.color(arm), Shape: markers[st.styleIndex(arm)], Radius: vg.Points(2.5)}
}

// accuracyRE matches the metric keys that are an accuracy in [0, 1].
var accuracyRE = regexp.MustCompile(`(^|/)((avg|pass|maj)@(\d+|k)|acc|accuracy)$`)

// isAccuracy reports whether metric key is an accuracy (avg@k, pass@k,
// maj@k, reward/acc), drawn on a y axis from 0 to 1.
func isAccuracy(key string) bool { return accuracyRE.MatchString(key) }

var evalKeyRE = regexp.MustCompile(`^val/([^/]+)/(avg|pass|maj)@(\d+|k)$`)

// axisLabel is the human label of a metric key on an axis; a key it does
// not know is its own label.
func axisLabel(key string) string {
	if m := evalKeyRE.FindStringSubmatch(key); m != nil {
		kind := map[string]string{"avg": "held-out accuracy", "pass": "pass@" + m[3], "maj": "majority-vote accuracy"}[m[2]]
		if m[2] == "pass" {
			if m[1] == "mean" {
				return kind + " (mean over eval sets)"
			}
			return kind + " on " + m[1]
		}
		if m[1] != "mean" {
			kind += " on " + m[1]
		}
		return kind + " (" + m[2] + "@" + m[3] + ")"
	}
	switch key {
	case "step":
		return "training step"
	case GeneratedTotalMetric:
		return "responses generated"
	case "reward/acc":
		return "training accuracy (reward/acc)"
	case "rollout/entropy":
		return "policy entropy (nats/token)"
	case "calib/ppl_incorrect / calib/ppl_correct":
		return "calibration ratio PPL(incorrect) / PPL(correct)"
	case "calib/auroc":
		return "calibration AUROC"
	case "critic/head_std":
		return "critic head std"
	case "simhash/occupied_cells":
		return "SimHash occupied cells"
	}
	return key
}

var passKeyRE = regexp.MustCompile(`^val/mean/pass@(\d+)$`)

// passCurve is pass@k vs k of eval set set at the final evaluation of each
// run of an arm: the mean and range over seeds for every k all its runs
// report.
func passCurve(rs []*armRun, set string, step func(*armRun) (map[string]float64, bool)) band {
	re := regexp.MustCompile(`^val/` + regexp.QuoteMeta(set) + `/pass@(\d+)$`)
	byK := map[int][]float64{}
	n := 0
	for _, r := range rs {
		row, ok := step(r)
		if !ok {
			continue
		}
		n++
		for key, v := range row {
			if m := re.FindStringSubmatch(key); m != nil {
				k, _ := strconv.Atoi(m[1])
				byK[k] = append(byK[k], v)
			}
		}
	}
	var b band
	var ks []int
	for k, v := range byK {
		if len(v) == n {
			ks = append(ks, k)
		}
	}
	sort.Ints(ks)
	for _, k := range ks {
		v := byK[k]
		b.X = append(b.X, float64(k))
		b.Mean = append(b.Mean, core.Mean(v))
		b.Lo = append(b.Lo, slices.Min(v))
		b.Hi = append(b.Hi, slices.Max(v))
	}
	return b
}

// lastEval is the last row of r with a val/mean/pass@ key; firstEval the
// first (the evaluation before training, when the run made one).
func lastEval(r *armRun) (map[string]float64, bool) {
	for i := len(r.Rows) - 1; i >= 0; i-- {
		for k := range r.Rows[i] {
			if passKeyRE.MatchString(k) {
				return r.Rows[i], true
			}
		}
	}
	return nil, false
}

func firstEval(r *armRun) (map[string]float64, bool) {
	for _, row := range r.Rows {
		if row["step"] != 0 {
			continue
		}
		for k := range row {
			if passKeyRE.MatchString(k) {
				return row, true
			}
		}
	}
	return nil, false
}

// drawnArm is what a figure drew of an arm: the style of each of its
// lines, and of its markers where a line had few points.
type drawnArm struct {
	Lines  []draw.LineStyle
	Glyphs []draw.GlyphStyle
}

// thumbs are the arm's legend thumbnail: its line, with its marker when the
// figure drew markers.
func (d *drawnArm) thumbs() []plot.Thumbnailer {
	th := []plot.Thumbnailer{&plotter.Line{LineStyle: d.Lines[0]}}
	if len(d.Glyphs) > 0 {
		th = append(th, &plotter.Scatter{GlyphStyle: d.Glyphs[0]})
	}
	return th
}

// drawPanel builds one plot, recording in drawn what it drew of each arm;
// it reports whether any line had data.
func drawPanel(ps panelSpec, runs map[string][]*armRun, st plotStyle, drawn map[string]*drawnArm, skipped *[]string) (*plot.Plot, bool, error) {
	p := plot.New()
	p.Title.Text = ps.Title
	p.X.Label.Text, p.Y.Label.Text = ps.XLabel, ps.YLabel
	p.Add(plotter.NewGrid())
	p.X.Tick.Marker, p.Y.Tick.Marker = readableTicks{}, readableTicks{}
	var all []float64
	hasData := false
	bands := make([]band, len(ps.Lines))
	for i, s := range ps.Lines {
		var b band
		switch {
		case ps.PassK && s.Arm == "base":
			var rs []*armRun
			for _, r := range runs {
				rs = append(rs, r...)
			}
			// The base row: the step-0 evaluation, the same policy and
			// eval draws in every arm of a seed; one run per seed.
			seen := map[uint64]bool{}
			var per []*armRun
			for _, r := range rs {
				if _, ok := firstEval(r); ok && !seen[r.Seed] {
					seen[r.Seed] = true
					per = append(per, r)
				}
			}
			b = passCurve(per, ps.Set, firstEval)
		case ps.PassK:
			b = passCurve(runs[s.Arm], ps.Set, lastEval)
		default:
			value := s.Value
			if value == nil {
				value = metricValue(s.Metric)
			}
			var base func(uint64) (float64, bool)
			if ps.WithBase {
				base = func(seed uint64) (float64, bool) {
					for _, r := range runs[BaseArm] {
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
			if ps.Samples {
				xOf = samplesX
			}
			b = seedBandAt(runs[s.Arm], value, ps.Smooth, ps.Median, base, xOf)
		}
		bands[i] = b
	}
	// Arms at 0 after the base are left out, unless every arm is.
	skip := make([]bool, len(ps.Lines))
	if ps.SkipZero {
		some := false
		for i, b := range bands {
			skip[i] = allZeroAfterBase(b)
			some = some || len(b.X) > 0 && !skip[i]
		}
		for i, s := range ps.Lines {
			if skip[i] && some {
				*skipped = append(*skipped, s.Arm)
			}
		}
		if !some {
			clear(skip)
		}
	}
	for i, b := range bands {
		if len(b.X) == 0 || ps.PassK && len(b.X) < 2 {
			skip[i] = true
		}
		if !skip[i] {
			hasData = true
			all = append(all, b.Lo...)
			all = append(all, b.Hi...)
		}
	}
	// The reference line spans the steps of the panel's runs.
	refFrom, refTo := math.Inf(1), math.Inf(-1)
	if hasData && ps.Ref {
		for _, s := range ps.Lines {
			for _, r := range runs[s.Arm] {
				if len(r.Rows) > 0 {
					refFrom, refTo = min(refFrom, r.Rows[0]["step"]), max(refTo, r.Rows[len(r.Rows)-1]["step"])
				}
			}
		}
		if refFrom < refTo {
			all = append(all, ps.RefLine)
		}
	}
	// A y axis on a log scale where the values span more than a factor of
	// 30 (not an accuracy's): drawn as log10 of the values on a linear axis
	// ticked at the values, since gonum's own log axis misplaces its label
	// and, with it, the panel's title.
	logY := !ps.Unit && spiky(all)
	fy := func(y float64) float64 {
		if logY {
			return math.Log10(y)
		}
		return y
	}
	for i, s := range ps.Lines {
		b := bands[i]
		if skip[i] {
			continue
		}
		c := st.color(s.Arm)
		if len(b.X) > 1 {
			poly := make(plotter.XYs, 0, 2*len(b.X))
			for i := range b.X {
				poly = append(poly, plotter.XY{X: b.X[i], Y: fy(b.Hi[i])})
			}
			for i := len(b.X) - 1; i >= 0; i-- {
				poly = append(poly, plotter.XY{X: b.X[i], Y: fy(b.Lo[i])})
			}
			pg, err := plotter.NewPolygon(poly)
			if err != nil {
				return nil, false, err
			}
			r, g, bl, _ := c.RGBA()
			pg.Color = color.NRGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(bl >> 8), A: 45}
			pg.LineStyle.Width = 0
			p.Add(pg)
		}
		xy := make(plotter.XYs, len(b.X))
		for i := range b.X {
			xy[i] = plotter.XY{X: b.X[i], Y: fy(b.Mean[i])}
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return nil, false, err
		}
		l.LineStyle = st.line(s.Arm)
		p.Add(l)
		d := drawn[s.Arm]
		if d == nil {
			d = &drawnArm{}
			drawn[s.Arm] = d
		}
		d.Lines = append(d.Lines, l.LineStyle)
		if len(xy) < 8 {
			sc, err := plotter.NewScatter(xy)
			if err != nil {
				return nil, false, err
			}
			sc.GlyphStyle = st.glyph(s.Arm)
			p.Add(sc)
			d.Glyphs = append(d.Glyphs, sc.GlyphStyle)
		}
	}
	if ps.PassK {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, powersOfTwo{}
	}
	if hasData && ps.Ref && refFrom < refTo {
		l, err := plotter.NewLine(plotter.XYs{{X: refFrom, Y: fy(ps.RefLine)}, {X: refTo, Y: fy(ps.RefLine)}})
		if err != nil {
			return nil, false, err
		}
		l.Color, l.Width, l.Dashes = color.Gray{Y: 90}, vg.Points(0.8), []vg.Length{vg.Points(2), vg.Points(2)}
		p.Add(l)
	}
	switch {
	case ps.Unit:
		// An accuracy: always on [0, 1], so that panels and figures compare.
		p.Y.Min, p.Y.Max = 0, 1
	case len(all) > 0 && slices.Min(all) == slices.Max(all) && all[0] >= 0:
		// A constant, non-negative value (all 0, say): gonum would span
		// v-1 to v+1, below 0.
		p.Y.Min, p.Y.Max = 0, max(1, 2*all[0])
	case logY:
		p.Y.Tick.Marker = log10Ticks{}
		p.Y.Label.Text += " (log scale)"
	}
	return p, hasData, nil
}

// powersOfTwo ticks a log2 k axis: 1, 2, 4, ...
type powersOfTwo struct{}

func (powersOfTwo) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for k := 1.0; k <= hi*1.0001; k *= 2 {
		if k >= lo*0.9999 {
			ts = append(ts, plot.Tick{Value: k, Label: strconv.Itoa(int(k))})
		}
	}
	return ts
}

// figureSpec is one image: its panels in a grid and one legend below them.
type figureSpec struct {
	Name, Caption string
	Panels        []panelSpec
}

// figure is a figureSpec drawn: its panels with data, its legend, and the
// markdown note that shows it (or says why it is not drawn, with no
// plots).
type figure struct {
	Name   string
	Plots  []*plot.Plot
	Legend []legendEntry
	// Drawn is what the figure drew of each arm.
	Drawn map[string]*drawnArm
	Note  string
}

// legendEntry is one line of a figure's legend.
type legendEntry struct {
	Text   string
	Thumbs []plot.Thumbnailer
}

// writePlots draws the report's figures into dir and returns the markdown
// lines that show (or explain the absence of) each. families split the
// arms into panels (critic-free and critic-based arms apart); every line
// is the mean over an arm's finished seeds with the range over seeds
// shaded.
func writePlots(spec *Spec, runs map[string][]*armRun, arms []string, families []family, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	figs, err := makeFigures(spec, runs, arms, families)
	if err != nil {
		return nil, err
	}
	var notes []string
	for _, f := range figs {
		if len(f.Plots) > 0 {
			if err := savePanels(f.Plots, f.Legend, filepath.Join(dir, f.Name)); err != nil {
				return nil, err
			}
		}
		if f.Note != "" {
			notes = append(notes, f.Note)
		}
	}
	return notes, nil
}

// makeFigures draws the report's figures (every arm in the same look in
// all of them) without writing them.
func makeFigures(spec *Spec, runs map[string][]*armRun, arms []string, families []family) ([]figure, error) {
	st := plotStyle{}
	for i, a := range arms {
		st[a] = i
	}
	valKey := ""
	for _, arm := range arms {
		for _, r := range runs[arm] {
			for _, row := range r.Rows {
				for k := range row {
					if strings.HasPrefix(k, "val/mean/avg@") && (valKey == "" || k < valKey) {
						valKey = k
					}
				}
			}
		}
	}
	// One panel per family: titled by the family where there are two, by
	// what it shows where there is one; the y axis says what it shows.
	perFamily := func(title, metric string, smooth int) []panelSpec {
		var ps []panelSpec
		for _, f := range families {
			pn := panelSpec{Title: title, XLabel: axisLabel("step"), YLabel: axisLabel(metric), Smooth: smooth, Unit: isAccuracy(metric)}
			if len(families) > 1 {
				pn.Title = f.Name
			}
			for _, a := range f.Arms {
				pn.Lines = append(pn.Lines, series{Arm: a, Metric: metric})
			}
			ps = append(ps, pn)
		}
		return ps
	}
	// Held-out accuracy starts at the base policy (step 0) where the bench
	// evaluated it, and leaves out arms that scored 0 everywhere.
	heldout := perFamily("held-out accuracy", valKey, 1)
	for i := range heldout {
		heldout[i].WithBase, heldout[i].SkipZero = spec.BaseEval, true
	}
	// Calibration as the paper's Figure 6 reads it: how much more
	// perplexing the incorrect responses are than the correct ones. 1 is
	// no separation. A moving median, because a batch's mean perplexity
	// of the incorrect responses spikes when one response degenerates.
	calib := perFamily("PPL(incorrect) / PPL(correct)", "calib/ppl_incorrect / calib/ppl_correct", 9)
	for i := range calib {
		calib[i].Median, calib[i].Ref, calib[i].RefLine = true, true, 1
		for j := range calib[i].Lines {
			calib[i].Lines[j].Metric += " in one step"
			calib[i].Lines[j].Value = ratioValue("calib/ppl_incorrect", "calib/ppl_correct")
		}
	}
	// pass@k panels: one per eval set (the mean over sets first), per family.
	sets := map[string]bool{}
	for _, rs := range runs {
		for _, r := range rs {
			if row, ok := lastEval(r); ok {
				for k := range row {
					if m := valKeyRE.FindStringSubmatch(k); m != nil && m[2] == "pass" && m[1] != "mean" {
						sets[m[1]] = true
					}
				}
			}
		}
	}
	passSets := append([]string{"mean"}, slices.Sorted(maps.Keys(sets))...)
	passPanels := func(f family) []panelSpec {
		var ps []panelSpec
		for _, set := range passSets {
			title, ylabel := "eval set "+set, "pass@k"
			if set == "mean" {
				title, ylabel = "mean over eval sets", "pass@k (mean over eval sets)"
			}
			pn := panelSpec{Title: title, XLabel: "k (log scale)", YLabel: ylabel, PassK: true, Set: set, Unit: true}
			pn.Lines = append(pn.Lines, series{Arm: BaseArm})
			for _, a := range f.Arms {
				pn.Lines = append(pn.Lines, series{Arm: a})
			}
			ps = append(ps, pn)
		}
		return ps
	}
	entropy := perFamily("policy entropy", "rollout/entropy", 5)
	// The same against the responses generated before each step: a step of
	// dynamic sampling draws batches until enough groups are kept, so equal
	// steps are not equal samples. Figures named *_samples.
	onSamples := func(ps []panelSpec) []panelSpec {
		out := slices.Clone(ps)
		for i := range out {
			out[i].Samples, out[i].XLabel = true, axisLabel(GeneratedTotalMetric)
		}
		return out
	}
	samplesNote := " vs the responses generated before the step (" + GeneratedTotalMetric + " less the step's own: every batch drawn, dynamic sampling's dropped groups included); where an arm's seeds generated different numbers, a point's x is their mean at that step"
	fromBase := map[bool]string{true: ", from the base policy at step 0", false: ""}[spec.BaseEval]
	figs := []figureSpec{
		{"heldout_accuracy", "Held-out accuracy (" + valKey + ", mean over eval sets) vs step" + fromBase, heldout},
		{"heldout_accuracy_samples", "Held-out accuracy (" + valKey + ", mean over eval sets; avg@k is the unbiased pass@1)" + samplesNote + map[bool]string{true: ", from the base policy at 0", false: ""}[spec.BaseEval], onSamples(heldout)},
		{"entropy", "Policy entropy of the rollouts (rollout/entropy, nats per token) vs step, each seed smoothed over 5 logged steps", entropy},
		{"entropy_samples", "Policy entropy of the rollouts (rollout/entropy, nats per token)" + samplesNote + "; each seed smoothed over 5 logged steps", onSamples(entropy)},
		{"calibration", "Calibration gap (the paper's Figure 6): the batch's mean perplexity of incorrect rollouts over that of correct ones (calib/ppl_incorrect / calib/ppl_correct) vs step; above 1, confidence tracks correctness; 1 (dotted), it no longer does. Each seed is smoothed by a moving median over 9 logged steps", calib},
		{"auroc", "Calibration AUROC (calib/auroc: perplexity separating correct from incorrect rollouts) vs step, each seed smoothed over 5 logged steps", perFamily("PPL AUROC", "calib/auroc", 5)},
		{"critic_head_std", "Critic head std on the training batch (critic/head_std, B_critic) vs step, arms with a critic", perFamily("critic head std", "critic/head_std", 5)},
		{"simhash_cells", "SimHash occupied cells (simhash/occupied_cells) vs step, arms with SimHash", perFamily("SimHash occupied cells", "simhash/occupied_cells", 1)},
	}
	for _, f := range families {
		name, caption := "passk", "pass@k vs k at the final evaluation, per eval set (unbiased from the eval's n samples per problem), with the base policy (the step-0 evaluation) in black"
		if len(families) > 1 {
			name = map[bool]string{true: "passk_critic", false: "passk_critic_free"}[f.Critic]
			caption += ": " + f.Name
		}
		figs = append(figs, figureSpec{name, caption, passPanels(f)})
	}
	var out []figure
	for _, f := range figs {
		samples := strings.HasSuffix(f.Name, "_samples")
		if valKey == "" && strings.HasPrefix(f.Name, "heldout_accuracy") {
			if !samples {
				out = append(out, figure{Name: f.Name, Note: "- Held-out accuracy: no evaluation in any finished run."})
			}
			continue
		}
		fig := figure{Name: f.Name, Drawn: map[string]*drawnArm{}}
		var skipped []string
		for _, ps := range f.Panels {
			p, ok, err := drawPanel(ps, runs, st, fig.Drawn, &skipped)
			if err != nil {
				return nil, err
			}
			if ok {
				fig.Plots = append(fig.Plots, p)
			}
		}
		if len(fig.Plots) == 0 {
			what := "the metric"
			if len(f.Panels) > 0 && len(f.Panels[0].Lines) > 0 && f.Panels[0].Lines[0].Metric != "" {
				what = f.Panels[0].Lines[0].Metric
			}
			if strings.HasPrefix(f.Name, "passk") {
				what = "val/mean/pass@k for two or more k"
			}
			if samples {
				// A bench made before the total existed: its per-step
				// figure says all there is; a note would only be noise.
				continue
			}
			fig.Note = fmt.Sprintf("- %s: no finished arm reports %s; not plotted.", f.Caption, what)
			out = append(out, fig)
			continue
		}
		for _, a := range append([]string{BaseArm}, arms...) {
			if d, ok := fig.Drawn[a]; ok {
				name := a
				if a == BaseArm {
					name = "base policy (step 0)"
				}
				fig.Legend = append(fig.Legend, legendEntry{name, d.thumbs()})
			}
		}
		caption := f.Caption
		if f.Panels[0].Unit {
			caption += "; the y axis spans 0 to 1"
		}
		caption += ". Lines: the mean over seeds; shaded: the range (min to max) over seeds"
		if len(skipped) > 0 {
			caption += fmt.Sprintf(". Not drawn, 0 at every point: %s", strings.Join(skipped, ", "))
		}
		if samples {
			if without := armsWithoutSamples(runs, arms); len(without) > 0 {
				caption += fmt.Sprintf(". Not drawn, no %s in their runs (made before the metric): %s", GeneratedTotalMetric, strings.Join(without, ", "))
			}
		}
		fig.Note = fmt.Sprintf("**%s.** (plots/%s.svg)\n\n![%s](plots/%s.png)\n", caption, f.Name, f.Name, f.Name)
		out = append(out, fig)
	}
	return out, nil
}

// armsWithoutSamples are the arms with finished runs none of which logs
// GeneratedTotalMetric, in arms' order.
func armsWithoutSamples(runs map[string][]*armRun, arms []string) []string {
	var out []string
	for _, a := range arms {
		rs := runs[a]
		if len(rs) > 0 && !slices.ContainsFunc(rs, func(r *armRun) bool { return samplesX(r) != nil }) {
			out = append(out, a)
		}
	}
	return out
}

// The size of a figure's parts, in points: a panel, and the legend's
// text, thumbnail and spacing.
const (
	panelW       = 4.3 * vg.Inch
	panelH       = 4 * vg.Inch
	figureDPI    = 110
	maxAspect    = 2.0 // a figure's width over its height, at most
	legendFont   = 10
	legendThumbW = vg.Length(36)
	legendGap    = vg.Length(5)  // between thumbnail and text
	legendColGap = vg.Length(16) // between columns
	legendRowPad = vg.Length(5)  // between rows
	legendMargin = vg.Length(8)  // above and below the legend
)

// legendStyle is the legend's text style.
func legendStyle() text.Style {
	return text.Style{Font: font.From(plot.DefaultFont, vg.Points(legendFont)), Handler: plot.DefaultTextHandler, YAlign: draw.YCenter}
}

// figureLayout places n panels and a legend of entries: the panels in rows
// of cols, as few rows as keep the figure's width at most maxAspect times
// its height, and the legend below them in legCols columns of legRows.
type figureLayout struct {
	Rows, Cols       int
	LegCols, LegRows int
	LegEntryW, LegH  vg.Length
	RowH             vg.Length
	W, H             vg.Length
}

func layoutFigure(n int, entries []string) figureLayout {
	sty := legendStyle()
	textW := vg.Length(0)
	for _, e := range entries {
		textW = max(textW, sty.Width(e))
	}
	entryW := legendThumbW + legendGap + textW + legendColGap
	rowH := sty.Height("Mg") + legendRowPad
	var l figureLayout
	for rows := 1; rows <= n; rows++ {
		cols := (n + rows - 1) / rows
		l = figureLayout{Rows: rows, Cols: cols, LegEntryW: entryW, RowH: rowH, W: vg.Length(cols) * panelW}
		if len(entries) > 0 {
			l.LegCols = max(1, min(len(entries), int((l.W-2*legendMargin+legendColGap)/entryW)))
			l.LegRows = (len(entries) + l.LegCols - 1) / l.LegCols
			// Balance the columns: as few as hold the rows.
			l.LegCols = (len(entries) + l.LegRows - 1) / l.LegRows
			l.LegH = vg.Length(l.LegRows)*rowH + 2*legendMargin
		}
		l.H = vg.Length(rows)*panelH + l.LegH
		if float64(l.W) <= maxAspect*float64(l.H) {
			break
		}
	}
	return l
}

// savePanels draws plots in a grid and the legend centred below them (off
// the data), into base.png and base.svg.
func savePanels(plots []*plot.Plot, legend []legendEntry, base string) error {
	var names []string
	for _, e := range legend {
		names = append(names, e.Text)
	}
	l := layoutFigure(len(plots), names)
	grid := make([][]*plot.Plot, l.Rows)
	for r := range grid {
		grid[r] = make([]*plot.Plot, l.Cols)
		for c := range grid[r] {
			if i := r*l.Cols + c; i < len(plots) {
				grid[r][c] = plots[i]
			}
		}
	}
	sty := legendStyle()
	draws := func(c vg.CanvasSizer) {
		dc := draw.New(c)
		panels := draw.Crop(dc, 0, 0, l.LegH, 0)
		tiles := draw.Tiles{Rows: l.Rows, Cols: l.Cols, PadX: vg.Millimeter * 6, PadY: vg.Millimeter * 5,
			PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
		canvases := plot.Align(grid, tiles, panels)
		for r := range grid {
			for c, p := range grid[r] {
				if p != nil {
					p.Draw(canvases[r][c])
				}
			}
		}
		// The legend: entries down the columns, the block centred.
		x0 := (l.W - (vg.Length(l.LegCols)*l.LegEntryW - legendColGap)) / 2
		for i, e := range legend {
			col, row := i/l.LegRows, i%l.LegRows
			x := x0 + vg.Length(col)*l.LegEntryW
			yc := l.LegH - legendMargin - (vg.Length(row)+0.5)*l.RowH
			th := draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{
				Min: vg.Point{X: x, Y: yc - l.RowH/2}, Max: vg.Point{X: x + legendThumbW, Y: yc + l.RowH/2}}}
			for _, t := range e.Thumbs {
				t.Thumbnail(&th)
			}
			dc.FillText(sty, vg.Point{X: x + legendThumbW + legendGap, Y: yc}, e.Text)
		}
	}
	img := vgimg.NewWith(vgimg.UseWH(l.W, l.H), vgimg.UseDPI(figureDPI))
	// A white background (vgimg starts transparent).
	img.SetColor(color.White)
	img.Fill(vgRect(l.W, l.H))
	draws(img)
	if err := writeCanvas(base+".png", vgimg.PngCanvas{Canvas: img}); err != nil {
		return err
	}
	svg := vgsvg.New(l.W, l.H)
	draws(svg)
	return writeCanvas(base+".svg", svg)
}

func vgRect(w, h vg.Length) vg.Path {
	var p vg.Path
	p.Move(vg.Point{})
	p.Line(vg.Point{X: w})
	p.Line(vg.Point{X: w, Y: h})
	p.Line(vg.Point{Y: h})
	p.Close()
	return p
}

func writeCanvas(path string, c io.WriterTo) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// armFamilies splits arms into the critic-free (GRPO-like) and the
// critic-based (PPO-like) family, each drawn in its own panel; one family
// when every arm is of one kind.
func armFamilies(spec *Spec, dir string, arms []string) ([]family, error) {
	free := family{Name: "critic-free (GRPO family)"}
	critic := family{Name: "with a critic (PPO family)", Critic: true}
	for _, name := range arms {
		i := slices.IndexFunc(spec.Arms, func(a Arm) bool { return a.Name == name })
		if i < 0 || len(spec.Seeds) == 0 {
			return nil, fmt.Errorf("plots: no arm %q in the bench file", name)
		}
		cfg, err := spec.ArmConfig(dir, spec.Arms[i], spec.Seeds[0])
		if err != nil {
			return nil, err
		}
		algo, err := session.BuildAlgorithm(cfg)
		if err != nil {
			return nil, fmt.Errorf("plots: arm %s: %w", name, err)
		}
		if algo.NeedsCritic() {
			critic.Arms = append(critic.Arms, name)
		} else {
			free.Arms = append(free.Arms, name)
		}
	}
	var out []family
	for _, f := range []family{free, critic} {
		if len(f.Arms) > 0 {
			out = append(out, f)
		}
	}
	return out, nil
}
