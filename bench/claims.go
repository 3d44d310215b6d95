package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/trainer"
)

// Settings of the claim rule (docs/bench.md, "How claims are judged").
const (
	claimLevel = 0.95
	claimAlpha = 1 - claimLevel
	// minSeeds is the paired seeds a verdict other than inconclusive
	// needs. The t interval is valid from 2 (1 degree of freedom), but with
	// 2 the spread between seeds is one number; 3 is the least this rule
	// trusts, for seed-level and per-problem claims alike.
	minSeeds = 3
	// VerdictsFile is the claims' machine-readable verdicts in the results
	// directory.
	VerdictsFile = "verdicts.json"
)

// ClaimVerdict is one entry of verdicts.json.
type ClaimVerdict struct {
	Claim  string   `json:"claim"`
	Metric string   `json:"metric"`
	Arms   []string `json:"arms"` // [better, than]
	// Family is the claim's multiplicity family (its metric unless the
	// claim names one) and FamilySize the claims of the family that were
	// tested (judged, registered, with enough seeds).
	Family     string   `json:"family"`
	FamilySize int      `json:"family_size"`
	Seeds      []uint64 `json:"seeds"`
	DeltaMean  *float64 `json:"delta_mean"`
	CILow      *float64 `json:"ci_low"`
	CIHigh     *float64 `json:"ci_high"`
	// SE is the effect's standard error, sqrt(VarSeeds + VarProblems):
	// the seeds' part (on DFSeeds = S-1 degrees of freedom) and the shared
	// problems' part (crossed; on DFProblems); CILow and CIHigh are
	// DeltaMean -/+ Interval.HalfWidth(0.95).
	SE          *float64 `json:"se"`
	VarSeeds    *float64 `json:"var_seeds"`
	VarProblems *float64 `json:"var_problems"`
	DFSeeds     *float64 `json:"df_seeds"`
	DFProblems  *float64 `json:"df_problems"`
	// P is the two-sided p value of "no effect"; PHolm is it adjusted by
	// Holm's step-down procedure over the family.
	P     *float64 `json:"p"`
	PHolm *float64 `json:"p_holm"`
	// Verdict is the claim's own (held, not held, equivalent,
	// inconclusive, or exploratory); VerdictHolm is the one after the
	// family's correction, which headlines use.
	Verdict     string `json:"verdict"`
	VerdictHolm string `json:"verdict_holm"`
	// Margin is the claim's equivalence margin (0: none); PEquiv the two
	// one-sided tests' p (doubled, so it is compared with 0.05 as P is)
	// and PEquivHolm it adjusted over the family's claims with a margin.
	Margin     float64  `json:"margin,omitempty"`
	PEquiv     *float64 `json:"p_equiv,omitempty"`
	PEquivHolm *float64 `json:"p_equiv_holm,omitempty"`
	// Units is what varied within a seed: "problems" (per-problem eval
	// results of both arms) or "none" (one value per seed).
	Units string `json:"units"`
	// Design is how the seeds' problems relate when Units is "problems":
	// "crossed" (every seed has the same problems: their shared part of
	// the variance is estimated and added) or "nested".
	Design string `json:"design,omitempty"`
	// Method names the interval: "t" (the per-seed effects' t interval,
	// S-1 df) or "crossed t" (seeds plus shared problems, each part with
	// its own t quantile).
	Method string `json:"method,omitempty"`
	// PerSeed is the effect of each seed, in Seeds order.
	PerSeed []float64 `json:"per_seed"`
	Note    string    `json:"note,omitempty"`
	// At is the axis of a claim judged at equal compute (responses,
	// tokens, wall) and AtPoints each seed's point on it, in Seeds order;
	// both absent for a claim at equal steps.
	At       string    `json:"at,omitempty"`
	AtPoints []float64 `json:"at_points,omitempty"`
	// SeedCheck is the claim's seed robustness (robust.go): leave one
	// seed out, and a split of the per-seed effects; absent below 3 seeds.
	SeedCheck *SeedCheck `json:"seed_check,omitempty"`
	// Sequential is the claim's look on a sequential bench
	// (sequential.go); absent on a plain one.
	Sequential *SeqLook `json:"sequential,omitempty"`
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

// unitKeyRE matches the eval metrics kept per problem: avg@k, pass@k,
// maj@k, distinct@k and pass^k of a set or of "mean".
var unitKeyRE = regexp.MustCompile(`^val/([^/]+)/(avg@|pass@|maj@|distinct@|pass\^)(\d+)$`)

// majAt is each problem's maj@k from d's samples, or from its restored
// MajAt; ok false when d has neither.
func majAt(d trainer.EvalDetail, k int) ([]float64, bool) {
	out := make([]float64, len(d.Correct))
	if len(d.Answers) == len(d.Correct) && len(d.Hits) == len(d.Correct) {
		for i := range out {
			keys := make([]string, len(d.Answers[i]))
			hits := make([]bool, len(d.Answers[i]))
			for j, a := range d.Answers[i] {
				if a >= 0 && a < len(d.Keys[i]) {
					keys[j] = d.Keys[i][a]
				}
				hits[j] = j < len(d.Hits[i]) && d.Hits[i][j] == '1'
			}
			if core.MajAtK(keys, hits, k) {
				out[i] = 1
			}
		}
		return out, true
	}
	if m, ok := d.MajAt[strconv.Itoa(k)]; ok && len(m) == len(d.Correct) {
		for i, v := range m {
			out[i] = float64(v)
		}
		return out, true
	}
	return nil, false
}

// problemUnits are a run's per-problem values of an eval metric
// val/<set>/<kind><k> (kind avg@, pass@, maj@, distinct@ or pass^) at its
// last evaluation: one slice per set (for "mean", every set the trainer
// averages: pass@k, pass^k and maj@k over the sets evaluated with n >= k,
// maj@k over those whose verifier names answers, distinct@k over those
// evaluated with n = k), with the problems' ids. The per-problem values
// must reproduce the logged metric (the mean over sets of the mean over
// problems, to 1e-9); why is the reason when they cannot be had or do not.
func problemUnits(run string, r *armRun, metric string) (vals [][]float64, ids [][]string, why string) {
	m := unitKeyRE.FindStringSubmatch(metric)
	if m == nil {
		return nil, nil, "not an eval metric kept per problem"
	}
	set, kind := m[1], m[2]
	k, _ := strconv.Atoi(m[3])
	step, logged := -1, 0.0
	for i := len(r.Rows) - 1; i >= 0; i-- {
		if v, has := r.Rows[i][metric]; has {
			step, logged = int(r.Rows[i]["step"]), v
			break
		}
	}
	if step < 0 {
		return nil, nil, "metric not logged"
	}
	var sets []string
	if set == "mean" {
		entries, err := os.ReadDir(filepath.Join(run, "evals"))
		if err != nil {
			return nil, nil, "no per-problem eval details (eval.details)"
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
		return nil, nil, "no per-problem eval details (eval.details)"
	}
	for _, s := range sets {
		d, err := trainer.ReadEvalDetail(trainer.EvalDetailPath(run, s, step))
		if err != nil {
			return nil, nil, "no per-problem eval details (eval.details)"
		}
		var xs []float64
		switch kind {
		case "avg@":
			xs = make([]float64, len(d.Correct))
			for i, c := range d.Correct {
				xs[i] = float64(c) / float64(d.N)
			}
		case "pass@", "pass^":
			if k > d.N {
				break
			}
			xs = make([]float64, len(d.Correct))
			for i, c := range d.Correct {
				if kind == "pass@" {
					xs[i], _ = core.PassAtK(d.N, c, k)
				} else {
					xs[i], _ = core.PassHatK(d.N, c, k)
				}
			}
		case "maj@":
			if k <= d.N {
				xs, _ = majAt(d, k)
			}
		case "distinct@":
			if k == d.N && len(d.Distinct) == len(d.Correct) {
				xs = make([]float64, len(d.Distinct))
				for i, c := range d.Distinct {
					xs[i] = float64(c)
				}
			}
		}
		if xs == nil {
			if set == "mean" {
				continue // a set the trainer's mean leaves out
			}
			return nil, nil, fmt.Sprintf("set %s's details cannot give %s per problem", s, metric)
		}
		vals, ids = append(vals, xs), append(ids, d.Problems)
	}
	if len(vals) == 0 {
		return nil, nil, "no set's details give " + metric + " per problem"
	}
	if got := seedMetric(vals); math.Abs(got-logged) > 1e-9*max(1, math.Abs(logged)) {
		return nil, nil, fmt.Sprintf("per-problem values give %v, the run logged %v", got, logged)
	}
	return vals, ids, ""
}

// judgeClaimPaired applies the claim rule (docs/bench.md) to claim c
// alone: its own verdict, before any multiplicity correction.
func judgeClaimPaired(c Claim, dir string, runs map[string][]*armRun) ClaimVerdict {
	v, _, _ := judgeClaim(c, dir, runs)
	return v
}

// judgeClaim is the effect of Better over Than per seed, paired on the
// seeds both finished, with its t interval (PairedInterval): over seeds
// and, for eval metrics whose runs kept per-problem results, over
// problems too. It also returns the paired data it judged and the
// design, for the power table. The family fields are left for
// adjustFamilies.
func judgeClaim(c Claim, dir string, runs map[string][]*armRun) (ClaimVerdict, []PairedSeed, Design) {
	return judgeClaimAt(c, dir, runs, claimLevel)
}

// judgeClaimAt is judgeClaim with the interval at two-sided level conf
// (a sequential bench's look, sequential.go).
func judgeClaimAt(c Claim, dir string, runs map[string][]*armRun, conf float64) (ClaimVerdict, []PairedSeed, Design) {
	v := ClaimVerdict{Claim: c.Name, Metric: c.Metric, Arms: []string{c.Better, c.Than}, Family: c.family(), Margin: c.Margin}
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
	// Why seeds lacked per-problem values: reason -> the seeds it applies
	// to, in order of first appearance.
	var seedOnly []string
	seedOnlySeeds := map[string][]string{}
	var at atJudge // a claim at equal compute's points (compute.go)
	why := func(reason string, seed uint64) {
		if _, ok := seedOnlySeeds[reason]; !ok {
			seedOnly = append(seedOnly, reason)
		}
		seedOnlySeeds[reason] = append(seedOnlySeeds[reason], strconv.FormatUint(seed, 10))
	}
	for _, ra := range runs[c.Better] {
		rb, ok := than[ra.Seed]
		if !ok {
			continue
		}
		var ps PairedSeed
		ps.Seed = ra.Seed
		var ids [][]string
		va, ia, whyA := problemUnits(RunDir(dir, c.Better, ra.Seed), ra, c.Metric)
		vb, ib, whyB := problemUnits(RunDir(dir, c.Than, ra.Seed), rb, c.Metric)
		switch {
		case c.At != "":
			why("a claim at equal "+atAxes[c.At]+" (per-problem results exist only at the steps each arm evaluated)", ra.Seed)
		case c.Window > 1:
			why(fmt.Sprintf("a window of %d values per seed", c.Window), ra.Seed)
		case whyA != "":
			why(c.Better+": "+whyA, ra.Seed)
		case whyB != "":
			why(c.Than+": "+whyB, ra.Seed)
		case !slices.EqualFunc(ia, ib, slices.Equal):
			why("the arms were evaluated on different problems", ra.Seed)
		default:
			ps.A, ps.B, ids = va, vb, ia
		}
		if ids == nil {
			a, b, miss := at.values(c, ra, rb, runs)
			if miss != "" {
				notes = append(notes, fmt.Sprintf("seed %d: %s", ra.Seed, miss))
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
	if n := at.note(c); n != "" {
		notes = append(notes, n)
		v.At, v.AtPoints = c.At, at.points
	}
	v.Units, v.Design, v.Method = "problems", Crossed.String(), "crossed t"
	design := Crossed
	for _, ids := range seedIDs {
		if ids == nil {
			// One seed without per-problem results: every seed is judged
			// on its seed-level value, so all seeds are weighed alike.
			v.Units, v.Design, v.Method = "none", "", "t"
			design = Nested
			for j := range seeds {
				if seedIDs[j] != nil {
					seeds[j].A = [][]float64{{seedMetric(seeds[j].A)}}
					seeds[j].B = [][]float64{{seedMetric(seeds[j].B)}}
				}
			}
			if unitKeyRE.MatchString(c.Metric) && len(seedOnly) > 0 {
				var rs []string
				for _, r := range seedOnly {
					rs = append(rs, fmt.Sprintf("%s (seed %s)", r, strings.Join(seedOnlySeeds[r], ", ")))
				}
				notes = append(notes, "judged on seeds only: "+strings.Join(rs, "; "))
			}
			break
		}
		if !slices.EqualFunc(ids, seedIDs[0], slices.Equal) {
			design, v.Design, v.Method = Nested, Nested.String(), "t"
		}
	}
	if len(seeds) == 0 {
		v.Units, v.Design, v.Method = "none", "", ""
		v.Verdict = "inconclusive"
		v.Note = strings.Join(append(notes, "no paired seeds"), "; ")
		return v, nil, design
	}
	if len(seeds) < 2 {
		v.Verdict = "inconclusive"
		v.Note = strings.Join(append(notes, fmt.Sprintf("%d paired seed: a verdict needs at least %d", len(seeds), minSeeds)), "; ")
		d := seedMetric(seeds[0].A) - seedMetric(seeds[0].B)
		v.DeltaMean, v.PerSeed = &d, []float64{d}
		return v, seeds, design
	}
	iv, err := PairedInterval(seeds, conf, design)
	if err != nil {
		v.Verdict, v.Note = "inconclusive", err.Error()
		return v, seeds, design
	}
	pv := Tests(iv, c.Margin)
	v.DeltaMean, v.CILow, v.CIHigh, v.PerSeed = &iv.Delta, &iv.Low, &iv.High, iv.PerSeed
	v.SE, v.VarSeeds, v.VarProblems, v.DFSeeds, v.DFProblems = &iv.SE, &iv.VarSeeds, &iv.VarProblems, &iv.DFSeeds, &iv.DFProblems
	if !iv.Degenerate() {
		v.P = &pv.Two
		if c.Margin > 0 {
			v.PEquiv = &pv.Equiv
		}
	} else {
		// Every seed's effect the same and no problem part (identical runs,
		// arms that collapsed alike, or discrete values that coincide):
		// the interval is the point d, which measures no error, so the
		// claim is inconclusive (Verdict) and has no test to correct.
		notes = append(notes, fmt.Sprintf("every seed's effect is %s with no spread (SE 0 up to rounding): the interval is a point, which measures no error, "+
			"so the claim is inconclusive whatever the effect's sign, has no p value, and takes no part in its family's correction", fmtNum(iv.Delta)))
	}
	if len(seeds) < minSeeds {
		v.Verdict = "inconclusive"
		notes = append(notes, fmt.Sprintf("%d paired seeds: a verdict needs at least %d", len(seeds), minSeeds))
	} else {
		v.Verdict = Verdict(iv.Low, iv.High, c.Margin)
	}
	v.Note = strings.Join(notes, "; ")
	return v, seeds, design
}

// tested reports whether v takes part in its family's correction: a
// registered claim judged on enough seeds with a p value (not a point
// interval).
func (v ClaimVerdict) tested() bool {
	return v.P != nil && v.Verdict != "exploratory" && len(v.Seeds) >= minSeeds
}

// holm is Holm's step-down adjustment of p values: sorted ascending, the
// i-th (from 0) of m is multiplied by m - i, and each adjusted value is at
// least the one before it, at most 1. The result is in p's order.
func holm(p []float64) []float64 {
	m := len(p)
	order := make([]int, m)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(p[a], p[b]) })
	out := make([]float64, m)
	run := 0.0
	for rank, i := range order {
		run = max(run, min(1, float64(m-rank)*p[i]))
		out[i] = run
	}
	return out
}

// adjustFamilies fills the family fields of vs: per family, Holm over the
// two-sided p values of its tested claims, and separately over the
// equivalence p values of those with a margin; VerdictHolm is held or not
// held (by the effect's sign) where the adjusted p is below 0.05, else
// equivalent where the adjusted equivalence p is, else inconclusive. A
// claim not tested keeps its own verdict.
func adjustFamilies(vs []ClaimVerdict) {
	fams := map[string][]int{}
	var order []string
	for i, v := range vs {
		vs[i].VerdictHolm = v.Verdict
		if !v.tested() {
			continue
		}
		if _, ok := fams[v.Family]; !ok {
			order = append(order, v.Family)
		}
		fams[v.Family] = append(fams[v.Family], i)
	}
	for _, f := range order {
		idx := fams[f]
		var ps, pe []float64
		var withMargin []int
		for _, i := range idx {
			ps = append(ps, *vs[i].P)
			if vs[i].PEquiv != nil {
				pe = append(pe, *vs[i].PEquiv)
				withMargin = append(withMargin, i)
			}
		}
		adj := holm(ps)
		for j, i := range idx {
			v := &vs[i]
			v.FamilySize = len(idx)
			p := adj[j]
			v.PHolm = &p
			switch {
			case p < claimAlpha && *v.DeltaMean > 0:
				v.VerdictHolm = "held"
			case p < claimAlpha:
				v.VerdictHolm = "not held"
			default:
				v.VerdictHolm = "inconclusive"
			}
		}
		for j, p := range holm(pe) {
			v := &vs[withMargin[j]]
			pp := p
			v.PEquivHolm = &pp
			if v.VerdictHolm == "inconclusive" && p < claimAlpha {
				v.VerdictHolm = "equivalent"
			}
		}
	}
}

func writeClaimsSection(b *strings.Builder, spec *Spec, dir string, runs map[string][]*armRun) error {
	b.WriteString("\n## Claims\n\n")
	if len(spec.Claims) == 0 {
		b.WriteString("The bench file lists no claims.\n")
		return nil
	}
	b.WriteString(claimRuleText)
	b.WriteString(seedCheckText)
	fmt.Fprintf(b, "The same verdicts, with standard errors, degrees of freedom and p values, are in `%s`.\n\n", VerdictsFile)
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
			"its numbers are shown, it gets no verdict and takes no part in its family's correction.\n\n", when)
	}
	var power []powerRow
	out := judgeClaims(spec, dir, runs, reg, func(c Claim, v ClaimVerdict, seeds []PairedSeed, design Design) {
		if len(seeds) < 2 {
			return
		}
		m, ok := fitPower(seeds, design == Crossed)
		row := powerRow{claim: c.Name, units: designText(v), m: m, ok: ok, paper: c.PaperEffect}
		if v.DeltaMean != nil {
			row.observed = *v.DeltaMean
		}
		if !ok {
			row.m.Seeds = len(seeds)
		}
		power = append(power, row)
	})
	b.WriteString("| claim | metric | better arm | than arm | seeds | design | d | 95% interval | p | verdict | family (m) | Holm p | verdict after Holm | seed check |\n" +
		"|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	var details strings.Builder
	for i, c := range spec.Claims {
		v := out[i]
		metric := c.Metric
		if c.Window > 1 {
			metric += fmt.Sprintf(" (mean of last %d)", c.Window)
		}
		if c.LowerIsBetter {
			metric += " (lower is better)"
		}
		if c.Margin > 0 {
			metric += " (margin " + fmtNum(c.Margin) + ")"
		}
		if c.At != "" {
			metric += " (at equal " + atAxes[c.At] + ")"
		}
		d, ci, p, ph, fam := "missing", "missing", "-", "-", v.Family
		if v.DeltaMean != nil {
			d = fmtNum(*v.DeltaMean)
		}
		if v.CILow != nil {
			ci = fmt.Sprintf("[%s, %s]", fmtNum(*v.CILow), fmtNum(*v.CIHigh))
		}
		if v.P != nil {
			p = fmtP(*v.P)
		}
		if v.PHolm != nil {
			ph = fmtP(*v.PHolm)
			fam += fmt.Sprintf(" (%d)", v.FamilySize)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | **%s** | %s |\n", c.Name, metric, c.Better, c.Than, len(v.Seeds),
			designText(v), d, ci, p, v.Verdict, fam, ph, v.VerdictHolm, seedCheckCell(v.SeedCheck))
		var per []string
		for i, s := range v.Seeds {
			if i < len(v.PerSeed) {
				per = append(per, fmt.Sprintf("seed %d: %s", s, fmtNum(v.PerSeed[i])))
			}
		}
		fmt.Fprintf(&details, "- **%s**: %s; after Holm, %s.", c.Name, v.Verdict, v.VerdictHolm)
		if v.SE != nil {
			fmt.Fprintf(&details, " SE %s: seeds %s (%s df)", fmtNum(*v.SE), fmtNum(math.Sqrt(*v.VarSeeds)), fmtNum(*v.DFSeeds))
			if *v.VarProblems > 0 {
				fmt.Fprintf(&details, ", shared problems %s (%s df)", fmtNum(math.Sqrt(*v.VarProblems)), fmtNum(*v.DFProblems))
			}
			details.WriteString(".")
		}
		if v.PEquiv != nil {
			fmt.Fprintf(&details, " Equivalence (margin %s): p %s", fmtNum(c.Margin), fmtP(*v.PEquiv))
			if v.PEquivHolm != nil {
				fmt.Fprintf(&details, ", %s after Holm", fmtP(*v.PEquivHolm))
			}
			details.WriteString(".")
		}
		fmt.Fprintf(&details, " Effect per seed: [%s]; %s = %s; %s = %s.", strings.Join(per, ", "),
			c.Better, atPerSeed(c, runs, c.Better), c.Than, atPerSeed(c, runs, c.Than))
		details.WriteString(seedCheckDetail(v.SeedCheck, v.Seeds))
		if v.Note != "" {
			fmt.Fprintf(&details, " Note: %s.", v.Note)
		}
		details.WriteString("\n")
	}
	b.WriteString("\n" + details.String())
	writeSequentialSection(b, dir, out)
	writeRankedSection(b, out)
	writePowerSection(b, power)
	data, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, VerdictsFile), append(data, '\n'), 0o644)
}

