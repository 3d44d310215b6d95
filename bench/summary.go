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
// the first four evaluation columns; then train/acc and wall_s). failed,
// when not nil, is the arm-seeds that failed: the title says how many,
// and each gets a line with its reason, then the command that retries
// them and the exit status. Without a results.csv only those are written.
func Summary(w io.Writer, dir string, took time.Duration, failed *SeedsFailedError) {
	title := "bench finished"
	facts := []Fact{{Label: "report", Value: filepath.Join(dir, "results.md")},
		{Label: "runs", Value: filepath.Join(dir, "runs")}, {Label: "wall time", Value: fmt.Sprintf("%.1f s", took.Seconds())}}
	if failed != nil {
		title = fmt.Sprintf("bench finished: %d arm-seed(s) FAILED, not in the report", len(failed.Failed))
		for _, f := range failed.Failed {
			facts = append(facts, Fact{Label: fmt.Sprintf("failed: %s seed %d", f.Arm, f.Seed), Value: oneLine(f.Reason)})
		}
		if failed.Command != "" {
			facts = append(facts, Fact{Label: "retry them", Value: failed.Command + " (the finished arm-seeds are kept)"})
		}
		facts = append(facts, Fact{Label: "exit status", Value: fmt.Sprintf("%d (arm-seeds failed; the report covers the others)", ExitSeedsFailed)})
	}
	header, rows := summaryRows(dir)
	if header == nil {
		summary.Rows(w, title, facts, nil, nil)
		return
	}
	facts = append(facts, Fact{Label: "columns", Value: "mean ± std over seeds of the final values (all columns: results.csv)"})
	summary.Rows(w, title, facts, header, rows)
}

// Fact is a summary's labelled line.
type Fact = summary.Fact

// summaryRows are the per-arm rows of DIR/results.csv (nil without one).
func summaryRows(dir string) ([]string, [][]string) {
	f, err := os.Open(filepath.Join(dir, "results.csv"))
	if err != nil {
		return nil, nil
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil || len(recs) < 1 {
		return nil, nil
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
	return header, rows
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
