package bench

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cde-rl/cde/internal/summary"
)

// InsideRelative is p relative to the working directory when p is an
// absolute path inside it, else p unchanged.
func InsideRelative(p string) string {
	if !filepath.IsAbs(p) {
		return p
	}
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, p); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return rel
		}
	}
	return p
}

// DisplayPath is how the report's record of a bench command names a path:
// as given when relative, relative to the working directory when inside
// it, else ".../" and its last element, so that committed results never
// carry the absolute paths of the machine that made them.
func DisplayPath(p string) string {
	if r := InsideRelative(p); !filepath.IsAbs(r) {
		return r
	}
	return ".../" + filepath.Base(p)
}

// Summary ends a bench with a table a person reads: where the report
// is, the wall time, and per arm the seeds and the mean ± std over seeds
// of the main metrics of DIR/results.csv (the val/mean/* columns, else
// the first four evaluation columns; then train/acc and wall_s).
func Summary(w io.Writer, dir string, took time.Duration) {
	f, err := os.Open(filepath.Join(dir, "results.csv"))
	if err != nil {
		return
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil || len(recs) < 1 {
		return
	}
	head := recs[0]
	var cols, rest []int // indices of the _mean columns shown
	for i, h := range head {
		name, ok := strings.CutSuffix(h, "_mean")
		switch {
		case !ok:
		case name == "train/acc" || name == "wall_s":
			rest = append(rest, i)
		case strings.HasPrefix(name, "val/mean/"):
			cols = append(cols, i)
		}
	}
	if len(cols) == 0 {
		for i, h := range head {
			if name, ok := strings.CutSuffix(h, "_mean"); ok && name != "train/acc" && name != "wall_s" && len(cols) < 4 {
				cols = append(cols, i)
			}
		}
	}
	cols = append(cols, rest...)
	header := []string{"arm", "seeds"}
	for _, i := range cols {
		header = append(header, strings.TrimSuffix(head[i], "_mean"))
	}
	var rows [][]string
	for _, r := range recs[1:] {
		if len(r) != len(head) {
			continue
		}
		row := []string{r[0], r[1]}
		for _, i := range cols {
			row = append(row, meanStdCell(r[i], r[i+1]))
		}
		rows = append(rows, row)
	}
	summary.Rows(w, "bench finished", []summary.Fact{{Label: "report", Value: filepath.Join(dir, "results.md")},
		{Label: "runs", Value: filepath.Join(dir, "runs")}, {Label: "wall time", Value: fmt.Sprintf("%.1f s", took.Seconds())},
		{Label: "columns", Value: "mean ± std over seeds of the final values (all columns: results.csv)"}}, header, rows)
}

// meanStdCell writes a results.csv mean and std as "m ± s" ("-" when empty).
func meanStdCell(m, s string) string {
	mv, err := strconv.ParseFloat(m, 64)
	if err != nil {
		return "-"
	}
	out := summary.Num(mv)
	if sv, err := strconv.ParseFloat(s, 64); err == nil {
		out += " ± " + summary.Num(sv)
	}
	return out
}