// judgeClaims judges every claim of spec (judgeClaim), marks those not
// registered when the bench started (reg) exploratory, and applies the
// families' Holm correction: the entries of verdicts.json. each, when not
// nil, sees every claim's own verdict with the paired data it judged and
// its design, before the marking (the power table's input).
func judgeClaims(spec *Spec, dir string, runs map[string][]*armRun, reg *registration, each func(Claim, ClaimVerdict, []PairedSeed, Design)) []ClaimVerdict {
	if vs, ok := sequentialVerdicts(spec, dir, runs, reg, each); ok {
		return vs
	}
	out := make([]ClaimVerdict, 0, len(spec.Claims))
	for _, c := range spec.Claims {
		v, seeds, design := judgeClaim(c, dir, runs)
		v.SeedCheck = checkSeeds(c, v, seeds, design)
		if each != nil {
			each(c, v, seeds, design)
		}
		if reg.exploratory(c) {
			v.Note = strings.TrimPrefix(v.Note+"; judged "+v.Verdict+", but registered after the bench started", "; ")
			v.Verdict = "exploratory"
		}
		out = append(out, v)
	}
	adjustFamilies(out)
	return out
}

// claimRuleText is the Claims section's statement of the rule.
const claimRuleText = "Each claim is judged on the seeds both arms finished, paired by seed (arms share a seed's base policy, training problems and eval draws). " +
	"The effect d is the mean over seeds of (claimed-better arm - other arm) of the metric's final value (or the mean of its last `window` values), " +
	"sign flipped for lower-is-better metrics. Its 95% interval is d -/+ h, in closed form (nothing is resampled, so there is no Monte-Carlo error):\n\n" +
	"- **seeds**: training metrics, windows, and eval metrics whose runs kept no per-problem results. h = t(0.975, S-1) SE, SE^2 the per-seed effects' " +
	"sample variance over S: the t interval of a mean.\n" +
	"- **seeds x problems (crossed)**: eval metrics kept per problem (avg@k, pass@k, pass^k, maj@k, distinct@k), every seed evaluated on the same problems. " +
	"SE^2 is the seeds' part V_s above plus the part every seed shares, which their spread cannot show: the problems' variance component V_p, " +
	"estimated per eval set from the problem and interaction mean squares of the seeds x problems table of differences (floored at 0, " +
	"on the problem mean squares' degrees of freedom df_p: P-1 for one set). Each part has its own t quantile: h = sqrt(t(0.975, S-1)^2 V_s + t(0.975, df_p)^2 V_p) " +
	"(Banerjee's interval, conservative whatever the two parts' ratio).\n" +
	"- **seeds x problems (nested)**: seeds evaluated on different problems; the per-seed effects are independent, so as **seeds**.\n\n" +
	"Why t, not a percentile bootstrap: at 5 seeds a percentile interval uses the plug-in variance and normal-like quantiles, and gives false verdicts " +
	"at about three times its stated rate; a simulation test checks this rule's rate at 3 to 10 seeds (docs/bench.md).\n\n" +
	"**held**: the interval lies above 0; **not held**: at or below 0; **equivalent**: neither, and the claim registered a `margin` inside which " +
	"the whole interval lies (two one-sided tests at 2.5% each); **inconclusive**: otherwise, fewer than 3 paired seeds, or no spread " +
	"(every seed's effect the same and the problems adding none, up to rounding: the interval is a point, which measures no error). " +
	"Inconclusive says the bench could not tell; it is not evidence that the arms are equal (a claim of no difference registers a margin).\n\n" +
	"**Multiplicity**: claims form families, one per metric unless a claim names its `family`. Within a family, Holm's step-down procedure adjusts " +
	"the two-sided p values (and, apart, the equivalence p values of the claims with a margin), and **verdict after Holm** is held or not held " +
	"where the adjusted p is below 0.05. Quote that one; the claim's own verdict is shown beside it.\n\n"

