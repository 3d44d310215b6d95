package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// Seeds to see a collapse of probability q with 90% chance, worked by
// hand: ln(0.1) = -2.302585 over ln(1-q), rounded up.
func TestSeedsToSee(t *testing.T) {
	for _, c := range []struct {
		q    float64
		want int // ceil(2.302585 / -ln(1-q))
	}{
		{0.05, 45}, // 2.302585 / 0.051293 = 44.89
		{0.1, 22},  // / 0.105361 = 21.85
		{0.2, 11},  // / 0.223144 = 10.32
		{0.3, 7},   // / 0.356675 = 6.456
		{0.5, 4},   // / 0.693147 = 3.322
		{0.9, 1},   // / 2.302585 = 1 exactly: one seed shows it 90% of the time
	} {
		if got := seedsToSee(c.q, collapseConf); got != c.want {
			t.Errorf("seedsToSee(%v, 0.9) = %d, want %d", c.q, got, c.want)
		}
	}
	for _, c := range []struct {
		q    float64
		S    int
		want float64
	}{
		{0.2, 3, 0.512}, {0.2, 5, 0.32768}, {0.2, 10, 0.1073741824},
		{0.5, 3, 0.125}, {0.5, 5, 0.03125}, {0.1, 3, 0.729},
	} {
		if got := pUnseen(c.q, c.S); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("pUnseen(%v, %d) = %v, want %v", c.q, c.S, got, c.want)
		}
	}
}

// collapseRows are docs/bench.md's collapse table rows as the formulas
// give them (the hand values are in TestSeedsToSee).
func collapseRows() []string {
	var rows []string
	for _, q := range []float64{0.05, 0.1, 0.2, 0.3, 0.5} {
		row := fmt.Sprintf("| %g | %d |", q, seedsToSee(q, collapseConf))
		for _, S := range []int{3, 5, 10} {
			row += fmt.Sprintf(" %.1f%% |", 100*pUnseen(q, S))
		}
		rows = append(rows, row)
	}
	return rows
}

// docs/bench.md's collapse table is what the formulas give, so the prose
// cannot drift from them.
func TestCollapseTableInDocs(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "bench.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range collapseRows() {
		if !strings.Contains(string(doc), "\n"+row+"\n") {
			t.Errorf("docs/bench.md lacks the collapse table row %q", row)
		}
	}
}

// The split check's critical values against closed forms of Student's t
// quantile (1 df: tan(pi (q - 1/2)); 2 df: (2q - 1) / sqrt(2 q (1-q))),
// and at more degrees of freedom against the t distribution function
// (gonum's CDF, not the quantile inversion splitCrit uses).
func TestSplitCrit(t *testing.T) {
	q3 := 1 - 0.05/(2*3) // S = 3: 3 splits, 1 df
	if got, want := splitCrit(3), math.Tan(math.Pi*(q3-0.5)); math.Abs(got-want) > 1e-6*want {
		t.Errorf("splitCrit(3) = %v, want %v", got, want)
	}
	q4 := 1 - 0.05/(2*7) // S = 4: 7 splits, 2 df
	if got, want := splitCrit(4), (2*q4-1)/math.Sqrt(2*q4*(1-q4)); math.Abs(got-want) > 1e-6*want {
		t.Errorf("splitCrit(4) = %v, want %v", got, want)
	}
	for _, S := range []int{5, 6, 10} {
		m := math.Pow(2, float64(S-1)) - 1
		c := splitCrit(S)
		dist := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(S - 2)}
		if got := dist.Survival(c); math.Abs(got-0.05/(2*m)) > 1e-6*0.05/(2*m) {
			t.Errorf("S = %d: P(t > splitCrit) = %v, want 0.05/(2 x %v)", S, got, m)
		}
	}
	t.Logf("split check critical values: S=3 %.2f, 4 %.2f, 5 %.2f, 6 %.2f, 10 %.2f", splitCrit(3), splitCrit(4), splitCrit(5), splitCrit(6), splitCrit(10))
}

