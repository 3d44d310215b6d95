package bench

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Seed robustness (docs/bench.md, "Seed robustness and collapses"). A
// verdict over a few seeds cannot see a failure that no seed showed (an arm
// that collapses in 20% of seeds shows no collapse in 3 seeds half the
// time), and it can rest on one seed. Every claim's verdicts.json entry
// and report line carry two checks of its per-seed effects: leave one seed
// out, and a split of the effects into two groups.
const (
	// splitAlpha bounds the split check's false-flag rate on normal
	// per-seed effects: Bonferroni over every way to split S seeds in two.
	splitAlpha = 0.05
	// splitFloor is the least within-group standard deviation, as a
	// fraction of the arms' level (the mean over seeds of (|M(A)| +
	// |M(B)|)/2): effects that differ by less than about half a percent of
	// what the metric measures are not told apart, so a discrete metric's
	// ties do not make two "groups" out of one. The floor is also at least
	// the rounding error of the values' grid (splitGrid).
	splitFloor = 0.005
	// collapseConf is the chance with which the collapse table's seeds
	// show a collapse at least once.
	collapseConf = 0.9
)

// SeedCheck is a claim's seed-robustness check (verdicts.json's
// "seed_check"), present when the claim has 3 or more paired seeds.
type SeedCheck struct {
	// LOSOLow and LOSOHigh are the least and greatest effect over the
	// subsets that leave one seed out (the mean of the other S-1 per-seed
	// effects).
	LOSOLow  float64 `json:"loso_low"`
	LOSOHigh float64 `json:"loso_high"`
	// LOSOVerdicts (4 or more seeds) is the claim rule's own verdict on
	// each subset, in Seeds order: the subset without Seeds[i] is
	// LOSOVerdicts[i] ("-" where no interval could be formed). With 3
	// seeds a subset has 2 and gets no verdict: the field is absent.
	LOSOVerdicts []string `json:"loso_verdicts,omitempty"`
	// RestsOn are the seeds whose leaving out changes the claim's own
	// verdict (before Holm's correction, which is not redone).
	RestsOn []uint64 `json:"rests_on,omitempty"`
	// SplitT is the largest two-group t over the splits of the sorted
	// per-seed effects (pooled within-group standard deviation on S-2
	// degrees of freedom, floored at splitFloor times the arms' level);
	// SplitCrit is t(1 - 0.05/(2m), S-2) with m = 2^(S-1) - 1, the ways to
	// split S seeds in two. Flag is "outlier" (the smaller group is one
	// seed) or "bimodal" when SplitT > SplitCrit, else empty; FlagSeeds
	// the smaller group's seeds (the lower group's when the two are of a
	// size).
	SplitT    float64  `json:"split_t"`
	SplitCrit float64  `json:"split_crit"`
	Flag      string   `json:"flag,omitempty"`
	FlagSeeds []uint64 `json:"flag_seeds,omitempty"`
}

// seedsToSee is the least number of independent seeds for which an event
// of probability q per seed happens in at least one with probability conf:
// the least S with 1 - (1-q)^S >= conf, ceil(ln(1-conf) / ln(1-q)).
func seedsToSee(q, conf float64) int {
	s := int(math.Ceil(math.Log(1-conf) / math.Log(1-q)))
	// Guard the ceiling against rounding at an exact integer.
	if s > 1 && 1-math.Pow(1-q, float64(s-1)) >= conf {
		s--
	}
	return s
}

// pUnseen is the probability that an event of probability q per seed
// happens in none of S independent seeds, (1-q)^S.
func pUnseen(q float64, S int) float64 {
	return math.Pow(1-q, float64(S))
}

// splitCrit is the split check's critical value at S seeds: the
// two-sided Bonferroni quantile of Student's t on S-2 degrees of freedom
// over the m = 2^(S-1) - 1 ways to split S seeds into two non-empty
// groups. For one fixed split of normal effects the two-group t is
// Student's on S-2 degrees of freedom, so the largest over all splits
// exceeds this with probability at most splitAlpha.
func splitCrit(S int) float64 {
	m := math.Ldexp(1, S-1) - 1
	return tQuantile(1-splitAlpha/(2*m), float64(S-2))
}

