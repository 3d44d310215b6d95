package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// readmeRow is one run of the README's Results table: the figures it
// prints, as printed (three decimals), and the command's extra arguments.
type readmeRow struct {
	label string   // the row's first cell
	args  []string // after `cde-run train`
	cells []string // the row's cells, as written
}

// readmeRows are the rows of the README's "Results" table that this test
// holds: the README's main job (`cde-run train`, the defaults) and PPO.
var readmeRows = []readmeRow{
	{label: "GRPO (`cde-run train`)"},
	{label: "PPO (`--set algorithm.name=ppo`)", args: []string{"--set", "algorithm.name=ppo"}},
}

// TestREADMEResults runs the README's main job and its PPO variant with the
// defaults, as a new user would (only the run directory and the base
// policy's cache moved to a temporary directory), and holds every accuracy
// figure of the README's Results table, and the figures of its opening
// paragraph, to the runs' metrics exactly: the engine gives the same bits
// on every machine, kernel path and thread count (docs/engine.md, "One
// summation order"), so a fresh clone prints what the README says. The
// wall times are labelled with their machine and not held. The two runs go
// side by side, one thread each (the same bits as with any other count).
//
// When it fails after a change that moves the numbers, rerun the two
// commands the table names and copy their figures into README.md.
func TestREADMEResults(t *testing.T) {
	if testing.Short() {
		t.Skip("two 200-step trainings")
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	rows := make([]readmeRow, len(readmeRows))
	copy(rows, readmeRows)
	for i := range rows {
		rows[i].cells = tableRow(t, text, rows[i].label)
	}
	tmp := t.TempDir()
	metrics := make([][]map[string]any, len(rows))
	var wg sync.WaitGroup
	errs := make([]error, len(rows))
	for i := range rows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dir := filepath.Join(tmp, fmt.Sprintf("run%d", i))
			args := append([]string{"train", "--run-dir", dir, "--set", "pretrain.dir=" + filepath.Join(tmp, fmt.Sprintf("base%d", i))}, rows[i].args...)
			if out, err := cdeRunEnv([]string{"GOMAXPROCS=1"}, args...); err != nil {
				errs[i] = fmt.Errorf("cde-run %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
		metrics[i] = readMetrics(t, filepath.Join(tmp, fmt.Sprintf("run%d", i), "metrics.jsonl"))
	}
	for i, r := range rows {
		got := readmeFigures(t, metrics[i])
		want := []string{
			fmt.Sprintf("mean %s (l1 %s, l2 %s)", got.at[0][0], got.at[0][1], got.at[0][2]),
			got.at[100][0],
			fmt.Sprintf("%s (l1 %s, l2 %s)", got.at[200][0], got.at[200][1], got.at[200][2]),
			got.first,
		}
		names := []string{"step 0 (base)", "step 100", "step 200", "first eval >= base + 15 points"}
		for c, w := range want {
			if r.cells[c] != w {
				t.Errorf("README.md, Results, row %q, column %q: %q, but the run gives %q", r.label, names[c], r.cells[c], w)
			}
		}
		if i == 0 {
			// The opening paragraph quotes the main job's first and last
			// evaluations.
			re := regexp.MustCompile(`rose from (\S+) \(base\) to (\S+) at the end`)
			m := re.FindStringSubmatch(strings.Join(strings.Fields(text), " "))
			if m == nil {
				t.Fatalf("README.md: no %q sentence", re)
			}
			if m[1] != got.at[0][0] || m[2] != got.at[200][0] {
				t.Errorf("README.md says avg@4 rose from %s (base) to %s; the main job gives %s to %s", m[1], m[2], got.at[0][0], got.at[200][0])
			}
		}
	}
}

// figures are one run's held-out avg@4 (mean, l1, l2) at steps 0, 100 and
// 200, three decimals, and the first evaluation step at or above the base
// plus 15 points ("step N", or "never").
type figures struct {
	at    map[int][3]string
	first string
}

func readmeFigures(t *testing.T, rows []map[string]any) figures {
	t.Helper()
	f := figures{at: map[int][3]string{}, first: "never"}
	base := -1.0
	for _, row := range rows {
		mean, ok := row["val/mean/avg@4"].(float64)
		if !ok {
			continue
		}
		step := int(row["step"].(float64))
		l1, _ := row["val/l1/avg@4"].(float64)
		l2, _ := row["val/l2/avg@4"].(float64)
		f.at[step] = [3]string{fmt.Sprintf("%.3f", mean), fmt.Sprintf("%.3f", l1), fmt.Sprintf("%.3f", l2)}
		if step == 0 {
			base = mean
		} else if base >= 0 && mean >= base+0.15 && f.first == "never" {
			f.first = fmt.Sprintf("step %d", step)
		}
	}
	for _, s := range []int{0, 100, 200} {
		if _, ok := f.at[s]; !ok {
			t.Fatalf("no evaluation at step %d in metrics.jsonl", s)
		}
	}
	return f
}

// tableRow returns the first four figure cells of the README table row
// whose first cell is label.
func tableRow(t *testing.T, text, label string) []string {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) < 5 || strings.TrimSpace(cells[0]) != label {
			continue
		}
		var out []string
		for _, c := range cells[1:5] {
			out = append(out, strings.TrimSpace(c))
		}
		return out
	}
	t.Fatalf("README.md: no table row %q", label)
	return nil
}
