package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/trainer"
)

// Bootstrap settings of the claim rule.
const (
	claimReps  = 10000
	claimLevel = 0.95
	// minSeedsSeedOnly and minSeedsProblems are the paired seeds a verdict
	// other than inconclusive needs when only seeds are resampled, and
	// when problems are too. A percentile interval over n seeds alone
	// excludes 0 whenever every seed's effect has the same sign, which
	// happens by chance with probability 2^(1-n) when there is no effect:
	// 1/4 with 3 seeds, 1/16 with 5.
	minSeedsSeedOnly = 5
	minSeedsProblems = 3
	// VerdictsFile is the claims' machine-readable verdicts in the results
	// directory.
	VerdictsFile = "verdicts.json"
)

// ClaimVerdict is one entry of verdicts.json.
type ClaimVerdict struct {
	Claim     string   `json:"claim"`
	Metric    string   `json:"metric"`
	Arms      []string `json:"arms"` // [better, than]
	Seeds     []uint64 `json:"seeds"`
	DeltaMean *float64 `json:"delta_mean"`
	CILow     *float64 `json:"ci_low"`
	CIHigh    *float64 `json:"ci_high"`
	Verdict   string   `json:"verdict"`
	// Units is what the bootstrap resampled within a seed: "problems"
	// (per-problem eval results of both arms) or "none" (one value per
	// seed: seeds only).
	Units string `json:"units"`
	// Design is how problems were resampled when Units is "problems":
	// "crossed" (every seed has the same problems: one draw of problem
	// indices serves all drawn seeds) or "nested" (each drawn seed draws
	// its own).
	Design string `json:"design,omitempty"`
	// PerSeed is the effect of each seed, in Seeds order.
	PerSeed []float64 `json:"per_seed"`
	Note    string    `json:"note,omitempty"`
}

// claimValue is a seed's value of a claim's metric with no units: the
// final value, or the mean of the last Window values.
func claimValue(r *armRun, c Claim) (float64, bool) {
	w := max(c.Window, 1)
	var xs []float64
	for i := len(r.Rows) - 1; i >= 0 && len(xs) < w; i-- {
		if v, ok := r.Rows[i][c.Metric]; ok {
			xs = append(xs, v)
		}
	}
	if len(xs) == 0 {
		return 0, false
	}
	return core.Mean(xs), true
}

// problemUnits are a run's per-problem values of an eval metric
// val/<set>/(avg|pass)@k at its last evaluation: one slice per set (all
// sets for "mean"), with the problems' ids, or ok = false when the run has
// no eval details for that evaluation.
func problemUnits(run string, r *armRun, metric string) (vals [][]float64, ids [][]string, ok bool) {
	m := valKeyRE.FindStringSubmatch(metric)
	if m == nil {
		return nil, nil, false
	}
	set, kind := m[1], m[2]
	k, _ := strconv.Atoi(m[3])
	step := -1
	for i := len(r.Rows) - 1; i >= 0; i-- {
		if _, has := r.Rows[i][metric]; has {
			step = int(r.Rows[i]["step"])
			break
		}
	}
	if step < 0 {
		return nil, nil, false
	}
	var sets []string
	if set == "mean" {
		entries, err := os.ReadDir(filepath.Join(run, "evals"))
		if err != nil {
			return nil, nil, false
		}
		for _, e := range entries {
			if e.IsDir() {
				if _, err := os.Stat(trainer.EvalDetailPath(run, e.Name(), step)); err == nil {
					sets = append(sets, e.Name())
				}
			}
		}
	} else {
		sets = []string{set}
	}
	if len(sets) == 0 {
		return nil, nil, false
	}
	for _, s := range sets {
		d, err := trainer.ReadEvalDetail(trainer.EvalDetailPath(run, s, step))
		if err != nil {
			return nil, nil, false
		}
		if kind == "pass" && k > d.N {
			if set == "mean" {
				continue // val/mean/pass@k is over the sets evaluated with n >= k
			}
			return nil, nil, false
		}
		xs := make([]float64, len(d.Correct))
		for i, c := range d.Correct {
			if kind == "avg" {
				xs[i] = float64(c) / float64(d.N)
			} else {
				xs[i], _ = core.PassAtK(d.N, c, k)
			}
		}
		vals, ids = append(vals, xs), append(ids, d.Problems)
	}
	if len(vals) == 0 {
		return nil, nil, false
	}
	return vals, ids, true
}

func claimSeed(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()
}

