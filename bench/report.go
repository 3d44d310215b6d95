package bench

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/core"
)

// armRun is one finished arm-seed as the report reads it.
type armRun struct {
	Arm     string
	Seed    uint64
	Rows    []map[string]float64 // metrics.jsonl, "step" included; nulls dropped
	Seconds float64              // training wall time (DONE)
	HeadStd *HeadStd             // nil when not measured
}

// final is the metric's value in the last row that has it (for val/* the
// evaluation after the last step, for training metrics the last step).
func (r *armRun) final(metric string) (float64, bool) {
	for i := len(r.Rows) - 1; i >= 0; i-- {
		if v, ok := r.Rows[i][metric]; ok {
			return v, true
		}
	}
	return 0, false
}

// readMetricRows reads a finished arm-seed's metrics.jsonl, lines of any
// length. A line that is not a JSON object of numbers (or nulls) is an
// error naming the file and line: a verdict is never computed from a run
// with rows left out. (A resume moves such lines to
// metrics.jsonl.unreadable, so a finished run has none unless the file
// was changed since.)
func readMetricRows(path string) ([]map[string]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rows []map[string]float64
	r := bufio.NewReader(f)
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var raw map[string]*float64
			if jerr := json.Unmarshal(line, &raw); jerr != nil {
				return nil, fmt.Errorf("%s line %d is not a metrics row (%v): restore the line, or move it out of the file and rerun the report", path, n, jerr)
			}
			row := map[string]float64{}
			for k, v := range raw {
				if v != nil {
					row[k] = *v
				}
			}
			rows = append(rows, row)
		}
		if err == io.EOF {
			return rows, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// loadRuns reads every finished (DONE) arm-seed of spec under dir.
func loadRuns(spec *Spec, dir string) (map[string][]*armRun, []string, error) {
	out := map[string][]*armRun{}
	var missing []string
	// A sequential bench's later seeds too; one of them counts as missing
	// only once its run directory exists (sequential.go).
	spec, extra, err := sequentialSeeds(spec, dir)
	if err != nil {
		return nil, nil, err
	}
	names := spec.Arms
	if spec.BaseEval {
		names = append([]Arm{{Name: BaseArm}}, names...)
	}
	for _, arm := range names {
		for _, seed := range spec.Seeds {
			run := RunDir(dir, arm.Name, seed)
			data, err := os.ReadFile(filepath.Join(run, DoneFile))
			if err != nil {
				if _, serr := os.Stat(run); !extra[seed] || serr == nil {
					missing = append(missing, fmt.Sprintf("%s seed %d", arm.Name, seed))
				}
				continue
			}
			var done doneMark
			if err := json.Unmarshal(data, &done); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", filepath.Join(run, DoneFile), err)
			}
			rows, err := readMetricRows(filepath.Join(run, "metrics.jsonl"))
			if err != nil {
				return nil, nil, err
			}
			br := &armRun{Arm: arm.Name, Seed: seed, Rows: rows, Seconds: done.Seconds}
			if data, err := os.ReadFile(filepath.Join(run, HeadStdFile)); err == nil {
				var hs HeadStd
				if err := json.Unmarshal(data, &hs); err != nil {
					return nil, nil, fmt.Errorf("%s: %w", filepath.Join(run, HeadStdFile), err)
				}
				br.HeadStd = &hs
			}
			out[arm.Name] = append(out[arm.Name], br)
		}
	}
	return out, missing, nil
}

// meanStd is the mean and the sample standard deviation (n-1; 0 for a
// single value; NaN for none).
func meanStd(xs []float64) (mean, std float64) {
	return core.Mean(xs), core.SampleStd(xs)
}

var valKeyRE = regexp.MustCompile(`^val/([^/]+)/(avg|pass)@(\d+)$`)

// resultColumns are the val/<set>/{avg,pass}@k metrics present at the
// final step of any run: per set (sorted, "mean" last) avg then pass.
func resultColumns(runs map[string][]*armRun) []string {
	type col struct {
		set, kind string
		k         int
	}
	seen := map[string]col{}
	for _, rs := range runs {
		for _, r := range rs {
			if len(r.Rows) == 0 {
				continue
			}
			for key := range r.Rows[len(r.Rows)-1] {
				if m := valKeyRE.FindStringSubmatch(key); m != nil {
					k, _ := strconv.Atoi(m[3])
					seen[key] = col{m[1], m[2], k}
				}
			}
		}
	}
	// pass@j of the curve (eval.k's 1, 2, 4, ...) stays out of the table:
	// a pass column only where the set has avg at the same k.
	avgK := map[string]bool{}
	for _, c := range seen {
		if c.kind == "avg" {
			avgK[fmt.Sprintf("%s@%d", c.set, c.k)] = true
		}
	}
	var keys []string
	for k, c := range seen {
		if c.kind == "pass" && !avgK[fmt.Sprintf("%s@%d", c.set, c.k)] {
			continue
		}
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := seen[keys[i]], seen[keys[j]]
		if (a.set == "mean") != (b.set == "mean") {
			return b.set == "mean"
		}
		if a.set != b.set {
			return a.set < b.set
		}
		if a.k != b.k {
			return a.k < b.k
		}
		return a.kind < b.kind // avg before pass
	})
	return keys
}

