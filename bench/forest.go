package bench

import (
	"fmt"
	"image/color"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// ForestFile is the forest plot of a report's claims, under plots/.
const ForestFile = "forest.png"

// forestRow is one claim in the forest plot.
type forestRow struct {
	Label     string
	D, Lo, Hi float64
	Verdict   string // after Holm
}

// forestGroup is a family's claims (a metric's, unless claims name one)
// on one effect axis.
type forestGroup struct {
	Title, XLabel string
	Rows          []forestRow
	XMin, XMax    float64
	XTicks        []float64
}

// forestSpec is the forest plot as data: what the figure check inspects.
type forestSpec struct {
	Groups []forestGroup
	Note   string
}

// verdictMarks are the markers of the verdicts after Holm.
var verdictMarks = []struct {
	Verdict string
	Style   draw.GlyphStyle
}{
	{"held", draw.GlyphStyle{Color: color.RGBA{R: 0x11, G: 0x77, B: 0x33, A: 0xFF}, Shape: draw.CircleGlyph{}, Radius: vg.Points(3.5)}},
	{"not held", draw.GlyphStyle{Color: color.RGBA{R: 0xCC, G: 0x33, B: 0x11, A: 0xFF}, Shape: draw.BoxGlyph{}, Radius: vg.Points(3.5)}},
	{"equivalent", draw.GlyphStyle{Color: color.RGBA{R: 0x00, G: 0x77, B: 0xBB, A: 0xFF}, Shape: draw.PyramidGlyph{}, Radius: vg.Points(3.8)}},
	{"inconclusive", draw.GlyphStyle{Color: color.Gray{Y: 110}, Shape: draw.RingGlyph{}, Radius: vg.Points(3.2)}},
	{"exploratory", draw.GlyphStyle{Color: color.Gray{Y: 110}, Shape: draw.CrossGlyph{}, Radius: vg.Points(3.2)}},
}

func verdictGlyph(v string) draw.GlyphStyle {
	for _, m := range verdictMarks {
		if m.Verdict == v {
			return m.Style
		}
	}
	return verdictMarks[3].Style
}

// buildForest groups the claims with an effect and an interval by family,
// in the order of their first claim; ok is false when none has both.
func buildForest(vs []ClaimVerdict) (forestSpec, bool) {
	var f forestSpec
	idx := map[string]int{}
	var missing []string
	for _, v := range vs {
		if v.DeltaMean == nil || v.CILow == nil || v.CIHigh == nil {
			missing = append(missing, v.Claim)
			continue
		}
		fam := v.Family
		if fam == "" {
			fam = v.Metric
		}
		i, ok := idx[fam]
		if !ok {
			i = len(f.Groups)
			idx[fam] = i
			f.Groups = append(f.Groups, forestGroup{Title: axisLabel(fam), XLabel: "effect d on " + axisLabel(v.Metric)})
		}
		label := v.Claim
		if len(v.Arms) == 2 {
			label = v.Arms[0] + " vs " + v.Arms[1]
			if v.At != "" {
				label += " (at equal " + v.At + ")"
			}
		}
		f.Groups[i].Rows = append(f.Groups[i].Rows, forestRow{Label: label, D: *v.DeltaMean, Lo: *v.CILow, Hi: *v.CIHigh, Verdict: v.VerdictHolm})
	}
	for gi := range f.Groups {
		g := &f.Groups[gi]
		seen := map[string]int{}
		for _, r := range g.Rows {
			seen[r.Label]++
		}
		for ri := range g.Rows {
			if seen[g.Rows[ri].Label] > 1 {
				g.Rows[ri].Label = vsClaim(vs, g.Title, ri, g.Rows[ri].Label)
			}
		}
		lo, hi := 0.0, 0.0
		for _, r := range g.Rows {
			lo, hi = min(lo, r.Lo), max(hi, r.Hi)
		}
		pad := 0.05 * (hi - lo)
		if pad == 0 {
			pad = 1
		}
		g.XMin, g.XMax = lo-pad, hi+pad
		g.XTicks = roundTicks(g.XMin, g.XMax, 6)
	}
	f.Note = "Point: the effect d, the mean over paired seeds of (claimed-better arm minus the other arm), sign flipped where lower is better; " +
		"bar: its 95% interval; dotted: no effect. Marker: the verdict after Holm's correction within the family. One panel per family, each on its metric's scale."
	if len(missing) > 0 {
		f.Note += " No effect computed (not drawn): " + strings.Join(missing, ", ") + "."
	}
	return f, len(f.Groups) > 0
}

// vsClaim is a row label made unique by its claim's name.
func vsClaim(vs []ClaimVerdict, _ string, _ int, label string) string {
	for _, v := range vs {
		if len(v.Arms) == 2 && v.Arms[0]+" vs "+v.Arms[1] == strings.SplitN(label, " (", 2)[0] {
			return v.Claim
		}
	}
	return label
}

// WriteForest draws the forest plot of the claims' verdicts into
// plotsDir/forest.png and returns the results.md lines that show it; ""
// when no claim has an effect and interval.
func WriteForest(plotsDir string, vs []ClaimVerdict) (string, error) {
	f, ok := buildForest(vs)
	if !ok {
		return "", nil
	}
	if err := renderForest(f, filepath.Join(plotsDir, ForestFile)); err != nil {
		return "", err
	}
	n := 0
	for _, g := range f.Groups {
		n += len(g.Rows)
	}
	return fmt.Sprintf("**Every claim's effect with its 95%% interval (%d claims, %d families). %s**\n\n![forest](plots/%s)\n", n, len(f.Groups), f.Note, ForestFile), nil
}

const (
	forestRowH   = vg.Length(18)
	forestHeadH  = vg.Length(72) // a stacked panel's title and x axis
	forestW      = 8.6 * vg.Inch
	forestLegend = vg.Length(26)
	forestPanelW = 2.4 * vg.Inch // a side-by-side panel's plot area and ticks
	forestMinRow = 6             // side by side from this many claims a family
)

// sideBySide reports whether f's families are drawn side by side, one
// column each with the claims' labels once on the left: two or more
// families with the same rows in the same order (the leaderboard's arms
// against grpo on each metric), six or more of them. Else the families
// are stacked, each with its own rows.
func sideBySide(f forestSpec) bool {
	if len(f.Groups) < 2 || len(f.Groups[0].Rows) < forestMinRow {
		return false
	}
	for _, g := range f.Groups[1:] {
		if len(g.Rows) != len(f.Groups[0].Rows) {
			return false
		}
		for i, r := range g.Rows {
			if r.Label != f.Groups[0].Rows[i].Label {
				return false
			}
		}
	}
	return true
}

// forestPanel is one family's plot: its rows top to bottom, every other
// one shaded so that a row can be followed from its label across the
// panels, each row's interval and effect in its verdict's colour and
// marker, a dotted line at no effect. labels false leaves the row labels
// off (a side-by-side panel right of the first); width, when set, wraps
// the title and x label to it.
func forestPanel(g forestGroup, labels bool, width vg.Length) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text, p.X.Label.Text = g.Title, g.XLabel
	if width > 0 {
		p.Title.Text = strings.Join(wrapText(g.Title, p.Title.TextStyle, width), "\n")
		p.X.Label.Text = strings.Join(wrapText(g.XLabel, p.X.Label.TextStyle, width), "\n")
	}
	n := len(g.Rows)
	p.Y.Min, p.Y.Max = -0.5, float64(n)-0.5
	var yt plot.ConstantTicks
	for i, r := range g.Rows {
		label := r.Label
		if !labels {
			label = ""
		}
		yt = append(yt, plot.Tick{Value: float64(n - 1 - i), Label: label})
	}
	p.Y.Tick.Marker = yt
	p.X.Tick.Marker = fixedTicks(g.XTicks)
	for i := 0; i < n; i += 2 {
		y := float64(n - 1 - i)
		band, err := plotter.NewPolygon(plotter.XYs{{X: g.XMin, Y: y - 0.5}, {X: g.XMax, Y: y - 0.5}, {X: g.XMax, Y: y + 0.5}, {X: g.XMin, Y: y + 0.5}})
		if err != nil {
			return nil, err
		}
		band.Color, band.LineStyle.Width = color.Gray{Y: 240}, 0
		p.Add(band)
	}
	grid := plotter.NewGrid()
	grid.Horizontal.Width = 0 // the bands mark the rows
	p.Add(grid)
	zero, err := plotter.NewLine(plotter.XYs{{X: 0, Y: p.Y.Min}, {X: 0, Y: p.Y.Max}})
	if err != nil {
		return nil, err
	}
	zero.Color, zero.Width, zero.Dashes = color.Gray{Y: 60}, vg.Points(0.8), []vg.Length{vg.Points(2), vg.Points(2)}
	p.Add(zero)
	for i, r := range g.Rows {
		y := float64(n - 1 - i)
		ci, err := plotter.NewLine(plotter.XYs{{X: r.Lo, Y: y}, {X: r.Hi, Y: y}})
		if err != nil {
			return nil, err
		}
		gs := verdictGlyph(r.Verdict)
		ci.Color, ci.Width = gs.Color, vg.Points(1.6)
		p.Add(ci)
		sc, err := plotter.NewScatter(plotter.XYs{{X: r.D, Y: y}})
		if err != nil {
			return nil, err
		}
		sc.GlyphStyle = gs
		p.Add(sc)
	}
	// After the plotters, which widen the axes to their data.
	p.X.Min, p.X.Max = g.XMin, g.XMax
	p.Y.Min, p.Y.Max = -0.5, float64(n)-0.5
	return p, nil
}

