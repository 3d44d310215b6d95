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
// 0.12, 0.06 (mean 0.096); every seed resample's mean is at least 0.05, so
// the interval is above 0: held. Lower-is-better flips the sign: not held.
// A seed only one arm finished (6) is left out; with 3 paired seeds the
// same all-positive effects are inconclusive (fewer than 5).
func TestJudgeClaimSeedLevel(t *testing.T) {
	runs := fakeRuns("rollout/entropy", map[uint64]float64{1: 0.6, 2: 0.7, 3: 0.65, 4: 0.62, 5: 0.66, 6: 0.9},
		map[uint64]float64{1: 0.5, 2: 0.55, 3: 0.6, 4: 0.5, 5: 0.6})
	dir := t.TempDir()
	v := judgeClaimPaired(Claim{Name: "x", Better: "a", Than: "b", Metric: "rollout/entropy"}, dir, runs)
	if v.Verdict != "held" || !near(v.DeltaMean, 0.096) || *v.CILow < 0.05-1e-12 || *v.CIHigh > 0.15+1e-12 || v.Units != "none" ||
		!slices.Equal(v.Seeds, []uint64{1, 2, 3, 4, 5}) || len(v.PerSeed) != 5 || math.Abs(v.PerSeed[1]-0.15) > 1e-12 {
		t.Errorf("seed level: %+v", v)
	}
	v = judgeClaimPaired(Claim{Name: "x", Better: "a", Than: "b", Metric: "rollout/entropy", LowerIsBetter: true}, dir, runs)
	if v.Verdict != "not held" || !near(v.DeltaMean, -0.096) {
		t.Errorf("lower is better: %+v", v)
	}
	three := fakeRuns("m", map[uint64]float64{1: 0.6, 2: 0.7, 3: 0.65}, map[uint64]float64{1: 0.5, 2: 0.55, 3: 0.6})
	if v := judgeClaimPaired(Claim{Name: "x", Better: "a", Than: "b", Metric: "m"}, dir, three); v.Verdict != "inconclusive" ||
		!strings.Contains(v.Note, "3 paired seed(s): a verdict needs at least 5 when only seeds are resampled") || *v.CILow <= 0 {
		t.Errorf("three seeds: %+v", v)
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

// With per-problem eval results the bootstrap resamples problems too. Two
// problems, n = 4 samples: arm a solves 4 and 0, arm b 2 and 0, in each of
// 3 seeds: avg@4 is 0.5 vs 0.25, an effect of 0.25 per seed, and the
// per-problem effects are 0.5 and 0 (seeds are alike, so drawing seeds
// changes nothing).
//
// Crossed (every seed has problems p1, p2): one draw of the two problems
// serves all seeds, so for val/c3 the resampled effect is 0.25 x
// Binomial(2, 1/2): 0, 0.25, 0.5 with 1/4, 1/2, 1/4; the interval is
// [0, 0.5], inconclusive. For val/mean (sets c3 and c4, each drawn once)
// it is 0.125 x Binomial(4, 1/2); P(0) = 1/16 > 2.5%, so [0, 0.5] again.
//
// Nested (seed 3 evaluated on other problems, p3 and p4, with the same
// counts): each seed draws its own problems and for val/c3 the effect is
// the mean of three draws, Binomial(6, 1/2) / 12, whose 2.5% and 97.5%
// quantiles are 1/12 (P(0) = 1/64 < 2.5% < P(<= 1) = 7/64) and 5/12
// (P(<= 4) = 57/64 < 97.5% < P(<= 5) = 63/64): held. For val/mean it is
// Binomial(12, 1/2) / 24: quantiles 3/24 (P(<= 2) = 79/4096 < 2.5% <
// P(<= 3) = 299/4096) and 9/24 (P(<= 8) = 3797/4096 < 97.5% < P(<= 9) =
// 4017/4096). With two seeds the same data is inconclusive (fewer than 3).
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
			if v.Units != "problems" || v.Design != design || !near(v.DeltaMean, 0.25) || !near(v.CILow, c.low) || !near(v.CIHigh, c.high) || v.Verdict != c.verdict {
				t.Errorf("%s %s: %+v (low %v high %v)", design, c.m, v, deref(v.CILow), deref(v.CIHigh))
			}
		}
	}
	check("crossed", []want{{"val/c3/avg@4", 0, 0.5, "inconclusive"}, {"val/mean/avg@4", 0, 0.5, "inconclusive"}})
	write(3, []string{"p3", "p4"})
	check("nested", []want{{"val/c3/avg@4", 1.0 / 12, 5.0 / 12, "held"}, {"val/mean/avg@4", 3.0 / 24, 9.0 / 24, "held"}})
	two := fakeRuns("val/c3/avg@4", map[uint64]float64{1: 0.5, 2: 0.5}, map[uint64]float64{1: 0.25, 2: 0.25})
	if v := judgeClaimPaired(Claim{Name: "y", Better: "a", Than: "b", Metric: "val/c3/avg@4"}, dir, two); v.Verdict != "inconclusive" || v.Units != "problems" ||
		!strings.Contains(v.Note, "at least 3 when problems are resampled") {
		t.Errorf("two seeds: %+v", v)
	}
	// pass@2 from the same counts: problem 1 of b has pass@2 = 1 - C(2,2)/C(4,2) = 5/6.
	if v := judgeClaimPaired(Claim{Name: "z", Better: "a", Than: "b", Metric: "val/c3/pass@2"}, dir, seeds3("val/c3/pass@2", 0.5, 5.0/12)); !near(v.DeltaMean, 0.5-5.0/12) {
		t.Errorf("pass@2: %+v", v)
	}
	// Different problems in the two arms: no pairing by problem, seeds only.
	if err := trainer.WriteEvalDetail(RunDir(dir, "b", 2), trainer.EvalDetail{Step: 10, Set: "c3", N: 4, Problems: []string{"p1", "other"}, Correct: []int{2, 0}}); err != nil {
		t.Fatal(err)
	}
	if v := judgeClaimPaired(Claim{Name: "y", Better: "a", Than: "b", Metric: "val/c3/avg@4"}, dir, seeds3("val/c3/avg@4", 0.5, 0.25)); v.Units != "none" {
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
	for _, k := range []string{"claim", "metric", "arms", "seeds", "delta_mean", "ci_low", "ci_high", "verdict"} {
		if _, ok := got[0][k]; !ok {
			t.Errorf("verdicts.json lacks %q: %s", k, data)
		}
	}
	if got[0]["verdict"] != "held" || math.Abs(got[0]["delta_mean"].(float64)-0.15) > 1e-12 || !strings.Contains(b.String(), "| a beats b | m | a | b | 5 | seeds |") {
		t.Errorf("verdict %v, section:\n%s", got[0], b.String())
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
// over the sets with n >= 4, as the trainer logs them.
func TestProblemUnitsMixedK(t *testing.T) {
	run := t.TempDir()
	for _, d := range []trainer.EvalDetail{{Step: 5, Set: "a", N: 1, Problems: []string{"p"}, Correct: []int{1}}, {Step: 5, Set: "b", N: 4, Problems: []string{"p"}, Correct: []int{2}}} {
		if err := trainer.WriteEvalDetail(run, d); err != nil {
			t.Fatal(err)
		}
	}
	r := &armRun{Rows: []map[string]float64{{"step": 5, "val/mean/avg@4": 0.75, "val/mean/pass@4": 1}}}
	vals, ids, ok := problemUnits(run, r, "val/mean/avg@4")
	if !ok || len(vals) != 2 || vals[0][0] != 1 || vals[1][0] != 0.5 || ids[1][0] != "p" {
		t.Errorf("avg: %v %v %v", vals, ids, ok)
	}
	vals, _, ok = problemUnits(run, r, "val/mean/pass@4")
	if !ok || len(vals) != 1 || vals[0][0] != 1 {
		t.Errorf("pass@4: %v %v", vals, ok)
	}
	if _, _, ok := problemUnits(run, &armRun{Rows: []map[string]float64{{"step": 5, "val/a/pass@4": 1}}}, "val/a/pass@4"); ok {
		t.Error("pass@4 of a set with n = 1")
	}
}

// The ranked tables restate the verdicts: one per control with two or
// more claims, rows by the first metric's effect, largest first; a control
// with one claim gets none.
func TestRankedSection(t *testing.T) {
	f := func(x float64) *float64 { return &x }
	vs := []ClaimVerdict{
		{Arms: []string{"a", "grpo"}, Metric: "m1", DeltaMean: f(0.01), CILow: f(-0.01), CIHigh: f(0.03), Verdict: "inconclusive"},
		{Arms: []string{"b", "grpo"}, Metric: "m1", DeltaMean: f(0.05), CILow: f(0.02), CIHigh: f(0.08), Verdict: "held"},
		{Arms: []string{"b", "grpo"}, Metric: "m2", DeltaMean: f(-0.2), CILow: f(-0.3), CIHigh: f(-0.1), Verdict: "not held"},
		{Arms: []string{"a", "grpo"}, Metric: "m2", Verdict: "inconclusive"},
		{Arms: []string{"c", "ctl"}, Metric: "m1", DeltaMean: f(0.5), CILow: f(0.4), CIHigh: f(0.6), Verdict: "held"},
	}
	var b strings.Builder
	writeRankedSection(&b, vs)
	got := b.String()
	want := "### Against grpo\n\n| arm | m1 | m2 |\n|---|---|---|\n" +
		"| b | 0.05 [0.02, 0.08] **held** | -0.2 [-0.3, -0.1] not held |\n" +
		"| a | 0.01 [-0.01, 0.03] inconclusive | missing, inconclusive |\n"
	if !strings.Contains(got, want) || strings.Contains(got, "Against ctl") {
		t.Errorf("ranked section:\n%s\nwant it to hold:\n%s", got, want)
	}
}