// splitEffects finds the split of effects (3 or more) into a lower and an
// upper group, contiguous in sorted order, with the largest two-group t
//
//	t = (mean(U) - mean(L)) / (s_w sqrt(1/n_L + 1/n_U)),  s_w^2 = (SS_L + SS_U) / (S-2)
//
// with s_w floored at floor. Among all ways to put S numbers into two
// groups, the one with the largest t has the least within-group sum of
// squares (t^2 / (S-2) is between over within), and that one is contiguous
// in sorted order, so the sorted splits are all there is to search. A
// split between equal values is none. It returns the t (0 when every
// effect is the same) and the lower group's indices into effects.
func splitEffects(effects []float64, floor float64) (t float64, lower []int) {
	S := len(effects)
	idx := make([]int, S)
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case effects[a] < effects[b]:
			return -1
		case effects[a] > effects[b]:
			return 1
		}
		return 0
	})
	ss := func(ix []int) (mean, ss float64) {
		for _, i := range ix {
			mean += effects[i]
		}
		mean /= float64(len(ix))
		for _, i := range ix {
			ss += (effects[i] - mean) * (effects[i] - mean)
		}
		return mean, ss
	}
	best := -1
	for g := 1; g < S; g++ {
		if effects[idx[g]] == effects[idx[g-1]] {
			continue
		}
		mL, ssL := ss(idx[:g])
		mU, ssU := ss(idx[g:])
		sw := max(math.Sqrt((ssL+ssU)/float64(S-2)), floor)
		tg := math.MaxFloat64 // no spread and no floor: any gap splits
		if sw > 0 {
			tg = (mU - mL) / (sw * math.Sqrt(1/float64(g)+1/float64(S-g)))
		}
		if tg > t {
			t, best = tg, g
		}
	}
	if best < 0 {
		return 0, nil
	}
	return t, slices.Clone(idx[:best])
}

// splitGrid is the step of the grid the arms' per-seed values may lie on:
// the least nonzero gap between any two of them (both arms, every seed).
// A value rounded to a grid of step g carries a rounding error of
// variance g^2/12 (Sheppard), which the split check's floor respects: a
// pass rate of 1 or 2 samples in 256 (effects 1/256 and 2/256) is not two
// groups. For a continuous metric the least gap is far below the seeds'
// spread and the floor does nothing.
func splitGrid(seeds []PairedSeed) float64 {
	var vals []float64
	for _, ps := range seeds {
		vals = append(vals, seedMetric(ps.A), seedMetric(ps.B))
	}
	slices.Sort(vals)
	g := 0.0
	for i := 1; i < len(vals); i++ {
		d := vals[i] - vals[i-1]
		if d > 1e-12*max(1, math.Abs(vals[i])) && (g == 0 || d < g) {
			g = d
		}
	}
	return g
}

// checkSeeds is claim v's seed check from the paired data it was judged on
// (judgeClaim's seeds and design); nil with fewer than 3 seeds.
//
// Leave one seed out: the effect without each seed, and (4 or more seeds)
// the claim rule's verdict on each subset (PairedInterval with the claim's
// design and level, then Verdict with its margin); a seed whose leaving
// out changes the claim's own verdict (Verdict on its full interval) is
// in RestsOn.
//
// Split: splitEffects on the per-seed effects, flagged above splitCrit.
func checkSeeds(c Claim, v ClaimVerdict, seeds []PairedSeed, design Design) *SeedCheck {
	S := len(seeds)
	if S < minSeeds || len(v.PerSeed) != S {
		return nil
	}
	sc := &SeedCheck{LOSOLow: math.Inf(1), LOSOHigh: math.Inf(-1)}
	sum, level := 0.0, 0.0
	for i, ps := range seeds {
		sum += v.PerSeed[i]
		level += (math.Abs(seedMetric(ps.A)) + math.Abs(seedMetric(ps.B))) / 2
	}
	level /= float64(S)
	for _, d := range v.PerSeed {
		e := (sum - d) / float64(S-1)
		sc.LOSOLow, sc.LOSOHigh = min(sc.LOSOLow, e), max(sc.LOSOHigh, e)
	}
	if S > minSeeds {
		compare := v.CILow != nil && v.CIHigh != nil
		full := ""
		if compare {
			full = Verdict(*v.CILow, *v.CIHigh, c.Margin)
		}
		sc.LOSOVerdicts = make([]string, S)
		for i := range seeds {
			sub := slices.Concat(seeds[:i], seeds[i+1:])
			iv, err := PairedInterval(sub, claimLevel, design)
			if err != nil {
				sc.LOSOVerdicts[i] = "-"
				continue
			}
			sc.LOSOVerdicts[i] = Verdict(iv.Low, iv.High, c.Margin)
			if compare && sc.LOSOVerdicts[i] != full {
				sc.RestsOn = append(sc.RestsOn, seeds[i].Seed)
			}
		}
	}
	sc.SplitCrit = splitCrit(S)
	t, lower := splitEffects(v.PerSeed, max(splitFloor*level, splitGrid(seeds)/math.Sqrt(12)))
	sc.SplitT = t
	if t > sc.SplitCrit {
		group := lower
		if len(lower) > S-len(lower) {
			group = nil
			for i := range S {
				if !slices.Contains(lower, i) {
					group = append(group, i)
				}
			}
		}
		for _, i := range group {
			sc.FlagSeeds = append(sc.FlagSeeds, seeds[i].Seed)
		}
		slices.Sort(sc.FlagSeeds)
		sc.Flag = "bimodal"
		if len(group) == 1 {
			sc.Flag = "outlier"
		}
	}
	return sc
}