// Hand-made per-seed effect sets: one outlier, two clusters, sets that
// look normal, ties, and a floor. Each t is worked out by hand in its
// comment.
func TestSplitEffects(t *testing.T) {
	for _, c := range []struct {
		name    string
		effects []float64
		floor   float64
		t       float64 // the largest split t
		lower   []int   // its lower group
		flag    bool    // t > splitCrit(S)
	}{
		// Lower {-0.16}, upper {0.035, 0.04, 0.045, 0.05}: mean 0.0425, SS
		// 1.25e-4, s_w = sqrt(1.25e-4/3) = 0.0064550; t = 0.2025 /
		// (0.0064550 sqrt(1 + 1/4)) = 28.06 > 8.9 (S = 5).
		{"one collapsed seed of 5", []float64{0.04, 0.05, 0.045, 0.035, -0.16}, 0, 28.06, []int{4}, true},
		// Lower {-0.16, -0.15}: mean -0.155, SS 5e-5; upper as above; s_w
		// = sqrt(1.75e-4/4) = 0.0066144; t = 0.1975 / (0.0066144
		// sqrt(1/2 + 1/4)) = 34.48.
		{"two collapsed seeds of 6", []float64{0.04, 0.05, 0.045, -0.16, -0.15, 0.035}, 0, 34.48, []int{3, 4}, true},
		// Evenly spaced: the 2|3 split has means 0.0125 and 0.025, SS
		// 1.25e-5 + 5e-5, s_w = sqrt(6.25e-5/3) = 0.0045644, t = 0.0125 /
		// (0.0045644 sqrt(1/2 + 1/3)) = 3.000 (3|2 the same; 1|4 gives 1.732).
		{"evenly spaced", []float64{0.01, 0.03, 0.02, 0.025, 0.015}, 0, 3.000, []int{0, 4}, false},
		// paper-countdown's "GRPO narrows pass@64" effects: no split
		// stands out. Best split {-0.03111, -0.01333, -0.007778} |
		// {0.004444, 0.01111}: means -0.017406 and 0.007777, SS 2.9711e-4
		// + 2.222e-5, s_w = sqrt(3.1933e-4/3) = 0.010317; t = 0.025183 /
		// (0.010317 sqrt(1/3 + 1/2)) = 2.674 (the split {-0.03111} | rest
		// gives 2.331).
		{"a real set", []float64{-0.01333, -0.03111, -0.007778, 0.004444, 0.01111}, 0, 2.674, []int{0, 1, 2}, false},
		{"all equal", []float64{0.02, 0.02, 0.02, 0.02}, 0, 0, nil, false},
		// Discrete ties: {1/300, 1/300} | {2/300 x 3} has no spread within
		// the groups; with the floor 0.0008 (0.5% of a level of 0.16) t =
		// (1/300) / (0.0008 sqrt(1/2 + 1/3)) = 4.564 < 8.9.
		{"ties under the floor", []float64{1.0 / 300, 2.0 / 300, 1.0 / 300, 2.0 / 300, 2.0 / 300}, 0.0008, 4.564, []int{0, 2}, false},
		{"ties without a floor", []float64{1.0 / 300, 2.0 / 300, 1.0 / 300, 2.0 / 300, 2.0 / 300}, 0, math.MaxFloat64, []int{0, 2}, true},
		// Three seeds, one collapsed: the other two differ by 0.01, s_w =
		// 0.0070711, t = 0.205 / (0.0070711 sqrt(1 + 1/2)) = 23.67: below
		// the 38.19 three seeds need.
		{"one collapsed seed of 3", []float64{0.04, 0.05, -0.16}, 0, 23.67, []int{2}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, lower := splitEffects(c.effects, c.floor)
			if c.t == math.MaxFloat64 {
				if got != c.t {
					t.Errorf("t = %v, want unbounded", got)
				}
			} else if math.Abs(got-c.t) > 1e-3*max(1, c.t) {
				t.Errorf("t = %.4f, want %.4f", got, c.t)
			}
			slices.Sort(lower)
			if !slices.Equal(lower, c.lower) {
				t.Errorf("lower group %v, want %v", lower, c.lower)
			}
			if flag := got > splitCrit(len(c.effects)); flag != c.flag {
				t.Errorf("flagged %v (t %.3f, critical %.3f), want %v", flag, got, splitCrit(len(c.effects)), c.flag)
			}
		})
	}
}

// seedLevel is a seed-level claim's paired data: arm B at 0.5, arm A at
// 0.5 plus the seed's effect.
func seedLevel(effects []float64) []PairedSeed {
	seeds := make([]PairedSeed, len(effects))
	for i, d := range effects {
		seeds[i] = PairedSeed{Seed: uint64(i + 1), A: [][]float64{{0.5 + d}}, B: [][]float64{{0.5}}}
	}
	return seeds
}