// judgeClaimPaired applies the claim rule (docs/bench.md) to claim c: the
// effect of Better over Than per seed, paired on the seeds both finished,
// with a two-level bootstrap interval (PairedBootstrap) over seeds and, for
// eval metrics whose runs kept per-problem results, over problems.
func judgeClaimPaired(c Claim, dir string, runs map[string][]*armRun) ClaimVerdict {
	v, _, _ := judgeClaim(c, dir, runs)
	return v
}

// judgeClaim is judgeClaimPaired that also returns the paired data it
// judged and the design, for the power table.
func judgeClaim(c Claim, dir string, runs map[string][]*armRun) (ClaimVerdict, []PairedSeed, Design) {
	v := ClaimVerdict{Claim: c.Name, Metric: c.Metric, Arms: []string{c.Better, c.Than}}
	than := map[uint64]*armRun{}
	for _, r := range runs[c.Than] {
		than[r.Seed] = r
	}
	sign := 1.0
	if c.LowerIsBetter {
		sign = -1
	}
	var seeds []PairedSeed
	var seedIDs [][][]string // per seed, the problem ids of each set (nil: no units)
	var notes []string
	for _, ra := range runs[c.Better] {
		rb, ok := than[ra.Seed]
		if !ok {
			continue
		}
		var ps PairedSeed
		ps.Seed = ra.Seed
		va, ia, okA := problemUnits(RunDir(dir, c.Better, ra.Seed), ra, c.Metric)
		vb, ib, okB := problemUnits(RunDir(dir, c.Than, ra.Seed), rb, c.Metric)
		var ids [][]string
		if okA && okB && slices.EqualFunc(ia, ib, slices.Equal) && c.Window <= 1 {
			ps.A, ps.B, ids = va, vb, ia
		} else {
			a, okA := claimValue(ra, c)
			b, okB := claimValue(rb, c)
			if !okA || !okB {
				notes = append(notes, fmt.Sprintf("seed %d: metric missing", ra.Seed))
				continue
			}
			ps.A, ps.B = [][]float64{{a}}, [][]float64{{b}}
		}
		for _, sets := range [][][]float64{ps.A, ps.B} {
			for _, xs := range sets {
				for i := range xs {
					xs[i] *= sign
				}
			}
		}
		seeds = append(seeds, ps)
		seedIDs = append(seedIDs, ids)
		v.Seeds = append(v.Seeds, ps.Seed)
	}
	v.Units, v.Design = "problems", Crossed.String()
	design := Crossed
	for _, ids := range seedIDs {
		if ids == nil {
			// One seed without per-problem results: every seed is judged
			// on its seed-level value, so all seeds are weighed alike.
			v.Units, v.Design = "none", ""
			for j := range seeds {
				if seedIDs[j] != nil {
					seeds[j].A = [][]float64{{seedMetric(seeds[j].A, nil)}}
					seeds[j].B = [][]float64{{seedMetric(seeds[j].B, nil)}}
				}
			}
			break
		}
		if !slices.EqualFunc(ids, seedIDs[0], slices.Equal) {
			design, v.Design = Nested, Nested.String()
		}
	}
	if len(seeds) == 0 {
		v.Units, v.Design = "none", ""
	}
	need := minSeedsProblems
	if v.Units == "none" {
		need = minSeedsSeedOnly
	}
	if len(seeds) < need {
		v.Verdict = "inconclusive"
		v.Note = strings.Join(append(notes, fmt.Sprintf("%d paired seed(s): a verdict needs at least %d when %s resampled", len(seeds), need,
			map[bool]string{true: "only seeds are", false: "problems are"}[v.Units == "none"])), "; ")
		if len(seeds) == 0 {
			v.Units = "none"
			return v, nil, design
		}
	}
	iv, err := PairedBootstrap(seeds, claimReps, claimLevel, design, rand.New(rand.NewPCG(claimSeed(c.Name), 0x5eed)))
	if err != nil {
		v.Verdict, v.Note = "inconclusive", err.Error()
		return v, seeds, design
	}
	v.DeltaMean, v.CILow, v.CIHigh, v.PerSeed = &iv.Delta, &iv.Low, &iv.High, iv.PerSeed
	if len(seeds) >= need {
		v.Verdict = Verdict(iv.Low, iv.High)
		if len(notes) > 0 {
			v.Note = strings.Join(notes, "; ")
		}
	}
	return v, seeds, design
}

