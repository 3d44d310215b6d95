package bench

import (
	"encoding/json"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cde-rl/cde/trainer"
)

// fakeRuns are finished runs of arms "a" and "b" whose metric m takes the
// given final values per seed, logged at step 10 after a step-5 value of 0.
func fakeRuns(m string, a, b map[uint64]float64) map[string][]*armRun {
	out := map[string][]*armRun{}
	for arm, vals := range map[string]map[uint64]float64{"a": a, "b": b} {
		for _, seed := range slices.Sorted(maps.Keys(vals)) {
			out[arm] = append(out[arm], &armRun{Arm: arm, Seed: seed, Rows: []map[string]float64{
				{"step": 5, m: 0}, {"step": 10, m: vals[seed]}}})
		}
	}
	return out
}

func near(x *float64, want float64) bool { return x != nil && math.Abs(*x-want) < 1e-12 }

// Seed-level claims, worked by hand: effects per seed 0.1, 0.15, 0.05,
// 0.12, 0.06: mean 0.096, squared deviations sum 0.00692, variance
// 0.00173, SE sqrt(0.00173/5) = 0.018601, half-width t(0.975, 4) SE =
// 2.776445 * 0.018601 = 0.051645: [0.044355, 0.147645], held.
// Lower-is-better flips the sign: not held. A seed only one arm finished
// (6) is left out. Three seeds 0.1, 0.15, 0.05: mean 0.1, variance 0.0025,
// SE 0.028868, half-width 4.302653 * SE = 0.124207: inconclusive.
func TestJudgeClaimSeedLevel(t *testing.T) {
	runs := fakeRuns("rollout/entropy", map[uint64]float64{1: 0.6, 2: 0.7, 3: 0.65, 4: 0.62, 5: 0.66, 6: 0.9},
		map[uint64]float64{1: 0.5, 2: 0.55, 3: 0.6, 4: 0.5, 5: 0.6})
	dir := t.TempDir()
	v := judgeClaimPaired(Claim{Name: "x", Better: "a", Than: "b", Metric: "rollout/entropy"}, dir, runs)
	if v.Verdict != "held" || !near(v.DeltaMean, 0.096) || math.Abs(*v.CILow-0.044355) > 1e-6 || math.Abs(*v.CIHigh-0.147645) > 1e-6 || v.Units != "none" ||
		v.Method != "t" || !slices.Equal(v.Seeds, []uint64{1, 2, 3, 4, 5}) || len(v.PerSeed) != 5 || math.Abs(v.PerSeed[1]-0.15) > 1e-12 {
		t.Errorf("seed level: %+v (%v, %v)", v, deref(v.CILow), deref(v.CIHigh))
	}
	v = judgeClaimPaired(Claim{Name: "x", Better: "a", Than: "b", Metric: "rollout/entropy", LowerIsBetter: true}, dir, runs)
	if v.Verdict != "not held" || !near(v.DeltaMean, -0.096) {
		t.Errorf("lower is better: %+v", v)
	}
	three := fakeRuns("m", map[uint64]float64{1: 0.6, 2: 0.7, 3: 0.65}, map[uint64]float64{1: 0.5, 2: 0.55, 3: 0.6})
	if v := judgeClaimPaired(Claim{Name: "x", Better: "a", Than: "b", Metric: "m"}, dir, three); v.Verdict != "inconclusive" ||
		math.Abs(*v.CILow-(0.1-0.124207)) > 1e-6 || math.Abs(*v.CIHigh-(0.1+0.124207)) > 1e-6 {
		t.Errorf("three seeds: %+v (%v, %v)", v, deref(v.CILow), deref(v.CIHigh))
	}
	two := fakeRuns("m", map[uint64]float64{1: 0.6, 2: 0.7}, map[uint64]float64{1: 0.5, 2: 0.55})
	if v := judgeClaimPaired(Claim{Name: "x", Better: "a", Than: "b", Metric: "m"}, dir, two); v.Verdict != "inconclusive" ||
		!strings.Contains(v.Note, "2 paired seeds: a verdict needs at least 3") {
		t.Errorf("two seeds: %+v", v)
	}
	if v := judgeClaimPaired(Claim{Name: "x", Better: "a", Than: "b", Metric: "absent"}, dir, runs); v.Verdict != "inconclusive" || v.DeltaMean != nil {
		t.Errorf("missing metric: %+v", v)
	}
	// window 2: the mean of the last two values (0 and the final), so the
	// effects halve.
	if v := judgeClaimPaired(Claim{Name: "x", Better: "a", Than: "b", Metric: "rollout/entropy", Window: 2}, dir, runs); !near(v.DeltaMean, 0.048) {
		t.Errorf("window 2: %+v", v)
	}
}

