package bench

import (
	"fmt"
	"math"
	"strings"
)

// maxPlanSeeds bounds the seeds a plan searches.
const maxPlanSeeds = 10000

// powerModel is the variance of a claim's effect estimate as a function
// of the seeds S, at the pilot's problems: the claim rule's own interval
// (PairedInterval) with its seeds' part scaled to S,
//
//	Var(d) = Seed/S + Problems
//
// Seed is the per-seed effects' sample variance (the claim's VarSeeds
// times the pilot's S: the seed component plus the interaction's share
// at these problems) on S-1 degrees of freedom; Problems is the claim's
// shared-problems part VarProblems on its DFProblems, which more seeds
// do not shrink (it estimates the problems' component over P, whatever
// S). At the pilot's S the SE is the claim's SE, the same numbers from
// the same function, rounding included.
type powerModel struct {
	Seed       float64 // per-seed effects' variance
	Problems   float64 // the shared problems' part of Var(d)
	DFProblems float64 // its degrees of freedom
	Seeds      int     // the pilot's
	Units      int     // the pilot's problems per seed over all sets (0: one value per seed)
	Crossed    bool    // the problems' part is estimated
}

func (m powerModel) se(seeds int) float64 { return m.interval(seeds).SE }

// interval is the claim rule's interval at seeds: the seeds' part Seed/S
// on S-1 degrees of freedom and the problems' part as the pilot's.
func (m powerModel) interval(seeds int) Interval {
	S := float64(seeds)
	iv := Interval{VarSeeds: m.Seed / S, DFSeeds: S - 1}
	if m.Problems > 0 {
		iv.VarProblems, iv.DFProblems = m.Problems, m.DFProblems
	}
	iv.SE = math.Sqrt(iv.VarSeeds + iv.VarProblems)
	return iv
}

// mde is the smallest effect detected with 80% power by the claim rule's
// two-sided 0.05 test with seeds: the interval's half-width at 95% plus
// its half-width at 60% (one-sided 0.80), each part with its own t
// quantiles as the rule has them (the usual approximation of the
// noncentral t's power; (t(0.975, S-1) + t(0.80, S-1)) SE for a
// seed-level claim).
func (m powerModel) mde(seeds int) float64 {
	iv := m.interval(seeds)
	return iv.HalfWidth(0.95) + iv.HalfWidth(0.60)
}

// seedsFor is the fewest seeds (up to maxPlanSeeds, at least the claim
// rule's minimum for a verdict) whose mde is at most delta; ok is false
// when none is (the problems' part alone is too large, or delta <= 0).
func (m powerModel) seedsFor(delta float64) (int, bool) {
	if !(delta > 0) {
		return 0, false
	}
	for s := minSeeds; s <= maxPlanSeeds; s++ {
		if m.mde(s) <= delta {
			return s, true
		}
	}
	return 0, false
}

// fitPower is the model of a claim's paired seeds (sign already in the
// claim's direction): PairedInterval's parts, as the claim's verdict has
// them. crossed says every seed saw the same problems (the claim's
// design). ok is false with fewer than 2 seeds or data PairedInterval
// refuses.
func fitPower(seeds []PairedSeed, crossed bool) (powerModel, bool) {
	design := Nested
	if crossed {
		design = Crossed
	}
	iv, err := PairedInterval(seeds, claimLevel, design)
	if err != nil {
		return powerModel{Seeds: len(seeds)}, false
	}
	m := powerModel{Seed: iv.VarSeeds * float64(len(seeds)), Seeds: len(seeds), Crossed: crossed}
	if iv.VarProblems > 0 {
		m.Problems, m.DFProblems = iv.VarProblems, iv.DFProblems
	}
	for _, set := range seeds[0].A {
		m.Units += len(set)
	}
	if m.Units == len(seeds[0].A) { // one value per set: seed level
		m.Units = 0
	}
	return m, true
}

// seedsText is seedsFor(|delta|) at the pilot's problems as a table cell.
func (m powerModel) seedsText(delta float64) string {
	n, ok := m.seedsFor(math.Abs(delta))
	if !ok {
		return "not reachable"
	}
	return fmt.Sprint(n)
}

// powerRow is a claim's line of the power table.
type powerRow struct {
	claim, units string
	m            powerModel
	ok           bool
	observed     float64
	paper        *float64
}

