package bench

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// curve is the mean over an arm's seeds of a metric at each step where
// any seed has it.
func curve(rs []*armRun, metric string) plotter.XYs {
	sum := map[int]float64{}
	cnt := map[int]int{}
	for _, r := range rs {
		for _, row := range r.Rows {
			v, ok := row[metric]
			if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			s := int(row["step"])
			sum[s] += v
			cnt[s]++
		}
	}
	var steps []int
	for s := range sum {
		steps = append(steps, s)
	}
	sort.Ints(steps)
	xy := make(plotter.XYs, 0, len(steps))
	for _, s := range steps {
		xy = append(xy, plotter.XY{X: float64(s), Y: sum[s] / float64(cnt[s])})
	}
	return xy
}

// panel is one plot of a figure: one metric, one line per arm.
type panel struct {
	Title, YLabel, Metric string
}

// figure is a row of panels saved as NAME.png and NAME.svg.
type figure struct {
	Name, Caption string
	Panels        []panel
}

// writePlots draws the report's figures into dir and returns the
// markdown lines that show (or explain the absence of) each.
func writePlots(spec *Spec, runs map[string][]*armRun, arms []string, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
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
	figs := []figure{
		{"heldout_accuracy", "Held-out accuracy (" + valKey + ", mean over eval sets) vs step",
			[]panel{{"held-out accuracy", valKey, valKey}}},
		{"entropy", "Policy entropy of the rollouts (rollout/entropy, nats per token) vs step",
			[]panel{{"policy entropy", "rollout/entropy", "rollout/entropy"}}},
		{"calibration", "Calibration: mean response perplexity of correct (left) and incorrect (right) rollouts vs step",
			[]panel{{"perplexity of correct responses", "calib/ppl_correct", "calib/ppl_correct"},
				{"perplexity of incorrect responses", "calib/ppl_incorrect", "calib/ppl_incorrect"}}},
		{"critic_head_std", "Critic head std on the training batch (critic/head_std) vs step, arms with a critic",
			[]panel{{"critic head std", "critic/head_std", "critic/head_std"}}},
		{"simhash_cells", "SimHash occupied cells (simhash/occupied_cells) vs step, arms with SimHash",
			[]panel{{"SimHash occupied cells", "simhash/occupied_cells", "simhash/occupied_cells"}}},
	}
	var notes []string
	for _, f := range figs {
		if valKey == "" && f.Name == "heldout_accuracy" {
			notes = append(notes, "- Held-out accuracy: no evaluation in any finished run.")
			continue
		}
		var plots []*plot.Plot
		lines := 0
		for _, pn := range f.Panels {
			p := plot.New()
			p.Title.Text = pn.Title
			p.X.Label.Text = "step"
			p.Y.Label.Text = pn.YLabel
			p.Add(plotter.NewGrid())
			p.Legend.Top, p.Legend.Left = true, true
			p.Legend.TextStyle.Font.Size = vg.Points(8)
			for i, arm := range arms {
				xy := curve(runs[arm], pn.Metric)
				if len(xy) == 0 {
					continue
				}
				l, err := plotter.NewLine(xy)
				if err != nil {
					return nil, err
				}
				l.Color = armColor(i)
				l.Dashes = plotutil.Dashes(i / len(plotutil.SoftColors))
				l.Width = vg.Points(1.5)
				p.Add(l)
				if len(xy) < 8 {
					sc, err := plotter.NewScatter(xy)
					if err != nil {
						return nil, err
					}
					sc.Color = l.Color
					sc.Shape = draw.CircleGlyph{}
					sc.Radius = vg.Points(2)
					p.Add(sc)
				}
				p.Legend.Add(arm, l)
				lines++
			}
			plots = append(plots, p)
		}
		if lines == 0 {
			notes = append(notes, fmt.Sprintf("- %s: no finished arm reports %s; not plotted.", f.Caption, f.Panels[0].Metric))
			continue
		}
		if err := savePanels(plots, filepath.Join(dir, f.Name)); err != nil {
			return nil, err
		}
		notes = append(notes, fmt.Sprintf("**%s** (plots/%s.svg)\n\n![%s](plots/%s.png)\n", f.Caption, f.Name, f.Name, f.Name))
	}
	return notes, nil
}

func armColor(i int) color.Color {
	return plotutil.SoftColors[i%len(plotutil.SoftColors)]
}

// savePanels draws plots side by side into base.png and base.svg.
func savePanels(plots []*plot.Plot, base string) error {
	w := vg.Length(len(plots)) * 6 * vg.Inch
	h := 4.5 * vg.Inch
	draws := func(c vg.CanvasSizer) {
		dc := draw.New(c)
		tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Millimeter * 4, PadTop: vg.Millimeter * 2,
			PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
		canvases := plot.Align([][]*plot.Plot{plots}, tiles, dc)
		for j, p := range plots {
			p.Draw(canvases[0][j])
		}
	}
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))
	// A white background (vgimg starts transparent).
	img.SetColor(color.White)
	img.Fill(vgRect(w, h))
	draws(img)
	if err := writeCanvas(base+".png", vgimg.PngCanvas{Canvas: img}); err != nil {
		return err
	}
	svg := vgsvg.New(w, h)
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