// seedCheckCell is the claims table's short "seed check" cell.
func seedCheckCell(sc *SeedCheck) string {
	if sc == nil {
		return "-"
	}
	var parts []string
	if len(sc.RestsOn) > 0 {
		parts = append(parts, "rests on "+seedList(sc.RestsOn))
	}
	if sc.Flag != "" {
		parts = append(parts, sc.Flag+": "+seedList(sc.FlagSeeds))
	}
	if len(parts) > 0 {
		return "**" + strings.Join(parts, "; ") + "**"
	}
	if sc.LOSOVerdicts == nil {
		return "3 seeds: no LOSO verdict"
	}
	return "ok"
}

// seedCheckDetail is the claim's detail sentence on its seed check.
func seedCheckDetail(sc *SeedCheck, seeds []uint64) string {
	if sc == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, " Seed check: leaving one seed out, the effect is %s to %s", fmtNum(sc.LOSOLow), fmtNum(sc.LOSOHigh))
	switch {
	case sc.LOSOVerdicts == nil:
		b.WriteString(" (2 seeds each: no verdict)")
	case len(sc.RestsOn) > 0:
		var without []string
		for i, s := range seeds {
			if slices.Contains(sc.RestsOn, s) {
				without = append(without, fmt.Sprintf("without seed %d: %s", s, sc.LOSOVerdicts[i]))
			}
		}
		fmt.Fprintf(&b, " and the verdict rests on %s (%s)", seedList(sc.RestsOn), strings.Join(without, ", "))
	default:
		verdicts := slices.Compact(slices.Sorted(slices.Values(sc.LOSOVerdicts)))
		fmt.Fprintf(&b, " (verdicts without one seed: %s)", strings.Join(verdicts, ", "))
	}
	fmt.Fprintf(&b, "; largest two-group split t %s (flag above %s)", fmtSplitT(sc.SplitT), fmtNum(sc.SplitCrit))
	if sc.Flag != "" {
		fmt.Fprintf(&b, ": **%s**, %s", sc.Flag, seedList(sc.FlagSeeds))
	}
	b.WriteString(".")
	return b.String()
}

// seedList is "seed 3" or "seeds 1, 4".
func seedList(seeds []uint64) string {
	if len(seeds) == 1 {
		return "seed " + joinSeeds(seeds)
	}
	return "seeds " + joinSeeds(seeds)
}

// fmtSplitT writes a split t; the largest float marks groups with no
// spread at all (and a zero floor).
func fmtSplitT(t float64) string {
	if t == math.MaxFloat64 {
		return "unbounded (no spread within the groups)"
	}
	return fmtNum(t)
}

// seedCheckText is the Claims section's statement of the seed check.
var seedCheckText = "**Seed check** (last column): a verdict over a few seeds cannot see a failure no seed showed " +
	"(a collapse of probability q per seed is missed by all S seeds with probability (1-q)^S: 51% at q = 0.2 and 3 seeds, 33% at 5), " +
	"and it can rest on one seed. With 4 or more seeds each claim is judged again without each seed in turn (the same rule; Holm's correction is not redone); " +
	"**rests on seed N** says that leaving seed N out changes the claim's own verdict. With 3, only the effects without each seed are given. " +
	"The per-seed effects are also split, in sorted order, into the two groups with the largest two-group t (pooled within-group SD on S-2 df, " +
	"at least " + strconv.FormatFloat(100*splitFloor, 'g', -1, 64) + "% of the arms' level and g/sqrt(12), g the least gap between the arms' per-seed values); above t(1 - 0.05/(2m), S-2), m = 2^(S-1) - 1 the ways to split S seeds, " +
	"the claim is flagged **outlier** (a group of one seed) or **bimodal**: on normal per-seed effects this happens at most 5% of the time. " +
	"An unflagged claim can still hide a collapse its seeds did not show (docs/bench.md, \"Seed robustness and collapses\").\n\n"
