package bench

import (
	"cmp"
	"image"
	"image/color"
	"image/png"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// palette is Paul Tol's "muted" qualitative scheme for up to nine
// categories, colour-blind safe (P. Tol, "Colour Schemes", SRON technical
// note SRON/EPS/TN/09-002, 2021), ordered so that neighbouring arms
// differ most: indigo, rose, green, sand, cyan, wine, teal, olive,
// purple. Crossed with the three line styles it gives 27 looks, one per
// arm of a report; the base policy is black.
var palette = []color.RGBA{
	{R: 0x33, G: 0x22, B: 0x88, A: 0xFF},
	{R: 0xCC, G: 0x66, B: 0x77, A: 0xFF},
	{R: 0x11, G: 0x77, B: 0x33, A: 0xFF},
	{R: 0xDD, G: 0xCC, B: 0x77, A: 0xFF},
	{R: 0x88, G: 0xCC, B: 0xEE, A: 0xFF},
	{R: 0x88, G: 0x22, B: 0x55, A: 0xFF},
	{R: 0x44, G: 0xAA, B: 0x99, A: 0xFF},
	{R: 0x99, G: 0x99, B: 0x33, A: 0xFF},
	{R: 0xAA, G: 0x44, B: 0x99, A: 0xFF},
}

// lineDashes are the line styles crossed with the palette (solid, dashed,
// dotted), each with its marker (circle, square, triangle).
var (
	lineDashes = [][]vg.Length{
		nil,
		{vg.Points(5), vg.Points(2.5)},
		{vg.Points(1.2), vg.Points(2)},
	}
	markers = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.BoxGlyph{}, draw.PyramidGlyph{}}
)

func (l look) colour() color.RGBA {
	if l.Colour < 0 {
		return color.RGBA{A: 0xFF}
	}
	return palette[l.Colour%len(palette)]
}

func (l look) line() draw.LineStyle {
	return draw.LineStyle{Color: l.colour(), Width: vg.Points(1.8), Dashes: lineDashes[l.Style%len(lineDashes)]}
}

// seedLine is a seed's thin line: opaque, in a lighter shade of the
// arm's colour (seedShade). Translucent lines of several arms that cross
// or coincide (every arm's seed s starts at the same base evaluation)
// blended their hues into grey, and at 0.6 points with alpha 0.38 a
// light or dull colour (sand, cyan, olive) washed out to near white or
// grey; an opaque line keeps the arm's hue where it is drawn.
func (l look) seedLine() draw.LineStyle {
	return draw.LineStyle{Color: seedShade(l.colour()), Width: vg.Points(0.9)}
}

// seedShade lightens c to HSL lightness seedLightness (a colour already
// lighter is kept), its hue and saturation unchanged: a tint that stays
// the colour, where mixing with white would also grey it.
func seedShade(c color.RGBA) color.RGBA {
	r, g, b := float64(c.R)/255, float64(c.G)/255, float64(c.B)/255
	mx, mn := max(r, g, b), min(r, g, b)
	light := (mx + mn) / 2
	if light >= seedLightness {
		return c
	}
	sat := 0.0
	if mx > mn {
		sat = (mx - mn) / (1 - math.Abs(2*light-1))
	}
	// Each channel's place between the min and max is the hue; rescale
	// the chroma to the new lightness at the same saturation.
	chroma := (1 - math.Abs(2*seedLightness-1)) * sat
	lo := seedLightness - chroma/2
	ch := func(v float64) uint8 {
		t := 0.0
		if mx > mn {
			t = (v - mn) / (mx - mn)
		}
		return uint8(math.Round(255 * (lo + t*chroma)))
	}
	return color.RGBA{R: ch(r), G: ch(g), B: ch(b), A: 0xFF}
}

// seedLightness is the HSL lightness of the seeds' lines.
const seedLightness = 0.68

func (l look) glyph() draw.GlyphStyle {
	return draw.GlyphStyle{Color: l.colour(), Shape: markers[l.Style%len(markers)], Radius: vg.Points(2.6)}
}

// The size of a figure's parts, in points.
const (
	panelW       = 4.3 * vg.Inch
	panelH       = 3.6 * vg.Inch
	figureDPI    = 80
	maxAspect    = 2.0 // a figure's width over its height, at most
	legendFont   = 10
	noteFont     = 9
	legendThumbW = vg.Length(36)
	legendGap    = vg.Length(5)  // between thumbnail and text
	legendColGap = vg.Length(16) // between columns
	legendRowPad = vg.Length(5)  // between rows
	legendMargin = vg.Length(8)  // above and below the legend
)

func legendStyle() text.Style {
	return text.Style{Font: font.From(plot.DefaultFont, vg.Points(legendFont)), Handler: plot.DefaultTextHandler, YAlign: draw.YCenter}
}

func noteStyle() text.Style {
	return text.Style{Color: color.Gray{Y: 40}, Font: font.From(plot.DefaultFont, vg.Points(noteFont)), Handler: plot.DefaultTextHandler, YAlign: draw.YCenter}
}