// With per-problem eval results the problems' shared part counts too. Two
// problems, n = 4 samples: arm a solves 4 and 0, arm b 2 and 0, in each of
// 3 seeds: avg@4 is 0.5 vs 0.25, an effect of 0.25 per seed, and the
// per-problem effects are 0.5 and 0.
//
// Crossed (every seed has problems p1, p2): the seeds agree (no seed
// part); for val/c3 the problem means are 0.5 and 0 (MS_P = 3 * 0.125 =
// 0.375), no interaction (MS_R = 0), so VarProblems = 0.375 / (2 * 3) =
// 0.0625 on Satterthwaite's 0.0625^2 / ((1/6)^2 0.375^2) = 1 df: 0.25 -/+
// t(0.975, 1) * 0.25 = 0.25 -/+ 3.176551, inconclusive. For val/mean (sets
// c3 and c4 alike, J = 2): VarProblems = 2 * 0.375 / (4 * 2 * 3) = 0.03125
// on 2 df: 0.25 -/+ 4.302653 * 0.176777 = 0.25 -/+ 0.760609.
//
// Nested (seed 3 evaluated on other problems, p3 and p4, with the same
// counts): the per-seed effects are all 0.25, so the interval is [0.25,
// 0.25]: held. With two seeds the same data is inconclusive (fewer than
// 3).
func TestJudgeClaimProblemLevel(t *testing.T) {
	dir := t.TempDir()
	seeds3 := func(m string, a, b float64) map[string][]*armRun {
		return fakeRuns(m, map[uint64]float64{1: a, 2: a, 3: a}, map[uint64]float64{1: b, 2: b, 3: b})
	}
	write := func(seed uint64, problems []string) {
		for _, arm := range []string{"a", "b"} {
			correct := map[string][]int{"a": {4, 0}, "b": {2, 0}}[arm]
			for _, set := range []string{"c3", "c4"} {
				if err := trainer.WriteEvalDetail(RunDir(dir, arm, seed), trainer.EvalDetail{Step: 10, Set: set, N: 4, Problems: problems, Correct: correct}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for _, seed := range []uint64{1, 2, 3} {
		write(seed, []string{"p1", "p2"})
	}
	type want struct {
		m         string
		low, high float64
		verdict   string
	}
	check := func(design string, cases []want) {
		for _, c := range cases {
			v := judgeClaimPaired(Claim{Name: "y", Better: "a", Than: "b", Metric: c.m}, dir, seeds3(c.m, 0.5, 0.25))
			if v.Units != "problems" || v.Design != design || !near(v.DeltaMean, 0.25) || math.Abs(*v.CILow-c.low) > 1e-6 || math.Abs(*v.CIHigh-c.high) > 1e-6 || v.Verdict != c.verdict {
				t.Errorf("%s %s: %+v (low %v high %v)", design, c.m, v, deref(v.CILow), deref(v.CIHigh))
			}
		}
	}
	check("crossed", []want{{"val/c3/avg@4", 0.25 - 3.176551, 0.25 + 3.176551, "inconclusive"}, {"val/mean/avg@4", 0.25 - 0.760609, 0.25 + 0.760609, "inconclusive"}})
	write(3, []string{"p3", "p4"})
	// Every seed's effect 0.25 with no spread: a point interval, which is
	// inconclusive (it read "held" by its sign before issue 61).
	check("nested", []want{{"val/c3/avg@4", 0.25, 0.25, "inconclusive"}, {"val/mean/avg@4", 0.25, 0.25, "inconclusive"}})
	// That point interval has no p value and stays out of its family's
	// correction: inconclusive alone and after Holm, family size 0.
	vs := []ClaimVerdict{judgeClaimPaired(Claim{Name: "y", Better: "a", Than: "b", Metric: "val/c3/avg@4"}, dir, seeds3("val/c3/avg@4", 0.5, 0.25))}
	adjustFamilies(vs)
	if v := vs[0]; v.P != nil || v.VerdictHolm != "inconclusive" || v.FamilySize != 0 || !strings.Contains(v.Note, "no spread") {
		t.Errorf("point interval: %+v", v)
	}
	two := fakeRuns("val/c3/avg@4", map[uint64]float64{1: 0.5, 2: 0.5}, map[uint64]float64{1: 0.25, 2: 0.25})
	if v := judgeClaimPaired(Claim{Name: "y", Better: "a", Than: "b", Metric: "val/c3/avg@4"}, dir, two); v.Verdict != "inconclusive" || v.Units != "problems" ||
		!strings.Contains(v.Note, "a verdict needs at least 3") {
		t.Errorf("two seeds: %+v", v)
	}
	// pass@2 from the same counts: problem 1 of b has pass@2 = 1 - C(2,2)/C(4,2) = 5/6.
	if v := judgeClaimPaired(Claim{Name: "z", Better: "a", Than: "b", Metric: "val/c3/pass@2"}, dir, seeds3("val/c3/pass@2", 0.5, 5.0/12)); !near(v.DeltaMean, 0.5-5.0/12) {
		t.Errorf("pass@2: %+v", v)
	}
	// Different problems in the two arms: no pairing by problem, seeds
	// only, and the note says why.
	if err := trainer.WriteEvalDetail(RunDir(dir, "b", 2), trainer.EvalDetail{Step: 10, Set: "c3", N: 4, Problems: []string{"p1", "other"}, Correct: []int{2, 0}}); err != nil {
		t.Fatal(err)
	}
	if v := judgeClaimPaired(Claim{Name: "y", Better: "a", Than: "b", Metric: "val/c3/avg@4"}, dir, seeds3("val/c3/avg@4", 0.5, 0.25)); v.Units != "none" ||
		!strings.Contains(v.Note, "judged on seeds only: the arms were evaluated on different problems (seed 2)") {
		t.Errorf("mismatched problems resampled by problem: %+v", v)
	}
}

func deref(x *float64) float64 {
	if x == nil {
		return math.NaN()
	}
	return *x
}

// writeClaimsSection writes verdicts.json with the fields.
func TestVerdictsFile(t *testing.T) {
	dir := t.TempDir()
	runs := fakeRuns("m", map[uint64]float64{1: 0.6, 2: 0.7, 3: 0.6, 4: 0.7, 5: 0.65}, map[uint64]float64{1: 0.5, 2: 0.5, 3: 0.5, 4: 0.5, 5: 0.5})
	spec := &Spec{Claims: []Claim{{Name: "a beats b", Better: "a", Than: "b", Metric: "m"}}}
	var b strings.Builder
	if err := writeClaimsSection(&b, spec, dir, runs); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, VerdictsFile))
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(data, &got); err != nil || len(got) != 1 {
		t.Fatalf("%s: %v", data, err)
	}
	for _, k := range []string{"claim", "metric", "arms", "seeds", "delta_mean", "ci_low", "ci_high", "verdict", "verdict_holm", "p", "p_holm",
		"family", "family_size", "se", "var_seeds", "var_problems", "df_seeds", "df_problems", "units", "method"} {
		if _, ok := got[0][k]; !ok {
			t.Errorf("verdicts.json lacks %q: %s", k, data)
		}
	}
	if got[0]["verdict"] != "held" || math.Abs(got[0]["delta_mean"].(float64)-0.15) > 1e-12 || !strings.Contains(b.String(), "| a beats b | m | a | b | 5 | seeds |") || got[0]["verdict_holm"] != "held" {
		t.Errorf("verdict %v, section:\n%s", got[0], b.String())
	}
}

// Identical arms (every seed's effect 0): the section shows the point
// interval with no p value, and verdicts.json has p null.
func TestClaimsSectionPointInterval(t *testing.T) {
	dir := t.TempDir()
	same := map[uint64]float64{1: 0.5, 2: 0.6, 3: 0.7}
	spec := &Spec{Claims: []Claim{{Name: "a beats b", Better: "a", Than: "b", Metric: "m"}}}
	var b strings.Builder
	if err := writeClaimsSection(&b, spec, dir, fakeRuns("m", same, same)); err != nil {
		t.Fatal(err)
	}
	// Identical runs: the point interval [0, 0] measures no error, so the
	// claim is inconclusive (it read "not held" before issue 61).
	if !strings.Contains(b.String(), "| a beats b | m | a | b | 3 | seeds | 0 | [0, 0] | - | inconclusive | m | - | **inconclusive** |") {
		t.Errorf("section:\n%s", b.String())
	}
	data, _ := os.ReadFile(filepath.Join(dir, VerdictsFile))
	if !strings.Contains(string(data), `"p": null`) {
		t.Errorf("verdicts.json: %s", data)
	}
}

// A claim added or changed after the bench started is exploratory: its
// numbers are shown, its verdict is withheld; a registered claim is judged,
// under its registered name or another;
// a directory without a registration judges every claim (older benches).
func TestClaimsRegisteredAtStart(t *testing.T) {
	dir := t.TempDir()
	runs := fakeRuns("m", map[uint64]float64{1: 0.6, 2: 0.7, 3: 0.6, 4: 0.7, 5: 0.65}, map[uint64]float64{1: 0.5, 2: 0.5, 3: 0.5, 4: 0.5, 5: 0.5})
	first := Claim{Name: "a beats b", Better: "a", Than: "b", Metric: "m"}
	if err := registerClaims(&Spec{Claims: []Claim{first}}, dir); err != nil {
		t.Fatal(err)
	}
	// A rerun with more claims keeps the first registration.
	later := Claim{Name: "a beats b late", Better: "a", Than: "b", Metric: "m", Window: 2}
	changed := first
	changed.Window = 3
	if err := registerClaims(&Spec{Claims: []Claim{first, later}}, dir); err != nil {
		t.Fatal(err)
	}
	verdicts := func(claims ...Claim) []ClaimVerdict {
		var b strings.Builder
		if err := writeClaimsSection(&b, &Spec{Claims: claims}, dir, runs); err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(filepath.Join(dir, VerdictsFile))
		var got []ClaimVerdict
		if err := json.Unmarshal(data, &got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	got := verdicts(first, later)
	if got[0].Verdict != "held" || got[1].Verdict != "exploratory" || got[1].DeltaMean == nil ||
		!strings.Contains(got[1].Note, "judged held, but registered after the bench started") {
		t.Fatalf("verdicts %+v", got)
	}
	if got := verdicts(changed); got[0].Verdict != "exploratory" {
		t.Fatalf("a claim changed since registration: %+v", got[0])
	}
	// A name is a label: a registered definition renamed is still judged.
	renamed := first
	renamed.Name = "a beats b (mean)"
	if got := verdicts(renamed); got[0].Verdict != "held" {
		t.Fatalf("a registered claim renamed: %+v", got[0])
	}
	os.Remove(filepath.Join(dir, ClaimsFile))
	if got := verdicts(first, later); got[0].Verdict != "held" || got[1].Verdict != "held" {
		t.Fatalf("without a registration: %+v", got)
	}
}

// With eval.set_k a set may have fewer samples than the mean's k:
// val/mean/avg@4 is over every set (avg is c/n whatever n), val/mean/pass@4
// over the sets with n >= 4, as the trainer logs them. Every metric kept
// per problem has its units: pass^k, maj@k (from the samples, or from a
// restored maj_at) and distinct@k (over the sets evaluated with n = k).
// Values worked by hand: set a (n 1) problem p correct once; set b (n 4)
// problems p, q with 2 and 4 correct of 4.
func TestProblemUnitsKinds(t *testing.T) {
	run := t.TempDir()
	b := trainer.EvalDetail{Step: 5, Set: "b", N: 4, Problems: []string{"p", "q"}, Correct: []int{2, 4}, Distinct: []int{1, 3},
		// p answers x, y, x, y (x right): maj@1 right, maj@2 tie to the
		// earliest (x) right, maj@4 right; q answers z, w, w, w, all right.
		Keys: [][]string{{"x", "y"}, {"z", "w"}}, Answers: [][]int{{0, 1, 0, 1}, {0, 1, 1, 1}}, Hits: []string{"1010", "1111"}}
	for _, d := range []trainer.EvalDetail{{Step: 5, Set: "a", N: 1, Problems: []string{"p"}, Correct: []int{1}, Distinct: []int{1}}, b} {
		if err := trainer.WriteEvalDetail(run, d); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		metric string
		logged float64
		want   [][]float64 // nil: no units
	}{
		{"val/mean/avg@4", (1 + 0.75) / 2, [][]float64{{1}, {0.5, 1}}},
		{"val/mean/pass@4", 1, [][]float64{{1, 1}}},
		{"val/mean/pass@2", (1.0 - 1.0/6 + 1) / 2, [][]float64{{1 - 1.0/6, 1}}}, // C(2,2)/C(4,2) = 1/6 of pairs miss
		{"val/mean/pass^2", (1.0/6 + 1) / 2, [][]float64{{1.0 / 6, 1}}},
		{"val/b/maj@2", 1, [][]float64{{1, 1}}},
		{"val/mean/maj@4", 1, [][]float64{{1, 1}}},
		{"val/mean/distinct@4", 2, [][]float64{{1, 3}}},
		{"val/mean/distinct@1", 1, [][]float64{{1}}},
		{"val/a/pass@4", 1, nil},                   // n = 1
		{"val/mean/avg@4", 0.9, nil},               // does not reproduce the logged value
		{"rollout/entropy", 0.5, nil},              // not kept per problem
		{"val/mean/maj@1", 1, [][]float64{{1, 1}}}, // set a has no samples: left out of the mean
	} {
		r := &armRun{Rows: []map[string]float64{{"step": 5, c.metric: c.logged}}}
		vals, _, why := problemUnits(run, r, c.metric)
		if c.want == nil {
			if why == "" {
				t.Errorf("%s logged %v: units %v, want none", c.metric, c.logged, vals)
			}
			continue
		}
		if why != "" || len(vals) != len(c.want) {
			t.Errorf("%s: %v (%s), want %v", c.metric, vals, why, c.want)
			continue
		}
		for i := range vals {
			for j := range vals[i] {
				if math.Abs(vals[i][j]-c.want[i][j]) > 1e-12 {
					t.Errorf("%s: %v, want %v", c.metric, vals, c.want)
				}
			}
		}
	}
	// A restored detail keeps maj@k per problem instead of the samples.
	restored := t.TempDir()
	if err := trainer.WriteEvalDetail(restored, trainer.EvalDetail{Step: 5, Set: "b", N: 4, Problems: []string{"p", "q"}, Correct: []int{2, 4},
		MajAt: map[string][]int{"2": {0, 1}}}); err != nil {
		t.Fatal(err)
	}
	vals, _, why := problemUnits(restored, &armRun{Rows: []map[string]float64{{"step": 5, "val/b/maj@2": 0.5}}}, "val/b/maj@2")
	if why != "" || len(vals) != 1 || vals[0][0] != 0 || vals[0][1] != 1 {
		t.Errorf("restored maj@2: %v (%s)", vals, why)
	}
}

// The ranked tables restate the verdicts: one per control with two or
// more claims, rows by the first metric's effect, largest first; a control
// with one claim gets none.
func TestRankedSection(t *testing.T) {
	f := func(x float64) *float64 { return &x }
	vs := []ClaimVerdict{
		{Arms: []string{"a", "grpo"}, Metric: "m1", DeltaMean: f(0.01), CILow: f(-0.01), CIHigh: f(0.03), Verdict: "inconclusive", VerdictHolm: "inconclusive"},
		{Arms: []string{"b", "grpo"}, Metric: "m1", DeltaMean: f(0.05), CILow: f(0.02), CIHigh: f(0.08), Verdict: "held", VerdictHolm: "held"},
		{Arms: []string{"b", "grpo"}, Metric: "m2", DeltaMean: f(-0.2), CILow: f(-0.3), CIHigh: f(-0.1), Verdict: "not held", VerdictHolm: "not held"},
		{Arms: []string{"a", "grpo"}, Metric: "m2", Verdict: "inconclusive", VerdictHolm: "inconclusive"},
		{Arms: []string{"c", "ctl"}, Metric: "m1", DeltaMean: f(0.5), CILow: f(0.4), CIHigh: f(0.6), Verdict: "held", VerdictHolm: "held"},
		// The headline is the verdict after Holm: held alone, inconclusive
		// after the family's correction.
		{Arms: []string{"d", "grpo"}, Metric: "m1", DeltaMean: f(0.03), CILow: f(0.001), CIHigh: f(0.06), Verdict: "held", VerdictHolm: "inconclusive"},
	}
	var b strings.Builder
	writeRankedSection(&b, vs)
	got := b.String()
	want := "### Against grpo\n\n| arm | m1 | m2 |\n|---|---|---|\n" +
		"| b | 0.05 [0.02, 0.08] **held** | -0.2 [-0.3, -0.1] not held |\n" +
		"| d | 0.03 [0.001, 0.06] inconclusive | - |\n" +
		"| a | 0.01 [-0.01, 0.03] inconclusive | missing, inconclusive |\n"
	if !strings.Contains(got, want) || strings.Contains(got, "Against ctl") {
		t.Errorf("ranked section:\n%s\nwant it to hold:\n%s", got, want)
	}
}