// renderForest draws f: the families side by side (sideBySide) or
// stacked, the verdicts' legend and the note below.
func renderForest(f forestSpec, path string) error {
	nsty := noteStyle()
	side := sideBySide(f)
	w := forestW
	var labelW vg.Length
	if side {
		tick := plot.New().Y.Tick.Label
		for _, r := range f.Groups[0].Rows {
			labelW = max(labelW, tick.Width(r.Label))
		}
		labelW += 12
		w = max(forestW, labelW+vg.Length(len(f.Groups))*forestPanelW+4*legendMargin)
	}
	noteLines := wrapText(f.Note, nsty, w-4*legendMargin)
	noteRowH := nsty.Height("Mg") + 2
	noteH := vg.Length(len(noteLines))*noteRowH + legendMargin
	h := forestLegend + noteH
	if side {
		h += forestHeadH + 2*noteRowH + vg.Length(len(f.Groups[0].Rows))*forestRowH
	} else {
		for _, g := range f.Groups {
			h += forestHeadH + vg.Length(len(g.Rows))*forestRowH
		}
	}
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(figureDPI))
	img.SetColor(color.White)
	img.Fill(vgRect(w, h))
	dc := draw.New(img)
	if side {
		var row []*plot.Plot
		for i, g := range f.Groups {
			p, err := forestPanel(g, i == 0, forestPanelW-16)
			if err != nil {
				return err
			}
			row = append(row, p)
		}
		area := draw.Crop(dc, legendMargin, -2*legendMargin, forestLegend+noteH, -6)
		for i, c := range alignRow(row, area, vg.Millimeter*5) {
			row[i].Draw(c)
		}
	} else {
		top := h
		for _, g := range f.Groups {
			gh := forestHeadH + vg.Length(len(g.Rows))*forestRowH
			p, err := forestPanel(g, true, 0)
			if err != nil {
				return err
			}
			p.Draw(draw.Crop(dc, legendMargin, -2*legendMargin, top-gh, -(h-top)-10))
			top -= gh
		}
	}
	// The verdicts' legend, centred on one line.
	sty := legendStyle()
	var lw vg.Length
	for _, m := range verdictMarks {
		lw += 14 + legendGap + sty.Width("after Holm: "+m.Verdict) + legendColGap
	}
	x := (w - lw) / 2
	yc := noteH + forestLegend/2
	for _, m := range verdictMarks {
		dc.DrawGlyph(m.Style, vg.Point{X: x + 7, Y: yc})
		dc.FillText(sty, vg.Point{X: x + 14 + legendGap, Y: yc}, "after Holm: "+m.Verdict)
		x += 14 + legendGap + sty.Width("after Holm: "+m.Verdict) + legendColGap
	}
	for i, s := range noteLines {
		dc.FillText(nsty, vg.Point{X: 2 * legendMargin, Y: noteH - legendMargin/2 - (vg.Length(i)+0.5)*noteRowH}, s)
	}
	return writePNG(path, img)
}