// figureLayout places n panels and a legend of entries: the panels in rows
// of cols, as few rows as keep the figure's width at most maxAspect times
// its height, the legend below them in legCols columns of legRows.
type figureLayout struct {
	Rows, Cols       int
	LegCols, LegRows int
	LegEntryW, LegH  vg.Length
	RowH             vg.Length
	W, H             vg.Length
}

func layoutFigure(n int, entries []string, extraH vg.Length) figureLayout {
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
		l = figureLayout{Rows: rows, Cols: cols, LegEntryW: entryW, RowH: rowH, W: vg.Length(max(cols, 2)) * panelW}
		if len(entries) > 0 {
			l.LegCols = max(1, min(len(entries), int((l.W-2*legendMargin+legendColGap)/entryW)))
			l.LegRows = (len(entries) + l.LegCols - 1) / l.LegCols
			l.LegCols = (len(entries) + l.LegRows - 1) / l.LegRows
			l.LegH = vg.Length(l.LegRows)*rowH + 2*legendMargin
		}
		l.H = vg.Length(rows)*panelH + l.LegH + extraH
		if float64(l.W) <= maxAspect*float64(l.H) {
			break
		}
	}
	return l
}

// wrapText breaks s into lines no wider than w in sty.
func wrapText(s string, sty text.Style, w vg.Length) []string {
	var lines []string
	cur := ""
	for _, word := range strings.Fields(s) {
		try := strings.TrimSpace(cur + " " + word)
		if cur != "" && sty.Width(try) > w {
			lines = append(lines, cur)
			cur = word
			continue
		}
		cur = try
	}
	if cur != "" {
		lines = append(lines, cur)
	}
	return lines
}

// fixedTicks are a spec's ticks, labelled by tickLabel.
func fixedTicks(vs []float64) plot.ConstantTicks {
	var ts []plot.Tick
	for _, v := range vs {
		ts = append(ts, plot.Tick{Value: v, Label: tickLabel(v)})
	}
	return ts
}

// panelPlot draws one panel of f.
func panelPlot(f figSpec, p panelFig) (*plot.Plot, error) {
	pl := plot.New()
	pl.Title.Text = p.Title
	pl.X.Label.Text, pl.Y.Label.Text = f.XLabel, p.YLabel
	pl.Add(plotter.NewGrid())
	pl.X.Tick.Marker, pl.Y.Tick.Marker = fixedTicks(f.XTicks), fixedTicks(f.YTicks)
	if f.LogX {
		pl.X.Scale = plot.LogScale{}
	}
	toXY := func(pts []xy) plotter.XYs {
		out := make(plotter.XYs, len(pts))
		for i, q := range pts {
			out[i] = plotter.XY{X: q.X, Y: q.Y}
		}
		return out
	}
	for _, l := range p.Lines {
		for _, s := range l.Seeds {
			if len(s) < 2 {
				continue
			}
			ln, err := plotter.NewLine(toXY(s))
			if err != nil {
				return nil, err
			}
			ln.LineStyle = l.Look.seedLine()
			pl.Add(ln)
		}
	}
	if p.Ref != nil {
		ln, err := plotter.NewLine(plotter.XYs{{X: f.XMin, Y: *p.Ref}, {X: f.XMax, Y: *p.Ref}})
		if err != nil {
			return nil, err
		}
		ln.Color, ln.Width, ln.Dashes = color.Gray{Y: 90}, vg.Points(0.8), []vg.Length{vg.Points(2), vg.Points(2)}
		pl.Add(ln)
	}
	for _, l := range p.Lines {
		ln, err := plotter.NewLine(toXY(l.Mean))
		if err != nil {
			return nil, err
		}
		ln.LineStyle = l.Look.line()
		pl.Add(ln)
		// Markers: every point of a short line, else about 8 along it.
		every := max(1, len(l.Mean)/8)
		var pts plotter.XYs
		for i, q := range l.Mean {
			if i%every == 0 && q.Y >= f.YMin && q.Y <= f.YMax {
				pts = append(pts, plotter.XY{X: q.X, Y: q.Y})
			}
		}
		if len(pts) > 0 {
			sc, err := plotter.NewScatter(pts)
			if err != nil {
				return nil, err
			}
			sc.GlyphStyle = l.Look.glyph()
			pl.Add(sc)
		}
	}
	// After the lines: Add widens the axes to each plotter's data, which
	// undid a clipped range (the lines ran past a y axis cut for a spike).
	pl.X.Min, pl.X.Max, pl.Y.Min, pl.Y.Max = f.XMin, f.XMax, f.YMin, f.YMax
	return pl, nil
}