func writeClaimsSection(b *strings.Builder, spec *Spec, dir string, runs map[string][]*armRun) error {
	b.WriteString("\n## Claims\n\n")
	if len(spec.Claims) == 0 {
		b.WriteString("The bench file lists no claims.\n")
		return nil
	}
	fmt.Fprintf(b, "Each claim is judged on the seeds both arms finished, paired by seed (arms share a seed's base policy, training problems and eval draws). "+
		"The effect d is the mean over seeds of (claimed-better arm - other arm) of the metric's final value (or the mean of its last `window` values), "+
		"sign flipped for lower-is-better metrics. Its 95%% interval is a percentile bootstrap (%d resamples): seeds drawn with replacement and, "+
		"for eval metrics whose runs kept per-problem results, held-out problems drawn with replacement, the same problems for both arms: "+
		"when every seed was evaluated on the same problems (**crossed**), one draw of problems per eval set serves every drawn seed, "+
		"so a problem's difficulty counts once for the experiment; otherwise (**nested**) each drawn seed draws its own. "+
		"**held**: the interval is above 0; **not held**: at or below 0; **inconclusive**: it contains 0, or too few paired seeds "+
		"(a verdict needs 5 when only seeds are resampled: an interval over n seeds alone excludes 0 whenever all n effects share a sign, "+
		"by chance 1 time in 2^(n-1) without any effect; 3 when problems are resampled too). "+
		"The same verdicts are in `%s`.\n\n", claimReps, VerdictsFile)
	reg, err := registered(dir)
	if err != nil {
		return err
	}
	if reg != nil {
		when := reg.Registered + ", `" + ClaimsFile + "`"
		if reg.Note != "" {
			when += "; " + reg.Note
		}
		fmt.Fprintf(b, "Claims were registered when the bench first started (%s). A claim added or changed since is **exploratory**: "+
			"its numbers are shown, it gets no verdict.\n\n", when)
	}
	b.WriteString("| claim | metric | better arm | than arm | seeds | resampled | d | 95% interval | verdict |\n|---|---|---|---|---|---|---|---|---|\n")
	var details strings.Builder
	var out []ClaimVerdict
	var power []powerRow
	for _, c := range spec.Claims {
		v, seeds, design := judgeClaim(c, dir, runs)
		if len(seeds) > 0 {
			m, ok := fitPower(seeds, design == Crossed)
			units := "seeds"
			if v.Units == "problems" {
				units = "seeds x problems (" + v.Design + ")"
			}
			row := powerRow{claim: c.Name, units: units, m: m, ok: ok, paper: c.PaperEffect}
			if v.DeltaMean != nil {
				row.observed = *v.DeltaMean
			}
			if !ok {
				row.m.Seeds = len(seeds)
			}
			power = append(power, row)
		}
		if reg.exploratory(c) {
			v.Note = strings.TrimPrefix(v.Note+"; judged "+v.Verdict+", but registered after the bench started", "; ")
			v.Verdict = "exploratory"
		}
		out = append(out, v)
		metric := c.Metric
		if c.Window > 1 {
			metric += fmt.Sprintf(" (mean of last %d)", c.Window)
		}
		if c.LowerIsBetter {
			metric += " (lower is better)"
		}
		res := "seeds"
		if v.Units == "problems" {
			res = "seeds x problems (" + v.Design + ")"
		}
		d, ci := "missing", "missing"
		if v.DeltaMean != nil {
			d, ci = fmtNum(*v.DeltaMean), fmt.Sprintf("[%s, %s]", fmtNum(*v.CILow), fmtNum(*v.CIHigh))
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %d | %s | %s | %s | **%s** |\n", c.Name, metric, c.Better, c.Than, len(v.Seeds), res, d, ci, v.Verdict)
		var per []string
		for i, s := range v.Seeds {
			per = append(per, fmt.Sprintf("seed %d: %s", s, fmtNum(v.PerSeed[i])))
		}
		fmt.Fprintf(&details, "- **%s**: %s. Effect per seed: [%s]; %s = %s; %s = %s.", c.Name, v.Verdict, strings.Join(per, ", "),
			c.Better, perSeed(runs[c.Better], c.Metric), c.Than, perSeed(runs[c.Than], c.Metric))
		if v.Note != "" {
			fmt.Fprintf(&details, " Note: %s.", v.Note)
		}
		details.WriteString("\n")
	}
	b.WriteString("\n" + details.String())
	writeRankedSection(b, out)
	writePowerSection(b, power)
	data, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, VerdictsFile), append(data, '\n'), 0o644)
}

