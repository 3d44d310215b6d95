package trainer

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Progress draws a progress bar with an ETA on a terminal, or prints a line
// every ~5% of the work (and at least every 30 s) elsewhere.
type Progress struct {
	W     io.Writer
	TTY   bool
	Label string
	Total int

	start, lastLine time.Time
	startDone       int
	lastPct         int
}

// NewProgress starts a progress report for total units, already done
// (resumed) units excluded from the rate.
func NewProgress(w io.Writer, tty bool, label string, done, total int) *Progress {
	now := time.Now()
	return &Progress{W: w, TTY: tty, Label: label, Total: total, start: now, lastLine: now, startDone: done, lastPct: -1}
}

// ETA estimates the time left after done units.
func (p *Progress) ETA(done int) time.Duration {
	n := done - p.startDone
	if n <= 0 {
		return 0
	}
	per := time.Since(p.start) / time.Duration(n)
	return per * time.Duration(p.Total-done)
}

// Update reports done units and a short status text.
func (p *Progress) Update(done int, status string) {
	if p == nil || p.W == nil {
		return
	}
	eta := p.ETA(done).Round(time.Second)
	if p.TTY {
		const width = 30
		fill := 0
		if p.Total > 0 {
			fill = width * done / p.Total
		}
		bar := strings.Repeat("=", fill) + strings.Repeat(" ", width-fill)
		fmt.Fprintf(p.W, "\r%s [%s] %d/%d ETA %s %s\x1b[K", p.Label, bar, done, p.Total, eta, status)
		if done >= p.Total {
			fmt.Fprintln(p.W)
		}
		return
	}
	pct := 0
	if p.Total > 0 {
		pct = 100 * done / p.Total
	}
	if pct/5 != p.lastPct/5 || time.Since(p.lastLine) > 30*time.Second || done >= p.Total {
		p.lastPct = pct
		p.lastLine = time.Now()
		fmt.Fprintf(p.W, "%s %d/%d (%d%%) elapsed %s ETA %s %s\n", p.Label, done, p.Total, pct,
			time.Since(p.start).Round(time.Second), eta, status)
	}
}