// judgedSeeds is what judgeClaim gives for seed-level data on enough seeds.
func judgedSeeds(t *testing.T, seeds []PairedSeed, margin float64) ClaimVerdict {
	t.Helper()
	iv, err := PairedInterval(seeds, claimLevel, Nested)
	if err != nil {
		t.Fatal(err)
	}
	v := ClaimVerdict{PerSeed: iv.PerSeed, DeltaMean: &iv.Delta, CILow: &iv.Low, CIHigh: &iv.High, SE: &iv.SE}
	for _, s := range seeds {
		v.Seeds = append(v.Seeds, s.Seed)
	}
	v.Verdict = Verdict(iv.Low, iv.High, margin)
	return v
}

// Leave one seed out, worked by hand (effects in units of 0.01).
func TestCheckSeedsLOSO(t *testing.T) {
	u := 0.01
	// Effects 2, 3, 4, 3, -6: mean 1.2, SS 66.8, SE sqrt(16.7/5) = 1.8276,
	// t(0.975, 4) = 2.7764: [-3.87, 6.27], inconclusive. Without seed 5:
	// 2, 3, 4, 3, mean 3, SE sqrt((2/3)/4) = 0.40825, t(0.975, 3) =
	// 3.1824: [1.70, 4.30], held. Without seed 1: 3, 4, 3, -6, mean 1, SS
	// 66, SE sqrt(22/4) = 2.345: [-6.46, 8.46], inconclusive (seeds 2-4
	// alike). The effects without each seed: (6-2)/4 = 1, 0.75, 0.5, 0.75,
	// (6+6)/4 = 3. The split {-6} | {2, 3, 3, 4}: s_w = sqrt(2/3), t = 9 /
	// (0.8165 x 1.118) = 9.859 > 8.89: seed 5 is an outlier.
	seeds := seedLevel([]float64{2 * u, 3 * u, 4 * u, 3 * u, -6 * u})
	v := judgedSeeds(t, seeds, 0)
	if v.Verdict != "inconclusive" {
		t.Fatalf("full verdict %s, want inconclusive", v.Verdict)
	}
	sc := checkSeeds(Claim{}, v, seeds, Nested)
	if math.Abs(sc.LOSOLow-0.5*u) > 1e-12 || math.Abs(sc.LOSOHigh-3*u) > 1e-12 {
		t.Errorf("LOSO effects %v to %v, want 0.005 to 0.03", sc.LOSOLow, sc.LOSOHigh)
	}
	if want := []string{"inconclusive", "inconclusive", "inconclusive", "inconclusive", "held"}; !slices.Equal(sc.LOSOVerdicts, want) {
		t.Errorf("LOSO verdicts %v, want %v", sc.LOSOVerdicts, want)
	}
	if !slices.Equal(sc.RestsOn, []uint64{5}) {
		t.Errorf("rests on %v, want [5]", sc.RestsOn)
	}
	if sc.Flag != "outlier" || !slices.Equal(sc.FlagSeeds, []uint64{5}) || math.Abs(sc.SplitT-9.859) > 1e-3 {
		t.Errorf("flag %q seeds %v t %v, want outlier [5] 9.859", sc.Flag, sc.FlagSeeds, sc.SplitT)
	}
	if cell := seedCheckCell(sc); cell != "**rests on seed 5; outlier: seed 5**" {
		t.Errorf("cell %q", cell)
	}
	if d := seedCheckDetail(sc, v.Seeds); !strings.Contains(d, "the verdict rests on seed 5 (without seed 5: held)") {
		t.Errorf("detail %q", d)
	}

	// Effects 3, 4, 5, 4, 4 (in 0.01): held on all five and on every
	// subset of four (the least subset lower end is 3, 4, 4, 4 or similar,
	// far above 0); no split: the 1|4 split {3} | {4, 4, 4, 5} has s_w
	// sqrt(0.75/3) = 0.5, t = 1.25 / (0.5 x 1.118) = 2.236; 4|1 the same.
	seeds = seedLevel([]float64{3 * u, 4 * u, 5 * u, 4 * u, 4 * u})
	v = judgedSeeds(t, seeds, 0)
	sc = checkSeeds(Claim{}, v, seeds, Nested)
	if v.Verdict != "held" || len(sc.RestsOn) != 0 || sc.Flag != "" || math.Abs(sc.SplitT-2.236) > 1e-3 {
		t.Errorf("stable set: verdict %s, rests on %v, flag %q, t %v", v.Verdict, sc.RestsOn, sc.Flag, sc.SplitT)
	}
	if cell := seedCheckCell(sc); cell != "ok" {
		t.Errorf("cell %q, want ok", cell)
	}

	// Three seeds: subsets of two get no verdict; the effects only.
	seeds = seedLevel([]float64{1 * u, 2 * u, 6 * u})
	v = judgedSeeds(t, seeds, 0)
	sc = checkSeeds(Claim{}, v, seeds, Nested)
	if sc.LOSOVerdicts != nil || sc.RestsOn != nil || math.Abs(sc.LOSOLow-1.5*u) > 1e-12 || math.Abs(sc.LOSOHigh-4*u) > 1e-12 {
		t.Errorf("3 seeds: %+v, want LOSO effects 0.015 to 0.04 and no verdicts", sc)
	}
	if cell := seedCheckCell(sc); cell != "3 seeds: no LOSO verdict" {
		t.Errorf("cell %q", cell)
	}
	// A pass rate on a grid of 1/256 (leaderboard's "Forking tokens ... out
	// of distribution": 1, 2 and 1 samples in 256 against 0): the least gap
	// between values is 1/256, the floor (1/256)/sqrt(12) = 0.0011277, and
	// the split {1/256, 1/256} | {2/256} has t = (1/256) / (0.0011277
	// sqrt(1/2 + 1)) = 2.828: no flag. Without the grid floor the level's
	// (0.5% of 0.0026) would give 244.9.
	seeds = []PairedSeed{
		{Seed: 1, A: [][]float64{{1.0 / 256}}, B: [][]float64{{0}}},
		{Seed: 2, A: [][]float64{{2.0 / 256}}, B: [][]float64{{0}}},
		{Seed: 3, A: [][]float64{{1.0 / 256}}, B: [][]float64{{0}}},
	}
	v = judgedSeeds(t, seeds, 0)
	if sc = checkSeeds(Claim{}, v, seeds, Nested); sc.Flag != "" || math.Abs(sc.SplitT-2.828) > 1e-3 {
		t.Errorf("grid of 1/256: flag %q, t %v, want none and 2.828", sc.Flag, sc.SplitT)
	}
	if checkSeeds(Claim{}, judgedSeeds(t, seeds[:2], 0), seeds[:2], Nested) != nil {
		t.Error("2 seeds: want no check")
	}
}

