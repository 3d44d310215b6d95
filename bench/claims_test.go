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

	"github.com/cde-rl/cde/core"
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

// Seed-level claims, worked by hand: effects per seed 0.1, 0.15, 0.05 (mean
// 0.1); every seed resample's mean is at least 0.05, so the interval is
// above 0: held. Lower-is-better flips the sign: not held. A seed only one
// arm finished is left out; one paired seed is inconclusive.
func TestJudgeClaimSeedLevel(t *testing.T) {
	runs := fakeRuns("rollout/entropy", map[uint64]float64{1: 0.6, 2: 0.7, 3: 0.65, 4: 0.9}, map[uint64]float64{1: 0.5, 2: 0.55, 3: 0.6})
	dir := t.TempDir()
	v := judgeClaimPaired(Claim{Name: "x", Better: "a", Than: "b", Metric: "rollout/entropy"}, dir, runs)
	if v.Verdict != "held" || !near(v.DeltaMean, 0.1) || *v.CILow < 0.05-1e-12 || *v.CIHigh > 0.15+1e-12 || v.Units != "none" ||
		!slices.Equal(v.Seeds, []uint64{1, 2, 3}) || len(v.PerSeed) != 3 || math.Abs(v.PerSeed[1]-0.15) > 1e-12 {
		t.Errorf("seed level: %+v", v)
	}
	v = judgeClaimPaired(Claim{Name: "x", Better: "a", Than: "b", Metric: "rollout/entropy", LowerIsBetter: true}, dir, runs)
	if v.Verdict != "not held" || !near(v.DeltaMean, -0.1) {
		t.Errorf("lower is better: %+v", v)
	}
	one := fakeRuns("m", map[uint64]float64{1: 0.9}, map[uint64]float64{1: 0.1})
	if v := judgeClaimPaired(Claim{Name: "x", Better: "a", Than: "b", Metric: "m"}, dir, one); v.Verdict != "inconclusive" || !strings.Contains(v.Note, "at least 2") {
		t.Errorf("one seed: %+v", v)
	}
	if v := judgeClaimPaired(Claim{Name: "x", Better: "a", Than: "b", Metric: "absent"}, dir, runs); v.Verdict != "inconclusive" || v.DeltaMean != nil {
		t.Errorf("missing metric: %+v", v)
	}
	// window 2: the mean of the last two values (0 and the final), so the
	// effects halve.
	if v := judgeClaimPaired(Claim{Name: "x", Better: "a", Than: "b", Metric: "rollout/entropy", Window: 2}, dir, runs); !near(v.DeltaMean, 0.05) {
		t.Errorf("window 2: %+v", v)
	}
}

// With per-problem eval results the bootstrap resamples problems inside
// each seed. Two problems, n = 4 samples: arm a solves 4 and 0, arm b 2
// and 0, in both seeds: avg@4 is 0.5 vs 0.25, an effect of 0.25 per seed.
// The per-problem effects are 0.5 and 0, so one set's resampled effect is
// 0.25 x Binomial(2, 1/2). For val/c3 a resample is the mean of two such
// (two seeds): 2.5% and 97.5% quantiles 0 and 0.5, an interval containing
// 0: inconclusive, where seeds alone (0.25 twice) would say held. For
// val/mean (sets c3 and c4, the same counts, resampled separately) it is
// the mean of four: Binomial(8, 1/2) / 16, whose quantiles are 1/16 (P(<=
// 0) = 1/256 < 2.5% < P(<= 1) = 9/256) and 7/16: held.
func TestJudgeClaimProblemLevel(t *testing.T) {
	dir := t.TempDir()
	runs := fakeRuns("val/c3/avg@4", map[uint64]float64{1: 0.5, 2: 0.5}, map[uint64]float64{1: 0.25, 2: 0.25})
	for _, arm := range []string{"a", "b"} {
		correct := map[string][]int{"a": {4, 0}, "b": {2, 0}}[arm]
		for _, seed := range []uint64{1, 2} {
			for _, set := range []string{"c3", "c4"} {
				if err := core.WriteEvalDetail(RunDir(dir, arm, seed), core.EvalDetail{Step: 10, Set: set, N: 4, Problems: []string{"p1", "p2"}, Correct: correct}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for _, c := range []struct {
		m         string
		low, high float64
		verdict   string
	}{{"val/c3/avg@4", 0, 0.5, "inconclusive"}, {"val/mean/avg@4", 1.0 / 16, 7.0 / 16, "held"}} {
		m := c.m
		runs := fakeRuns(m, map[uint64]float64{1: 0.5, 2: 0.5}, map[uint64]float64{1: 0.25, 2: 0.25})
		v := judgeClaimPaired(Claim{Name: "y", Better: "a", Than: "b", Metric: m}, dir, runs)
		if v.Units != "problems" || !near(v.DeltaMean, 0.25) || !near(v.CILow, c.low) || !near(v.CIHigh, c.high) || v.Verdict != c.verdict {
			t.Errorf("%s: %+v (low %v high %v)", m, v, deref(v.CILow), deref(v.CIHigh))
		}
	}
	// pass@2 from the same counts: problem 1 of b has pass@2 = 1 - C(2,2)/C(4,2) = 5/6.
	runs = fakeRuns("val/c3/pass@2", map[uint64]float64{1: 0.5, 2: 0.5}, map[uint64]float64{1: 5.0 / 12, 2: 5.0 / 12})
	if v := judgeClaimPaired(Claim{Name: "z", Better: "a", Than: "b", Metric: "val/c3/pass@2"}, dir, runs); !near(v.DeltaMean, 0.5-5.0/12) {
		t.Errorf("pass@2: %+v", v)
	}
	// Different problems in the two arms: no pairing by problem, seeds only.
	if err := core.WriteEvalDetail(RunDir(dir, "b", 2), core.EvalDetail{Step: 10, Set: "c3", N: 4, Problems: []string{"p1", "other"}, Correct: []int{2, 0}}); err != nil {
		t.Fatal(err)
	}
	if v := judgeClaimPaired(Claim{Name: "y", Better: "a", Than: "b", Metric: "val/c3/avg@4"}, dir, fakeRuns("val/c3/avg@4", map[uint64]float64{1: 0.5, 2: 0.5}, map[uint64]float64{1: 0.25, 2: 0.25})); v.Units != "none" {
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
	runs := fakeRuns("m", map[uint64]float64{1: 0.6, 2: 0.7}, map[uint64]float64{1: 0.5, 2: 0.5})
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
	if got[0]["verdict"] != "held" || math.Abs(got[0]["delta_mean"].(float64)-0.15) > 1e-12 || !strings.Contains(b.String(), "| a beats b | m | a | b | 2 | seeds |") {
		t.Errorf("verdict %v, section:\n%s", got[0], b.String())
	}
}