func colTitle(key string) string {
	m := valKeyRE.FindStringSubmatch(key)
	if m == nil {
		return key
	}
	kind := "Avg"
	if m[2] == "pass" {
		kind = "Pass"
	}
	return fmt.Sprintf("%s %s@%s", m[1], kind, m[3])
}

func finals(rs []*armRun, metric string) []float64 {
	var xs []float64
	for _, r := range rs {
		if v, ok := r.final(metric); ok && !math.IsNaN(v) {
			xs = append(xs, v)
		}
	}
	return xs
}

// fmtPM formats mean ± std with scale and decimals; a single value is
// "v (1 seed)", which has no spread to show.
func fmtPM(xs []float64, scale float64, decimals int) string {
	if len(xs) == 0 {
		return "-"
	}
	m, s := meanStd(xs)
	if len(xs) == 1 {
		return fmt.Sprintf("%.*f (1 seed)", decimals, m*scale)
	}
	if s == 0 {
		return fmt.Sprintf("%.*f ± 0", decimals, m*scale)
	}
	return fmt.Sprintf("%.*f ± %.*f", decimals, m*scale, decimals, s*scale)
}

func fmtNum(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// writeReport writes DIR/results.csv, DIR/results.md and DIR/plots/ from
// the finished arm-seeds.
func writeReport(spec *Spec, dir, command string, log zerolog.Logger) error {
	runs, missing, err := loadRuns(spec, dir)
	if err != nil {
		return err
	}
	var arms []string // arms with at least one finished seed, in bench order
	for _, a := range spec.Arms {
		if len(runs[a.Name]) > 0 {
			arms = append(arms, a.Name)
		}
	}
	// The results table starts with the base policy's evaluation when the
	// bench made one (base_eval); plots take it from the runs directly.
	tableArms := arms
	if len(runs[BaseArm]) > 0 {
		tableArms = append([]string{BaseArm}, arms...)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cols := resultColumns(runs)
	// The responses generated in training, where runs count them: dynamic
	// sampling draws more than prompts_per_step x n a step, so arms
	// compared at equal steps are not at equal samples.
	generated := false
	for _, rs := range runs {
		for _, r := range rs {
			if _, ok := r.final(GeneratedTotalMetric); ok {
				generated = true
			}
		}
	}

	// results.csv
	var csvBuf strings.Builder
	cw := csv.NewWriter(&csvBuf)
	header := []string{"arm", "seeds"}
	extra := []string{"train/acc", "wall_s"}
	if generated {
		extra = append(extra, GeneratedTotalMetric)
	}
	for _, c := range append(append([]string{}, cols...), extra...) {
		header = append(header, c+"_mean", c+"_std")
	}
	cw.Write(header)
	for _, arm := range tableArms {
		rs := runs[arm]
		rec := []string{arm, strconv.Itoa(len(rs))}
		add := func(xs []float64) {
			m, s := meanStd(xs)
			rec = append(rec, csvNum(m), csvNum(s))
		}
		for _, c := range cols {
			add(finals(rs, c))
		}
		add(finals(rs, "reward/acc"))
		var secs []float64
		for _, r := range rs {
			secs = append(secs, r.Seconds)
		}
		add(secs)
		if generated {
			add(finals(rs, GeneratedTotalMetric))
		}
		cw.Write(rec)
	}
	cw.Flush()
	if err := os.WriteFile(filepath.Join(dir, "results.csv"), []byte(csvBuf.String()), 0o644); err != nil {
		return err
	}

	// plots
	families, err := armFamilies(spec, dir, arms)
	if err != nil {
		return err
	}
	plotNotes, err := writePlots(spec, runs, arms, families, filepath.Join(dir, "plots"))
	if err != nil {
		return fmt.Errorf("plots: %w", err)
	}

	// results.md
	var b strings.Builder
	fmt.Fprintf(&b, "# Bench: %s\n\n", spec.Stem)
	if spec.Description != "" {
		fmt.Fprintf(&b, "%s\n\n", strings.TrimSpace(spec.Description))
	}
	var made []string
	if data, err := os.ReadFile(filepath.Join(dir, commandsFile)); err == nil {
		for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if l != "" {
				made = append(made, "`"+l+"`")
			}
		}
	}
	if len(made) > 0 {
		fmt.Fprintf(&b, "Runs made by %s. ", strings.Join(made, ", then "))
	}
	fmt.Fprintf(&b, "Report written by `%s` on %s (%s/%s, %d CPUs). Seeds: %s.\n\n", command,
		time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), joinSeeds(spec.Seeds))
	b.WriteString(sequentialHeader(spec, dir))
	b.WriteString("## Results\n\n")
	b.WriteString("Accuracies as fractions (0 to 1, the unit of the claims' effects), at the final step (the evaluation after the last training step), as mean ± std over seeds ")
	b.WriteString("(sample std, n-1; \"1 seed\" where an arm has one). Train acc is `reward/acc` of the last training step; wall time is the training time of one arm-seed.")
	if generated {
		fmt.Fprintf(&b, " Responses generated is `%s` at the last step: every response sampled in training, the groups dynamic sampling dropped included "+
			"(arms compared at equal steps are at equal samples only where these agree; the `_samples` plots put them on one axis).", GeneratedTotalMetric)
	}
	b.WriteString("\n\n| arm | seeds |")
	for _, c := range cols {
		fmt.Fprintf(&b, " %s |", colTitle(c))
	}
	b.WriteString(" train acc | wall time (s) |")
	n := len(cols) + 2
	if generated {
		b.WriteString(" responses generated |")
		n++
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", n) + "\n")
	for _, arm := range tableArms {
		rs := runs[arm]
		fmt.Fprintf(&b, "| %s | %d |", arm, len(rs))
		for _, c := range cols {
			fmt.Fprintf(&b, " %s |", fmtPM(finals(rs, c), 1, 3))
		}
		var secs []float64
		for _, r := range rs {
			secs = append(secs, r.Seconds)
		}
		fmt.Fprintf(&b, " %s | %s |", fmtPM(finals(rs, "reward/acc"), 1, 3), fmtPM(secs, 1, 0))
		if generated {
			fmt.Fprintf(&b, " %s |", fmtPM(finals(rs, GeneratedTotalMetric), 1, 0))
		}
		b.WriteString("\n")
	}
	if len(arms) == 0 {
		b.WriteString("\nNo arm-seed has finished yet.\n")
	}
	if len(missing) > 0 {
		fmt.Fprintf(&b, "\nNot finished (not in the table): %s.\n", strings.Join(missing, ", "))
	}

	b.WriteString("\n## Plots\n\n" + plotsIntro + "\n\n")
	for i, n := range plotNotes {
		// A caption after a list item needs a blank line, or Markdown
		// reads it as the item's continuation.
		if i > 0 && strings.HasPrefix(plotNotes[i-1], "- ") && !strings.HasPrefix(n, "- ") {
			b.WriteString("\n")
		}
		b.WriteString(n + "\n")
	}

	writePassCurveSection(&b, runs, tableArms)
	writeHeadStdSection(&b, spec, runs, arms)
	writePPLCapSection(&b, runs, arms)
	if err := writeClaimsSection(&b, spec, dir, runs); err != nil {
		return err
	}

	md, err := withVerdicts(b.String(), spec, dir, WriteForest)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.md"), []byte(md), 0o644); err != nil {
		return err
	}
	log.Info().Str("report", filepath.Join(dir, "results.md")).Int("arms", len(arms)).Msg("bench report written")
	return nil
}