// renderFig draws f into path (PNG): its panels in a grid with one shared
// y range, the legend below them and the note below that.
func renderFig(f figSpec, path string) error {
	var plots []*plot.Plot
	for _, p := range f.Panels {
		pl, err := panelPlot(f, p)
		if err != nil {
			return err
		}
		plots = append(plots, pl)
	}
	var names []string
	for _, e := range f.Legend {
		names = append(names, e.Text)
	}
	nsty := noteStyle()
	// The note's height depends on the width, the width on the panels.
	l0 := layoutFigure(len(plots), names, 0)
	noteLines := wrapText(f.Note, nsty, l0.W-4*legendMargin)
	noteRowH := nsty.Height("Mg") + 2
	noteH := vg.Length(len(noteLines))*noteRowH + legendMargin
	l := layoutFigure(len(plots), names, noteH)
	grid := make([][]*plot.Plot, l.Rows)
	for r := range grid {
		grid[r] = make([]*plot.Plot, l.Cols)
		for c := range grid[r] {
			if i := r*l.Cols + c; i < len(plots) {
				grid[r][c] = plots[i]
			}
		}
	}
	img := vgimg.NewWith(vgimg.UseWH(l.W, l.H), vgimg.UseDPI(figureDPI))
	img.SetColor(color.White)
	img.Fill(vgRect(l.W, l.H))
	dc := draw.New(img)
	panelsW := vg.Length(l.Cols) * panelW
	panels := draw.Crop(dc, (l.W-panelsW)/2, -(l.W-panelsW)/2, l.LegH+noteH, 0)
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
	sty := legendStyle()
	x0 := (l.W - (vg.Length(l.LegCols)*l.LegEntryW - legendColGap)) / 2
	for i, e := range f.Legend {
		col, row := i/l.LegRows, i%l.LegRows
		x := x0 + vg.Length(col)*l.LegEntryW
		yc := noteH + l.LegH - legendMargin - (vg.Length(row)+0.5)*l.RowH
		th := draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{
			Min: vg.Point{X: x, Y: yc - l.RowH/2}, Max: vg.Point{X: x + legendThumbW, Y: yc + l.RowH/2}}}
		(&plotter.Line{LineStyle: e.Look.line()}).Thumbnail(&th)
		(&plotter.Scatter{GlyphStyle: e.Look.glyph()}).Thumbnail(&th)
		dc.FillText(sty, vg.Point{X: x + legendThumbW + legendGap, Y: yc}, e.Text)
	}
	for i, s := range noteLines {
		dc.FillText(nsty, vg.Point{X: 2 * legendMargin, Y: noteH - legendMargin/2 - (vg.Length(i)+0.5)*noteRowH}, s)
	}
	return writePNG(path, img)
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

// writePNG writes img's picture to path at png's best compression, in
// 256 colours (paletted): a third of the size of the full-colour image
// (the committed reports hold over 100 figures within the repository's
// size limit).
func writePNG(path string, img *vgimg.Canvas) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(f, paletted(img.Image())); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// paletted is im in its 256 most frequent colours, every other colour (an
// anti-aliased edge's blend) drawn as the nearest of them, without
// dithering: a figure's colours are few (white, the greys of text and
// grid, each arm's colour and seed shade), so the edges lose little.
// Ties in frequency go to the smaller colour value, so the same image
// gives the same bytes.
func paletted(im image.Image) image.Image {
	b := im.Bounds()
	count := map[color.RGBA]int{}
	at := func(x, y int) color.RGBA {
		r, g, bl, a := im.At(x, y).RGBA()
		return color.RGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(bl >> 8), A: uint8(a >> 8)}
	}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			count[at(x, y)]++
		}
	}
	cols := slices.Collect(maps.Keys(count))
	key := func(c color.RGBA) uint32 { return uint32(c.R)<<24 | uint32(c.G)<<16 | uint32(c.B)<<8 | uint32(c.A) }
	slices.SortFunc(cols, func(p, q color.RGBA) int {
		if n := cmp.Compare(count[q], count[p]); n != 0 {
			return n
		}
		return cmp.Compare(key(p), key(q))
	})
	if len(cols) > 256 {
		cols = cols[:256]
	}
	pal := make(color.Palette, len(cols))
	index := map[color.RGBA]uint8{}
	for i, c := range cols {
		pal[i] = c
		index[c] = uint8(i)
	}
	out := image.NewPaletted(b, pal)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := at(x, y)
			i, ok := index[c]
			if !ok {
				i = uint8(nearest(cols, c))
				index[c] = i
			}
			out.SetColorIndex(x, y, i)
		}
	}
	return out
}

// nearest is the index of the colour of cols closest to c (squared
// distance over the four channels; the first of equals).
func nearest(cols []color.RGBA, c color.RGBA) int {
	best, bestD := 0, math.MaxInt
	for i, p := range cols {
		dr, dg, db, da := int(p.R)-int(c.R), int(p.G)-int(c.G), int(p.B)-int(c.B), int(p.A)-int(c.A)
		if d := dr*dr + dg*dg + db*db + da*da; d < bestD {
			best, bestD = i, d
		}
	}
	return best
}

// removeOldPlots deletes the figures a report wrote before (PNG and SVG),
// so a figure no longer drawn does not stay behind.
func removeOldPlots(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, pat := range []string{"*.png", "*.svg"} {
		old, err := filepath.Glob(filepath.Join(dir, pat))
		if err != nil {
			return err
		}
		for _, f := range old {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	return nil
}
