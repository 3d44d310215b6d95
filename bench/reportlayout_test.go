package bench

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The committed reports that CI rewrites from their runs
// (TestCommittedReportsAreCurrent, TestCommittedTransferIsCurrent) and the
// leaderboard's rejudged parts keep the report's promises: a power table's
// SE equals the SE of the same claim's line in the Claims section; a bold
// plot caption never follows a list item without a blank line; the
// fully rewritten ones open with the Verdicts section, give accuracies as
// fractions and show no "± 0" for an arm of one seed. transfer is held to
// it too: its Results, pass@k curves and PPL-cap sections were written
// again in fractions from the restored runs (its wall times are the
// bench's own).
func TestCommittedReportsLayout(t *testing.T) {
	root := filepath.Join("..", "docs", "results")
	full := []string{"paper-countdown", "paper-small", "zoo-small", "zoo-estimators", "quick", "transfer"}
	seCheck := append(append([]string{}, full...), "leaderboard/main", "leaderboard/extra", "leaderboard/rerun")
	detailSE := regexp.MustCompile(`(?m)^- \*\*(.+?)\*\*: .*? SE ([^:]+):`)
	for _, name := range seCheck {
		data, err := os.ReadFile(filepath.Join(root, name, "results.md"))
		if err != nil {
			t.Fatal(err)
		}
		md := string(data)
		se := map[string]string{}
		for _, m := range detailSE.FindAllStringSubmatch(md, -1) {
			se[m[1]] = m[2]
		}
		if i := strings.Index(md, "\n## Power\n"); i >= 0 {
			n := 0
			for _, line := range strings.Split(md[i:], "\n") {
				c := strings.Split(line, " | ")
				if len(c) < 6 || !strings.HasPrefix(line, "| ") {
					continue
				}
				claim := strings.TrimPrefix(c[0], "| ")
				if want, ok := se[claim]; ok {
					n++
					if c[4] != want {
						t.Errorf("%s: power table SE of %q is %s, the claim's %s", name, claim, c[4], want)
					}
				}
			}
			if n == 0 {
				t.Errorf("%s: no power row matched a claim", name)
			}
		}
		lines := strings.Split(md, "\n")
		for i := 1; i < len(lines); i++ {
			if strings.HasPrefix(lines[i-1], "- ") && strings.HasPrefix(lines[i], "**") {
				t.Errorf("%s line %d: a bold caption right after a list item: %.60q", name, i+1, lines[i])
			}
		}
	}
	oneSeedZero := regexp.MustCompile(`(?m)^\| [^|]+ \| 1 \|.*± 0 `)
	for _, name := range full {
		data, err := os.ReadFile(filepath.Join(root, name, "results.md"))
		if err != nil {
			t.Fatal(err)
		}
		md := string(data)
		v, r := strings.Index(md, "\n## Verdicts\n"), strings.Index(md, "\n## Results\n")
		if v < 0 || r < v || strings.Count(md[:v], "\n## ") != 0 {
			t.Errorf("%s: does not open with the Verdicts section", name)
		}
		if !strings.Contains(md, "Accuracies as fractions") || strings.Contains(md, "Accuracies in %") {
			t.Errorf("%s: accuracies not as fractions", name)
		}
		if m := oneSeedZero.FindString(md); m != "" {
			t.Errorf("%s: one seed shown with ± 0: %.80q", name, m)
		}
	}
}
