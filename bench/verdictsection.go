package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// verdictsHeading opens results.md's first section: the claims' verdicts
// at a glance, before the tables and plots they come from.
const verdictsHeading = "## Verdicts\n\n"

// withVerdicts puts the Verdicts section at the top of a report md (before
// "## Results"): the forest plot of the claims' effects (drawn now into
// DIR/plots, WriteForest) and a table of every claim's effect, interval
// and verdict after Holm, read from the verdicts.json the report just
// wrote. forest draws the plot into a plots directory and returns the
// lines that show it ("" when it draws none; nil: no plot). Nothing for a
// bench without claims.
func withVerdicts(md string, spec *Spec, dir string, forest func(plotsDir string, vs []ClaimVerdict) (string, error)) (string, error) {
	if len(spec.Claims) == 0 {
		return md, nil
	}
	data, err := os.ReadFile(filepath.Join(dir, VerdictsFile))
	if err != nil {
		return "", err
	}
	var vs []ClaimVerdict
	if err := json.Unmarshal(data, &vs); err != nil {
		return "", fmt.Errorf("%s: %w", filepath.Join(dir, VerdictsFile), err)
	}
	plot := ""
	if forest != nil {
		if err := os.MkdirAll(filepath.Join(dir, "plots"), 0o755); err != nil {
			return "", err
		}
		if plot, err = forest(filepath.Join(dir, "plots"), vs); err != nil {
			return "", fmt.Errorf("plots: %w", err)
		}
	}
	var b strings.Builder
	b.WriteString(verdictsHeading)
	b.WriteString("Each claim's effect d (the claimed-better arm minus the other, in the metric's own unit: accuracies as fractions, as everywhere in this report), " +
		"its 95% interval and its verdict after Holm's correction in its family, the one to quote. " +
		"How they are judged, the claims' own verdicts, p values, standard errors and per-seed effects: [Claims](#claims).\n\n")
	for _, v := range vs {
		if v.Sequential != nil {
			// A sequential bench's intervals are at their look's level.
			b.WriteString("This bench ran sequentially: each interval (and bar) is at the level of the look its claim was judged at, " +
				"wider than 95% (the level of each look: [Sequential looks](#sequential-looks)).\n\n")
			break
		}
	}
	if plot != "" {
		b.WriteString(plot + "\n")
	}
	b.WriteString(verdictsTable(vs))
	b.WriteString("\n")
	return strings.Replace(md, "## Results\n\n", b.String()+"## Results\n\n", 1), nil
}

// verdictsTable is the Verdicts section's table, one row per claim.
func verdictsTable(vs []ClaimVerdict) string {
	var b strings.Builder
	b.WriteString("| claim | metric | seeds | d | 95% interval | verdict after Holm |\n|---|---|---|---|---|---|\n")
	for _, v := range vs {
		d, ci := "missing", "missing"
		if v.DeltaMean != nil {
			d = fmtNum(*v.DeltaMean)
		}
		if v.CILow != nil && v.CIHigh != nil {
			ci = fmt.Sprintf("[%s, %s]", fmtNum(*v.CILow), fmtNum(*v.CIHigh))
		}
		verdict := v.VerdictHolm
		if verdict == "" {
			verdict = v.Verdict
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | **%s** |\n", v.Claim, v.Metric, len(v.Seeds), d, ci, verdict)
	}
	return b.String()
}
