package bench

import (
	"fmt"
	"math"
	"strings"
)

// maxPlanSeeds bounds the seeds a plan searches.
const maxPlanSeeds = 10000

// powerModel is the variance of a claim's effect estimate as a function of
// the seeds S and problems P, from a pilot's paired differences:
//
//	Var(d) = Seed/S + Problem/P + Resid/(S P)
//
// Seed, Problem and Resid are variance components of the per-seed,
// per-problem differences d[s][p] (a two-way random model when every seed
// saw the same problems; Problem is 0 for nested or seed-level data, and
// for seed-level data Seed is the variance of the per-seed effects and
// Resid 0).
type powerModel struct {
	Seed, Problem, Resid float64
	Seeds, Problems      int  // the pilot's
	Crossed              bool // Problem is estimated
}

func (m powerModel) se(seeds, problems int) float64 {
	v := m.Seed / float64(seeds)
	if problems > 0 {
		v += m.Problem/float64(problems) + m.Resid/float64(seeds*problems)
	}
	return math.Sqrt(v)
}

// interval is the claim rule's interval shape at seeds and problems, with
// the model's variances in place of their estimates: the seeds' part
// (Seed + Resid/P)/S on S-1 degrees of freedom and the shared problems'
// part Problem/P on P-1.
func (m powerModel) interval(seeds, problems int) Interval {
	S := float64(seeds)
	iv := Interval{VarSeeds: m.Seed / S, DFSeeds: S - 1}
	if problems > 0 {
		iv.VarSeeds += m.Resid / (S * float64(problems))
		if problems > 1 && m.Problem > 0 {
			iv.VarProblems, iv.DFProblems = m.Problem/float64(problems), float64(problems-1)
		}
	}
	iv.SE = math.Sqrt(iv.VarSeeds + iv.VarProblems)
	return iv
}

// mde is the smallest effect detected with 80% power by the claim rule's
// two-sided 0.05 test with seeds and problems: the interval's half-width
// at 95% plus its half-width at 60% (one-sided 0.80), each part with its
// own t quantiles as the rule has them (the usual approximation of the
// noncentral t's power; (t(0.975, S-1) + t(0.80, S-1)) SE for a
// seed-level claim).
func (m powerModel) mde(seeds, problems int) float64 {
	iv := m.interval(seeds, problems)
	return iv.HalfWidth(0.95) + iv.HalfWidth(0.60)
}

// seedsFor is the fewest seeds (up to maxPlanSeeds, at least the claim
// rule's minimum for a verdict) whose mde, with problems, is at most
// delta; ok is false when none is (the problems' share of the variance
// alone is too large, or delta <= 0).
func (m powerModel) seedsFor(delta float64, problems int) (int, bool) {
	if !(delta > 0) {
		return 0, false
	}
	for s := minSeeds; s <= maxPlanSeeds; s++ {
		if m.mde(s, problems) <= delta {
			return s, true
		}
	}
	return 0, false
}

// fitPower estimates the model from paired seeds (the claim's units, sign
// already in the claim's direction). Per-problem data of all sets are
// concatenated (the effect is their plain mean when the sets are the same
// size, as in every shipped bench). crossed says every seed saw the same
// problems. ok is false with fewer than 2 seeds.
func fitPower(seeds []PairedSeed, crossed bool) (powerModel, bool) {
	S := len(seeds)
	if S < 2 {
		return powerModel{}, false
	}
	d := make([][]float64, S)
	for s, ps := range seeds {
		for j := range ps.A {
			for i := range ps.A[j] {
				d[s] = append(d[s], ps.A[j][i]-ps.B[j][i])
			}
		}
	}
	P := len(d[0])
	m := powerModel{Seeds: S}
	if P == 1 { // seed-level: one value per seed
		mean := 0.0
		for s := range d {
			mean += d[s][0]
		}
		mean /= float64(S)
		for s := range d {
			m.Seed += (d[s][0] - mean) * (d[s][0] - mean)
		}
		m.Seed /= float64(S - 1)
		return m, true
	}
	m.Problems = P
	rows := make([]float64, S)
	grand := 0.0
	for s := range d {
		for _, x := range d[s] {
			rows[s] += x
		}
		grand += rows[s]
		rows[s] /= float64(len(d[s]))
	}
	if !crossed {
		// Nested: seeds, and problems within seeds (one-way model).
		n := 0
		for s := range d {
			n += len(d[s])
		}
		grand /= float64(n)
		var ssB, ssW float64
		for s := range d {
			ssB += float64(len(d[s])) * (rows[s] - grand) * (rows[s] - grand)
			for _, x := range d[s] {
				ssW += (x - rows[s]) * (x - rows[s])
			}
		}
		msB, msW := ssB/float64(S-1), ssW/float64(n-S)
		m.Resid = msW
		m.Seed = max(0, (msB-msW)/float64(P))
		return m, true
	}
	grand /= float64(S * P)
	cols := make([]float64, P)
	for s := range d {
		for p, x := range d[s] {
			cols[p] += x / float64(S)
		}
	}
	var ssS, ssP, ssR float64
	for s := range d {
		ssS += (rows[s] - grand) * (rows[s] - grand)
		for p, x := range d[s] {
			r := x - rows[s] - cols[p] + grand
			ssR += r * r
		}
	}
	for p := range cols {
		ssP += (cols[p] - grand) * (cols[p] - grand)
	}
	msS, msP := float64(P)*ssS/float64(S-1), float64(S)*ssP/float64(P-1)
	msR := ssR / float64((S-1)*(P-1))
	m.Crossed = true
	m.Resid = msR
	m.Seed = max(0, (msS-msR)/float64(P))
	m.Problem = max(0, (msP-msR)/float64(S))
	return m, true
}

