// Package summary writes the human-readable table that train, eval and
// bench end with: a title, facts (where the results are, the wall time)
// and metrics sorted by name, aligned, whatever the log format, so a run
// without a terminal (a cluster job's log) ends with something a person
// can read.
package summary

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Fact is one labelled line above the metrics.
type Fact struct{ Label, Value string }

// Write writes title, the facts and the metrics (sorted by name) to w.
func Write(w io.Writer, title string, facts []Fact, metrics map[string]float64) {
	if w == nil {
		return
	}
	var b strings.Builder
	writeHeader(&b, title, facts)
	if len(metrics) > 0 {
		keys := make([]string, 0, len(metrics))
		for k := range metrics {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		vals := make([]float64, len(keys))
		for i, k := range keys {
			vals[i] = metrics[k]
		}
		cells := Aligned(vals)
		b.WriteString("\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "metric\t%s\n", "value")
		for i, k := range keys {
			fmt.Fprintf(tw, "%s\t%s\n", k, strings.TrimRight(cells[i], " "))
		}
		tw.Flush()
	}
	io.WriteString(w, b.String())
}

// Fixed formats x with a fixed precision: an integer as is (below 1e15),
// 4 decimals where 1e-4 <= |x| < 1e6, else 4 significant digits in
// exponent form; NaN, +Inf, -Inf.
func Fixed(x float64) string {
	switch a := math.Abs(x); {
	case math.IsNaN(x):
		return "NaN"
	case math.IsInf(x, 1):
		return "+Inf"
	case math.IsInf(x, -1):
		return "-Inf"
	case x == math.Trunc(x) && a < 1e15:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case a >= 1e-4 && a < 1e6:
		return strconv.FormatFloat(x, 'f', 4, 64)
	}
	return strconv.FormatFloat(x, 'e', 3, 64)
}

// Aligned formats xs with Fixed, padded so that their decimal points (or
// where one would be) stand in one column.
func Aligned(xs []float64) []string {
	cells := make([]string, len(xs))
	whole, frac := make([]string, len(xs)), make([]string, len(xs))
	wW, wF := 0, 0
	for i, x := range xs {
		s := Fixed(x)
		if j := strings.IndexByte(s, '.'); j >= 0 {
			whole[i], frac[i] = s[:j], s[j:]
		} else {
			whole[i] = s
		}
		wW, wF = max(wW, len(whole[i])), max(wF, len(frac[i]))
	}
	for i := range xs {
		cells[i] = strings.Repeat(" ", wW-len(whole[i])) + whole[i] + frac[i] + strings.Repeat(" ", wF-len(frac[i]))
	}
	return cells
}

// Rows writes title, the facts and a table (a header row, then rows) to w.
func Rows(w io.Writer, title string, facts []Fact, header []string, rows [][]string) {
	if w == nil {
		return
	}
	var b strings.Builder
	writeHeader(&b, title, facts)
	if len(rows) > 0 {
		b.WriteString("\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(header, "\t"))
		for _, r := range rows {
			fmt.Fprintln(tw, strings.Join(r, "\t"))
		}
		tw.Flush()
	}
	io.WriteString(w, b.String())
}

// writeHeader writes the title line and the aligned facts.
func writeHeader(b *strings.Builder, title string, facts []Fact) {
	fmt.Fprintf(b, "\n== %s ==\n", title)
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	for _, f := range facts {
		fmt.Fprintf(tw, "%s\t%s\n", f.Label, f.Value)
	}
	tw.Flush()
}

// Num formats a metric: integers as integers, others with 4 significant
// digits, NaN and infinities by name.
func Num(x float64) string {
	switch {
	case math.IsNaN(x):
		return "NaN"
	case math.IsInf(x, 1):
		return "+Inf"
	case math.IsInf(x, -1):
		return "-Inf"
	case x == math.Trunc(x) && math.Abs(x) < 1e15:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return strconv.FormatFloat(x, 'g', 4, 64)
}