// writePassCurveSection is the pass@k curve table: val/mean/pass@j at each
// arm's final evaluation (the base row: its step-0 evaluation), in %, as
// mean ± std over seeds, for every j all its runs report; nothing when no
// run reports two or more j.
func writePassCurveSection(b *strings.Builder, runs map[string][]*armRun, arms []string) {
	ks := map[int]bool{}
	for _, a := range arms {
		for _, r := range runs[a] {
			if row, ok := lastEval(r); ok {
				for key := range row {
					if m := passKeyRE.FindStringSubmatch(key); m != nil {
						k, _ := strconv.Atoi(m[1])
						ks[k] = true
					}
				}
			}
		}
	}
	if len(ks) < 2 {
		return
	}
	order := slices.Sorted(maps.Keys(ks))
	b.WriteString("\n## pass@k curves\n\nval/mean/pass@k in % (unbiased from each problem's n samples, mean over eval sets) at the final evaluation, mean ± std over seeds; `base` is the base policy before training.\n\n| arm |")
	for _, k := range order {
		fmt.Fprintf(b, " pass@%d |", k)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(order)) + "\n")
	for _, a := range arms {
		fmt.Fprintf(b, "| %s |", a)
		for _, k := range order {
			var xs []float64
			for _, r := range runs[a] {
				if row, ok := lastEval(r); ok {
					if v, ok := row[fmt.Sprintf("val/mean/pass@%d", k)]; ok {
						xs = append(xs, v)
					}
				}
			}
			fmt.Fprintf(b, " %s |", fmtPM(xs, 100, 1))
		}
		b.WriteString("\n")
	}
}

// writeRankedSection ranks, for every control arm that two or more claims
// compare against, the arms claimed better than it: a row per arm, a
// column per metric (in the order the claims first name them), each cell
// the effect, its interval and its verdict; rows sorted by the first
// metric's effect, largest first. It restates verdicts.json; it decides
// nothing new.
func writeRankedSection(b *strings.Builder, vs []ClaimVerdict) {
	var controls []string
	byControl := map[string][]ClaimVerdict{}
	for _, v := range vs {
		c := v.Arms[1]
		if _, ok := byControl[c]; !ok {
			controls = append(controls, c)
		}
		byControl[c] = append(byControl[c], v)
	}
	wrote := false
	for _, c := range controls {
		claims := byControl[c]
		if len(claims) < 2 {
			continue
		}
		var metrics, arms []string
		cells := map[[2]string]ClaimVerdict{}
		for _, v := range claims {
			if !slices.Contains(metrics, v.Metric) {
				metrics = append(metrics, v.Metric)
			}
			if !slices.Contains(arms, v.Arms[0]) {
				arms = append(arms, v.Arms[0])
			}
			cells[[2]string{v.Arms[0], v.Metric}] = v
		}
		first := func(a string) float64 {
			if v, ok := cells[[2]string{a, metrics[0]}]; ok && v.DeltaMean != nil {
				return *v.DeltaMean
			}
			return math.Inf(-1)
		}
		slices.SortStableFunc(arms, func(x, y string) int { return cmp.Compare(first(y), first(x)) })
		if !wrote {
			b.WriteString("\n## Ranked\n\nThe claims again, one table per arm they compare with: each cell is the effect over that arm, its 95% interval " +
				"and the verdict (**held**, not held, inconclusive, or exploratory); rows by the first column's effect, largest first.\n")
			wrote = true
		}
		fmt.Fprintf(b, "\n### Against %s\n\n| arm |", c)
		for _, m := range metrics {
			fmt.Fprintf(b, " %s |", m)
		}
		b.WriteString("\n|---|" + strings.Repeat("---|", len(metrics)) + "\n")
		for _, a := range arms {
			fmt.Fprintf(b, "| %s |", a)
			for _, m := range metrics {
				v, ok := cells[[2]string{a, m}]
				switch {
				case !ok:
					b.WriteString(" - |")
				case v.DeltaMean == nil:
					fmt.Fprintf(b, " missing, %s |", v.Verdict)
				default:
					verdict := v.Verdict
					if verdict == "held" {
						verdict = "**held**"
					}
					fmt.Fprintf(b, " %s [%s, %s] %s |", fmtNum(*v.DeltaMean), fmtNum(*v.CILow), fmtNum(*v.CIHigh), verdict)
				}
			}
			b.WriteString("\n")
		}
	}
}