// designText says what a claim's interval resampled: seeds, or seeds and
// problems, crossed or nested.
func designText(v ClaimVerdict) string {
	if v.Units == "problems" {
		return "seeds x problems (" + v.Design + ")"
	}
	return "seeds"
}

// fmtP formats a p value: 3 significant digits, "<0.0001" below that.
func fmtP(p float64) string {
	if p < 1e-4 {
		return "<0.0001"
	}
	return strconv.FormatFloat(p, 'g', 3, 64)
}

// writePassCurveSection is the pass@k curve table: val/mean/pass@j at each
// arm's final evaluation (the base row: its step-0 evaluation), as fractions, as
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
	b.WriteString("\n## pass@k curves\n\nval/mean/pass@k as a fraction (unbiased from each problem's n samples, mean over eval sets) at the final evaluation, mean ± std over seeds; `base` is the base policy before training.\n\n| arm |")
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
			fmt.Fprintf(b, " %s |", fmtPM(xs, 1, 3))
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
				"and the verdict after Holm's correction in the claim's family (**held**, not held, equivalent, inconclusive, or exploratory); " +
				"rows by the first column's effect, largest first.\n")
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
					fmt.Fprintf(b, " missing, %s |", v.VerdictHolm)
				case v.CILow == nil:
					fmt.Fprintf(b, " %s (no interval), %s |", fmtNum(*v.DeltaMean), v.VerdictHolm)
				default:
					verdict := v.VerdictHolm
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