func csvNum(v float64) string {
	if math.IsNaN(v) {
		return ""
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

func joinSeeds(seeds []uint64) string {
	var s []string
	for _, x := range seeds {
		s = append(s, strconv.FormatUint(x, 10))
	}
	return strings.Join(s, ", ")
}

// writeHeadStdSection is the Figure 7b table: mean critic head std on
// training prompts and on each eval set's prompts.
func writeHeadStdSection(b *strings.Builder, spec *Spec, runs map[string][]*armRun, arms []string) {
	b.WriteString("\n## Critic head std by prompt set (paper Figure 7b)\n\n")
	var sets []string
	inDist := map[string]bool{}
	var measured, notMeasured []string
	for _, arm := range arms {
		has := false
		for _, r := range runs[arm] {
			if r.HeadStd == nil {
				continue
			}
			has = true
			for _, s := range r.HeadStd.Sets {
				if !slices.Contains(sets, s) {
					sets = append(sets, s)
				}
				inDist[s] = r.HeadStd.InDis[s]
			}
		}
		if has {
			measured = append(measured, arm)
		} else {
			notMeasured = append(notMeasured, arm)
		}
	}
	if len(measured) == 0 {
		b.WriteString("Not measured: no finished arm has a critic with two or more heads.\n")
		return
	}
	fmt.Fprintf(b, "After each arm-seed with a multi-head critic, its final checkpoint samples %d responses to each of up to %d prompts per set "+
		"(training prompts, then each eval set) and the critic scores them; the value is the mean over response tokens of the "+
		"std across heads, as mean ± std over seeds. The paper expects it lower on training prompts than on held-out ones, and highest out of distribution.\n\n",
		headStdSamples, headStdProblems)
	b.WriteString("| arm | heads |")
	for _, s := range sets {
		label := s
		switch {
		case s == "train":
			label = "train prompts"
		case inDist[s]:
			label = s + " (held-out)"
		default:
			label = s + " (OOD)"
		}
		fmt.Fprintf(b, " %s |", label)
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(sets)) + "\n")
	for _, arm := range measured {
		heads := 0
		vals := map[string][]float64{}
		for _, r := range runs[arm] {
			if r.HeadStd == nil {
				continue
			}
			heads = r.HeadStd.Heads
			for s, v := range r.HeadStd.Std {
				if !math.IsNaN(v) {
					vals[s] = append(vals[s], v)
				}
			}
		}
		fmt.Fprintf(b, "| %s | %d |", arm, heads)
		for _, s := range sets {
			fmt.Fprintf(b, " %s |", fmtPM(vals[s], 1, 4))
		}
		b.WriteString("\n")
	}
	if len(notMeasured) > 0 {
		fmt.Fprintf(b, "\nNot measured (no critic, or a single head whose spread is 0 by construction): %s.\n", strings.Join(notMeasured, ", "))
	}
}

// writePPLCapSection is the binding fraction of the PPL bonus's cap per arm
// that has one: how often |r|/kappa < alpha * B_actor, when the bonus is
// the constant |r|/kappa and carries no perplexity signal. Nothing when no
// arm logs explore/ppl/clip_frac.
func writePPLCapSection(b *strings.Builder, runs map[string][]*armRun, arms []string) {
	type row struct {
		arm       string
		on, first []float64 // per seed: mean over steps with w_t > 0; over the first 100 steps
		steps     []float64 // per seed: steps with w_t > 0
	}
	var rows []row
	for _, arm := range arms {
		var r row
		r.arm = arm
		for _, run := range runs[arm] {
			var on, first []float64
			for _, m := range run.Rows {
				f, ok := m["explore/ppl/clip_frac"]
				if !ok {
					continue
				}
				if w, ok := m["explore/ppl/weight"]; !ok || w > 0 {
					on = append(on, f)
				}
				if m["step"] <= 100 {
					first = append(first, f)
				}
			}
			if len(on) > 0 {
				r.on = append(r.on, core.Mean(on))
				r.steps = append(r.steps, float64(len(on)))
			}
			if len(first) > 0 {
				r.first = append(r.first, core.Mean(first))
			}
		}
		if len(r.on) > 0 || len(r.first) > 0 {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("\n## PPL bonus: how often its cap binds\n\n" +
		"The bonus is `w_t * min(|r|/kappa, alpha * B_actor)`. When the cap `|r|/kappa` is the smaller, the bonus is a constant with no perplexity signal. " +
		"`explore/ppl/clip_frac` is the fraction of a step's responses where that happens. Below, per seed, its mean over the steps where the bonus is on " +
		"(`explore/ppl/weight` > 0) and over steps 1-100; then the mean ± std over seeds, with the range.\n\n" +
		"| arm | seeds | steps with w_t > 0 | binding fraction, bonus on | range over seeds | binding fraction, steps 1-100 |\n|---|---|---|---|---|---|\n")
	for _, r := range rows {
		rng := "missing"
		if len(r.on) > 0 {
			rng = fmt.Sprintf("%.3f-%.3f", slices.Min(r.on), slices.Max(r.on))
		}
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s | %s |\n", r.arm, max(len(r.on), len(r.first)), fmtPM(r.steps, 1, 0), fmtPM(r.on, 1, 3), rng, fmtPM(r.first, 1, 3))
	}
}

func fmtPMRaw(xs []float64) string {
	if len(xs) == 0 {
		return "missing"
	}
	m, s := meanStd(xs)
	return fmtNum(m) + " ± " + fmtNum(s)
}

func perSeed(rs []*armRun, metric string) string {
	var parts []string
	for _, r := range rs {
		if v, ok := r.final(metric); ok {
			parts = append(parts, fmt.Sprintf("seed %d: %s", r.Seed, fmtNum(v)))
		} else {
			parts = append(parts, fmt.Sprintf("seed %d: missing", r.Seed))
		}
	}
	if len(parts) == 0 {
		return "no finished seeds"
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