// alignRow places plots side by side in c, gap apart, so that their data
// areas have one width and one height (plot.Align's widths differed by
// up to 60%: a plot's margins change with its width, so they are measured
// again at the widths found, until they settle).
func alignRow(plots []*plot.Plot, c draw.Canvas, gap vg.Length) []draw.Canvas {
	n := len(plots)
	total := c.Max.X - c.Min.X - vg.Length(n-1)*gap
	widths := make([]vg.Length, n)
	for i := range widths {
		widths[i] = total / vg.Length(n)
	}
	place := func() []draw.Canvas {
		out := make([]draw.Canvas, n)
		x := c.Min.X
		for i, w := range widths {
			out[i] = draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{Min: vg.Point{X: x, Y: c.Min.Y}, Max: vg.Point{X: x + w, Y: c.Max.Y}}}
			x += w + gap
		}
		return out
	}
	for range 4 {
		cs := place()
		var margins vg.Length
		m := make([]vg.Length, n)
		for i, p := range plots {
			d := p.DataCanvas(cs[i])
			m[i] = (cs[i].Max.X - cs[i].Min.X) - (d.Max.X - d.Min.X)
			margins += m[i]
		}
		data := (total - margins) / vg.Length(n)
		for i := range widths {
			widths[i] = m[i] + data
		}
	}
	// One height too, so the rows line up across the panels: each data
	// area from the highest bottom margin to the lowest top (a title or
	// x label wrapped to more lines takes more).
	cs := place()
	var bottom, top vg.Length
	for i, p := range plots {
		d := p.DataCanvas(cs[i])
		bottom, top = max(bottom, d.Min.Y-cs[i].Min.Y), max(top, cs[i].Max.Y-d.Max.Y)
	}
	for i, p := range plots {
		d := p.DataCanvas(cs[i])
		cs[i].Min.Y += bottom - (d.Min.Y - cs[i].Min.Y)
		cs[i].Max.Y -= top - (cs[i].Max.Y - d.Max.Y)
	}
	return cs
}