// The split check's false-flag rate on normal per-seed effects (no floor:
// a continuous metric): at most 5% by construction (Bonferroni over every
// split); the measured rates go into docs/bench.md.
func TestSplitFalseFlagRate(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 2))
	const runs = 20000
	for _, S := range []int{3, 5, 10} {
		x := make([]float64, S)
		crit, flags := splitCrit(S), 0
		for range runs {
			for i := range x {
				x[i] = rng.NormFloat64()
			}
			if tt, _ := splitEffects(x, 0); tt > crit {
				flags++
			}
		}
		rate := float64(flags) / runs
		t.Logf("S = %2d: false flags %.2f%% of %d normal sets", S, 100*rate, runs)
		if lim := 0.05 + 3*math.Sqrt(0.05*0.95/runs); rate > lim {
			t.Errorf("S = %d: false-flag rate %.4f above %.4f", S, rate, lim)
		}
	}
}

// The audit's scenario: an arm better by 0.04 in pass@1 (seed sd 0.01)
// that collapses to 0 in 20% of seeds, where its baseline scores 0.16, so
// the mean effect is 0.8 x 0.04 - 0.2 x 0.16 = 0. It counts how often the
// rule says held, how often a held verdict carries a warning (a flag or
// "rests on"), and how often a collapse that a seed shows is flagged.
func TestCollapseScenario(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 20))
	const runs = 4000
	for _, c := range []struct {
		S int
		// Bounds on the measured rates, from the arithmetic: held needs
		// no collapse among the seeds (0.8^S: 51%, 33%, 11%) and then
		// happens almost always (0.04 is 4 seed sds; at 3 seeds the t
		// interval needs 2.48); a held verdict with a collapse among the
		// seeds is impossible at 3 and 5 seeds (one collapse makes the
		// effect 0 or below at 5).
		heldLo, heldHi float64
	}{{3, 0.40, 0.55}, {5, 0.28, 0.37}, {10, 0.07, 0.16}} {
		held, heldWarned, seen, seenFlagged, heldSeen := 0, 0, 0, 0, 0
		for range runs {
			eff := make([]float64, c.S)
			collapsed := 0
			for i := range eff {
				base := 0.16 + 0.01*rng.NormFloat64()
				if rng.Float64() < 0.2 {
					eff[i] = -base
					collapsed++
				} else {
					eff[i] = 0.04 + 0.01*rng.NormFloat64()
				}
			}
			seeds := make([]PairedSeed, c.S)
			for i, d := range eff {
				b := 0.16
				seeds[i] = PairedSeed{Seed: uint64(i + 1), A: [][]float64{{b + d}}, B: [][]float64{{b}}}
			}
			v := judgedSeeds(t, seeds, 0)
			sc := checkSeeds(Claim{}, v, seeds, Nested)
			warned := sc.Flag != "" || len(sc.RestsOn) > 0
			if v.Verdict == "held" {
				held++
				if warned {
					heldWarned++
				}
				if collapsed > 0 {
					heldSeen++
				}
			}
			if collapsed > 0 {
				seen++
				if sc.Flag != "" {
					seenFlagged++
				}
			}
		}
		pHeld := float64(held) / runs
		t.Logf("S = %2d: held %.1f%% (0.8^S = %.1f%%), held with a warning %d of %d, held with a collapse among the seeds %d; a collapse among the seeds in %.1f%%, flagged in %.1f%% of those",
			c.S, 100*pHeld, 100*pUnseen(0.2, c.S), heldWarned, held, heldSeen, 100*float64(seen)/runs, 100*float64(seenFlagged)/max(1, float64(seen)))
		if pHeld < c.heldLo || pHeld > c.heldHi {
			t.Errorf("S = %d: held in %.3f, want %.2f to %.2f", c.S, pHeld, c.heldLo, c.heldHi)
		}
		if pf := float64(seenFlagged) / float64(seen); c.S >= 5 && pf < 0.95 {
			t.Errorf("S = %d: a collapse among the seeds flagged in %.3f, want 0.95 or more", c.S, pf)
		}
		if c.S <= 5 && heldSeen > 0 {
			t.Errorf("S = %d: %d held verdicts with a collapse among the seeds", c.S, heldSeen)
		}
	}
}