// seedsText is seedsFor(|delta|) at the pilot's problems as a table cell.
func (m powerModel) seedsText(delta float64) string {
	n, ok := m.seedsFor(math.Abs(delta), m.Problems)
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
		"What each claim's design could detect, with this bench as the pilot. The effect's variance is split into components of seeds, " +
		"problems and their interaction (a two-way random model of the per-seed, per-problem differences when every seed saw the same problems; " +
		"seeds and problems within seeds otherwise; the per-seed effects alone for seed-level claims): Var(d) = seed/S + problem/P + interaction/(S P). " +
		"The minimum detectable effect (MDE) is the effect the claim rule's two-sided 0.05 t test finds with 80% power at these seeds S and problems P: " +
		"the interval's half-width plus its one-sided 80% counterpart, each part with its own t quantiles as the interval has them ((t(0.975, S-1) + t(0.80, S-1)) SE for seeds alone: 3.7 SE at 5 seeds, 2.8 with many). A claim with `paper_effect` says whether this bench could detect " +
		"the effect the paper reports, and how many seeds would (at these problems, and at least the 3 seeds a verdict needs; \"not reachable\" when the problems' share alone is too large). " +
		"Estimated from the data judged, so it describes this run; for planning, run a pilot first.\n\n" +
		"| claim | resampled | S | P | SE | MDE | observed d | paper's effect | powered for it | seeds for it | seeds for the observed d |\n" +
		"|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		if !r.ok {
			fmt.Fprintf(b, "| %s | %s | %d | - | - | - | %s | - | - | - | - |\n", r.claim, r.units, r.m.Seeds, fmtNum(r.observed))
			continue
		}
		P := "-"
		if r.m.Problems > 0 {
			P = fmt.Sprint(r.m.Problems)
		}
		paper, powered, forPaper := "-", "-", "-"
		if r.paper != nil {
			paper = fmtNum(*r.paper)
			powered = map[bool]string{true: "yes", false: "**no**"}[r.m.mde(r.m.Seeds, r.m.Problems) <= math.Abs(*r.paper)]
			forPaper = r.m.seedsText(*r.paper)
		}
		fmt.Fprintf(b, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.claim, r.units, r.m.Seeds, P,
			fmtNum(r.m.se(r.m.Seeds, r.m.Problems)), fmtNum(r.m.mde(r.m.Seeds, r.m.Problems)), fmtNum(r.observed), paper, powered, forPaper, r.m.seedsText(r.observed))
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
		if m.Problems > 0 {
			P = fmt.Sprint(m.Problems)
		}
		if c.PaperEffect != nil {
			paper, forPaper = fmtNum(*c.PaperEffect), m.seedsText(*c.PaperEffect)
		}
		if v.DeltaMean != nil {
			obs, forObs = fmtNum(*v.DeltaMean), m.seedsText(*v.DeltaMean)
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", c.Name, m.Seeds, P,
			fmtNum(m.mde(m.Seeds, m.Problems)), fmtNum(m.mde(seeds, m.Problems)), paper, forPaper, obs, forObs)
	}
	return b.String(), nil
}