func writePowerSection(b *strings.Builder, rows []powerRow) {
	if len(rows) == 0 {
		return
	}
	b.WriteString("\n## Power\n\n" +
		"What each claim's design could detect, with this bench as the pilot. The effect's variance is the claim's own (its SE is the claim's), " +
		"in its two parts: the seeds' part, the per-seed effects' variance over S, and the shared problems' part (crossed designs), which more seeds do not shrink: " +
		"Var(d) = seed/S + problems, at these problems P (the units per seed over all eval sets). " +
		"The minimum detectable effect (MDE) is the effect the claim rule's two-sided 0.05 t test finds with 80% power at S seeds: " +
		"the interval's half-width plus its one-sided 80% counterpart, each part with its own t quantiles as the interval has them ((t(0.975, S-1) + t(0.80, S-1)) SE for seeds alone: 3.7 SE at 5 seeds, 2.8 with many). A claim with `paper_effect` says whether this bench could detect " +
		"the effect the paper reports, and how many seeds would (at these problems, and at least the 3 seeds a verdict needs; \"not reachable\" when the problems' part alone is too large). " +
		"Estimated from the data judged, so it describes this run; for planning, run a pilot first.\n\n" +
		"| claim | resampled | S | P | SE | MDE | observed d | paper's effect | powered for it | seeds for it | seeds for the observed d |\n" +
		"|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		if !r.ok {
			fmt.Fprintf(b, "| %s | %s | %d | - | - | - | %s | - | - | - | - |\n", r.claim, r.units, r.m.Seeds, fmtNum(r.observed))
			continue
		}
		P := "-"
		if r.m.Units > 0 {
			P = fmt.Sprint(r.m.Units)
		}
		paper, powered, forPaper := "-", "-", "-"
		if r.paper != nil {
			paper = fmtNum(*r.paper)
			powered = map[bool]string{true: "yes", false: "**no**"}[r.m.mde(r.m.Seeds) <= math.Abs(*r.paper)]
			forPaper = r.m.seedsText(*r.paper)
		}
		fmt.Fprintf(b, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.claim, r.units, r.m.Seeds, P,
			fmtNum(r.m.se(r.m.Seeds)), fmtNum(r.m.mde(r.m.Seeds)), fmtNum(r.observed), paper, powered, forPaper, r.m.seedsText(r.observed))
	}
}

// Plan writes, from the finished runs in o.Dir as a pilot, a power table
// for a bench of seeds seeds on the same problems: per claim, the minimum
// detectable effect now and with seeds, and the seeds each claim's
// paper_effect and its observed effect need (`cde-run bench --plan N`).
func Plan(spec *Spec, o Options, seeds int) (string, error) {
	if seeds < 1 {
		return "", fmt.Errorf("bench: --plan %d: want a number of seeds >= 1", seeds)
	}
	if err := spec.Validate(o.Dir, o.Only...); err != nil {
		return "", err
	}
	runs, _, err := loadRuns(spec, o.Dir)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Power plan from the finished runs in %s (the pilot) for %d seeds on the same problems: the minimum detectable effect (MDE, "+
		"80%% power, the claim rule's two-sided 0.05 t test with its degrees of freedom) and the seeds that reach an effect.\n\n", o.Dir, seeds)
	b.WriteString("| claim | pilot S | P | MDE now | MDE with the planned seeds | paper's effect | seeds for it | observed d | seeds for it |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range spec.Claims {
		v, ps, design := judgeClaim(c, o.Dir, runs)
		m, ok := fitPower(ps, design == Crossed)
		if !ok {
			fmt.Fprintf(&b, "| %s | %d | - | - | - | - | - | - | - |\n", c.Name, len(ps))
			continue
		}
		P, paper, forPaper, obs, forObs := "-", "-", "-", "-", "-"
		if m.Units > 0 {
			P = fmt.Sprint(m.Units)
		}
		if c.PaperEffect != nil {
			paper, forPaper = fmtNum(*c.PaperEffect), m.seedsText(*c.PaperEffect)
		}
		if v.DeltaMean != nil {
			obs, forObs = fmtNum(*v.DeltaMean), m.seedsText(*v.DeltaMean)
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", c.Name, m.Seeds, P,
			fmtNum(m.mde(m.Seeds)), fmtNum(m.mde(seeds)), paper, forPaper, obs, forObs)
	}
	return b.String(), nil
}