// The report carries the check: a column in the claims table, a sentence
// in the claim's details and "seed_check" in verdicts.json. Effects 0.04,
// 0.03, 0.045, 0.035 and a collapsed seed 5 at -0.2: mean -0.01, SE
// sqrt(0.0113125/5) = 0.047566, inconclusive; without seed 5 the mean is
// 0.0375, SE 0.0032275, h = 3.1824 x SE = 0.010271: held; without seed 3
// (0.045) it is -0.095/4 = -0.02375, the least. The split {-0.2}
// | rest has s_w = sqrt(1.25e-4/3) = 0.0064550 and t = 0.2375 / (0.0064550
// x 1.118034) = 32.91.
func TestSeedCheckInReport(t *testing.T) {
	dir := t.TempDir()
	runs := fakeRuns("m", map[uint64]float64{1: 0.54, 2: 0.53, 3: 0.545, 4: 0.535, 5: 0.3}, map[uint64]float64{1: 0.5, 2: 0.5, 3: 0.5, 4: 0.5, 5: 0.5})
	spec := &Spec{Claims: []Claim{{Name: "a beats b", Better: "a", Than: "b", Metric: "m"}}}
	var b strings.Builder
	if err := writeClaimsSection(&b, spec, dir, runs); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| **inconclusive** | **rests on seed 5; outlier: seed 5** |\n",
		"Seed check: leaving one seed out, the effect is -0.02375 to 0.0375 and the verdict rests on seed 5 (without seed 5: held); " +
			"largest two-group split t 32.91 (flag above 8.575): **outlier**, seed 5.",
		"**Seed check** (last column)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("section lacks %q:\n%s", want, b.String())
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, VerdictsFile))
	if err != nil {
		t.Fatal(err)
	}
	var got []ClaimVerdict
	if err := json.Unmarshal(data, &got); err != nil || len(got) != 1 || got[0].SeedCheck == nil {
		t.Fatalf("%s: %v", data, err)
	}
	sc := got[0].SeedCheck
	if !slices.Equal(sc.RestsOn, []uint64{5}) || sc.Flag != "outlier" || !slices.Equal(sc.FlagSeeds, []uint64{5}) ||
		math.Abs(sc.LOSOHigh-0.0375) > 1e-12 || math.Abs(sc.LOSOLow+0.02375) > 1e-12 || len(sc.LOSOVerdicts) != 5 {
		t.Errorf("seed_check %+v", *sc)
	}
}
