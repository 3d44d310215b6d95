package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// The spending functions against values computed apart, with Python's
// statistics.NormalDist and math.log: Pocock-type 0.025 ln(1 + (e-1) t)
// and O'Brien-Fleming-type 2 - 2 Phi(z(0.9875) / sqrt(t)), z(0.9875) =
// 2.2414027276; both reach 0.025 at t = 1.
func TestSpend(t *testing.T) {
	for _, c := range []struct {
		kind string
		t    float64
		want float64
	}{
		{SpendPocock, 0, 0},
		{SpendPocock, 0.3, 0.010393380546090717},
		{SpendPocock, 0.5, 0.015502862673956938},
		{SpendPocock, 0.6, 0.017712826671557876},
		{SpendPocock, 0.9, 0.023367541600029157},
		{SpendPocock, 1, 0.025},
		{SpendOBF, 0, 0},
		{SpendOBF, 0.3, 4.272578744490829e-05},
		{SpendOBF, 0.5, 0.0015253227579887785},
		{SpendOBF, 0.7, 0.007384489357694424},
		{SpendOBF, 1, 0.025},
	} {
		if got := spend(c.kind, c.t); math.Abs(got-c.want) > 1e-9*max(c.want, 1e-3) {
			t.Errorf("spend(%s, %v) = %.12g, want %.12g", c.kind, c.t, got, c.want)
		}
	}
}

// The schedule: seeds continue after the largest registered one, looks
// add StageSeeds up to MaxSeeds (the last stage may add fewer), and the
// looks' increments add up to the 2.5% per side.
func TestSeqSchedule(t *testing.T) {
	for _, c := range []struct {
		plan  SeqPlan
		seeds []uint64
		looks []int
	}{
		{SeqPlan{MaxSeeds: 10, StageSeeds: 2, Spending: SpendPocock, Registered: []uint64{1, 2, 3}},
			[]uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, []int{3, 5, 7, 9, 10}},
		{SeqPlan{MaxSeeds: 5, StageSeeds: 2, Spending: SpendOBF, Registered: []uint64{2, 9, 5}},
			[]uint64{2, 9, 5, 10, 11}, []int{3, 5}},
		{SeqPlan{MaxSeeds: 6, StageSeeds: 3, Spending: SpendPocock, Registered: []uint64{0, 1, 2}},
			[]uint64{0, 1, 2, 3, 4, 5}, []int{3, 6}},
	} {
		if got := c.plan.seeds(); !slices.Equal(got, c.seeds) {
			t.Errorf("%+v: seeds %v, want %v", c.plan, got, c.seeds)
		}
		if got := c.plan.looks(); !slices.Equal(got, c.looks) {
			t.Errorf("%+v: looks %v, want %v", c.plan, got, c.looks)
		}
		sum := 0.0
		for k := range c.looks {
			sum += c.plan.alpha(k)
		}
		if math.Abs(sum-0.025) > 1e-12 {
			t.Errorf("%+v: the looks spend %v per side, want 0.025", c.plan, sum)
		}
	}
	// Pocock at 3, 5, 7, 9, 10 of 10 seeds: increments by hand from the
	// values above.
	p := SeqPlan{MaxSeeds: 10, StageSeeds: 2, Spending: SpendPocock, Registered: []uint64{1, 2, 3}}
	for k, want := range []float64{0.010393380546090717, 0.005109482127866221, 0.0042403384154838485, 0.0036243405105883704, 0.0016324583999708445} {
		if got := p.alpha(k); math.Abs(got-want) > 1e-12 {
			t.Errorf("look %d: alpha %v, want %v", k+1, got, want)
		}
	}
	for _, bad := range []SeqPlan{
		{MaxSeeds: 3, StageSeeds: 2, Spending: SpendPocock, Registered: []uint64{1, 2, 3}},
		{MaxSeeds: 5, StageSeeds: 2, Spending: SpendPocock, Registered: []uint64{1, 2}},
		{MaxSeeds: 5, StageSeeds: 0, Spending: SpendPocock, Registered: []uint64{1, 2, 3}},
		{MaxSeeds: 5, StageSeeds: 2, Spending: "linear", Registered: []uint64{1, 2, 3}},
	} {
		if bad.check() == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

// The rule's bookkeeping with given p values: Holm within the family at
// each look at 2 alpha_k over the claims judged there, a claim decided
// after Holm is not judged again, and a claim's own verdict keeps the
// look that first decided it. N = 5 from 3 seeds (looks at 3 and 5),
// Pocock: alpha_1 = 0.0177128 per side (0.0354257 two-sided), alpha_2 =
// 0.0072872 (0.0145743).
func TestSeqRuleHolm(t *testing.T) {
	p := &SeqPlan{MaxSeeds: 5, StageSeeds: 2, Spending: SpendPocock, Registered: []uint64{1, 2, 3}}
	claims := []Claim{{Name: "c1", Better: "a", Than: "z", Metric: "m"}, {Name: "c2", Better: "b", Than: "z", Metric: "m"},
		{Name: "c3", Better: "c", Than: "z", Metric: "m"}}
	// p per look and claim; every effect positive.
	ps := [][]float64{{0.004, 0.02, 0.03}, {0.9, 0.005, 0.5}}
	judged := map[[2]int]bool{}
	judge := func(k, i int, level float64) ClaimVerdict {
		judged[[2]int{k, i}] = true
		pv, d := ps[k][i], 0.1
		v := ClaimVerdict{Claim: claims[i].Name, Metric: "m", Family: "m", P: &pv, DeltaMean: &d, Seeds: []uint64{1, 2, 3, 4, 5}[:p.looks()[k]], Verdict: "inconclusive"}
		if pv < 1-level {
			v.Verdict = "held"
		}
		return v
	}
	all := func(int, []int) (bool, []string) { return true, nil }
	out, st := p.rule(claims, make([]bool, 3), all, judge)
	// Look 1: Holm 0.004*3 = 0.012 < 0.0354 (c1 held); 0.02*2 = 0.04
	// and max(0.04, 0.03) = 0.04 are not: c2 and c3 go on, their own
	// verdicts held (p < 0.0354). Look 2, m = 2: 0.005*2 = 0.01 <
	// 0.01457 (c2 held); c3's 0.5 is not.
	if judged[[2]int{1, 0}] || !judged[[2]int{1, 1}] || !judged[[2]int{1, 2}] {
		t.Errorf("judged at look 2: %v; want c2 and c3 only", judged)
	}
	want := []struct {
		look, own int
		decided   bool
		verdict   string
		holm      string
		pHolm     float64
		m         int
	}{
		{1, 1, true, "held", "held", 0.012, 3},
		{2, 1, true, "held", "held", 0.01, 2},
		{2, 1, false, "held", "inconclusive", 0.5, 2},
	}
	for i, w := range want {
		v := out[i]
		sq := v.Sequential
		if sq == nil || sq.Look != w.look || sq.OwnLook != w.own || sq.Decided != w.decided || v.Verdict != w.verdict || v.VerdictHolm != w.holm ||
			math.Abs(*v.PHolm-w.pHolm) > 1e-12 || v.FamilySize != w.m {
			t.Errorf("%s: %+v %+v; want %+v", v.Claim, v, sq, w)
		}
	}
	if math.Abs(out[1].Sequential.Alpha-(0.025-0.017712826671557876)) > 1e-12 || out[0].Sequential.Level != 1-2*p.alpha(0) {
		t.Errorf("alphas: %+v %+v", out[0].Sequential, out[1].Sequential)
	}
	if st.taken != 2 || st.next != -1 {
		t.Errorf("state %+v: want 2 looks taken, none left", st)
	}
	// A look that cannot be taken yet stops the replay there.
	notYet := func(k int, c []int) (bool, []string) { return k == 0, []string{"x seed 4"} }
	_, st = p.rule(claims, make([]bool, 3), notYet, judge)
	if st.taken != 1 || st.next != 1 || !slices.Equal(st.waiting, []int{1, 2}) || len(st.missing) != 1 {
		t.Errorf("state %+v: want look 2 waiting for c2 and c3", st)
	}
}

// seqRuns are in-memory finished runs of a seed-level metric "score":
// per arm, its value at seeds 1, 2, ...
func seqRuns(vals map[string][]float64) map[string][]*armRun {
	runs := map[string][]*armRun{}
	for arm, xs := range vals {
		for i, x := range xs {
			runs[arm] = append(runs[arm], &armRun{Arm: arm, Seed: uint64(i + 1), Rows: []map[string]float64{{"step": 1, "score": x}}})
		}
	}
	return runs
}

// The rule on real intervals (judgeClaimAt) over runs that arrive stage
// by stage. N = 10 from 3 seeds, Pocock (looks at 3, 5, 7, 9, 10 seeds;
// alpha per side 0.0103934, 0.0051095, ...). The effects, per seed:
//
//	c1 a - b: 10, 10.1, 9.9: t = 100 sqrt(3) on 2 df, p = 3.3332e-5 (by
//	  hand: 1 - t / sqrt(2 + t^2)); Holm over 3 claims 1.0e-4 < 0.0208:
//	  held at look 1. Seeds 4 and 5 of a, run for no claim of its own,
//	  would reverse it: it is not judged again.
//	c2 c - b: 1, 1.3, 0.7: t = 5.7735, p = 0.0287141 > 0.0208 (it would
//	  be held at a plain 95%); with 1, 1 at seeds 4, 5: t = 10.5409 on
//	  4 df, p = 4.5816e-4 (by hand from the t(4) CDF), Holm over 2:
//	  9.16e-4 < 0.0102: held at look 2.
//	c3 d - c: +1, -1, +1, ...: never decided; mean 0 at the last look.
func TestSeqJudge(t *testing.T) {
	dir := t.TempDir()
	spec := &Spec{File: "t.yaml", Seeds: []uint64{1, 2, 3}, Arms: []Arm{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}},
		Claims: []Claim{{Name: "c1", Better: "a", Than: "b", Metric: "score"}, {Name: "c2", Better: "c", Than: "b", Metric: "score"},
			{Name: "c3", Better: "d", Than: "c", Metric: "score"}}}
	p := &SeqPlan{MaxSeeds: 10, StageSeeds: 2, Spending: SpendPocock, Registered: []uint64{1, 2, 3}}
	full := spec.withSeeds(p.seeds())
	c := []float64{1, 1.3, 0.7, 1, 1, 1, 1, 1, 1, 1}
	d := make([]float64, 10)
	for i := range d {
		d[i] = c[i] + 1 - 2*float64(i%2)
	}
	vals := func(n map[string]int) map[string][]float64 {
		all := map[string][]float64{"a": {10, 10.1, 9.9, -50, -50}, "b": make([]float64, 10), "c": c, "d": d}
		out := map[string][]float64{}
		for arm, xs := range all {
			out[arm] = xs[:n[arm]]
		}
		return out
	}
	// After stage 1: look 1 taken, look 2 waits for b, c and d.
	out, st := p.judgeSequential(full, dir, seqRuns(vals(map[string]int{"a": 3, "b": 3, "c": 3, "d": 3})), nil, nil)
	stage, only := p.seqStage(full, st)
	if st.taken != 1 || st.next != 1 || !slices.Equal(only, []string{"b", "c", "d"}) || !slices.Equal(stage.Seeds, []uint64{1, 2, 3, 4, 5}) {
		t.Fatalf("after stage 1: %+v, stage %v %v", st, only, stage.Seeds)
	}
	if v := out[0]; v.VerdictHolm != "held" || math.Abs(*v.P-3.3332e-5) > 1e-8 || math.Abs(*v.PHolm-3*(*v.P)) > 1e-15 {
		t.Errorf("c1 at look 1: %s, p %v, Holm %v; want held, 3.3332e-5, 3p", v.VerdictHolm, *v.P, *v.PHolm)
	}
	if v := out[1]; v.Verdict != "inconclusive" || math.Abs(*v.P-0.0287141376) > 1e-9 {
		t.Errorf("c2 at look 1: %s, p %v; want inconclusive, 0.028714", v.Verdict, *v.P)
	}
	// After stage 2 (a's seeds 4 and 5 finished too): c2 decided.
	out, st = p.judgeSequential(full, dir, seqRuns(vals(map[string]int{"a": 5, "b": 5, "c": 5, "d": 5})), nil, nil)
	_, only = p.seqStage(full, st)
	if st.taken != 2 || st.next != 2 || !slices.Equal(only, []string{"c", "d"}) {
		t.Fatalf("after stage 2: %+v, stage %v", st, only)
	}
	if v := out[0]; v.Sequential.Look != 1 || !slices.Equal(v.Seeds, []uint64{1, 2, 3}) || v.VerdictHolm != "held" {
		t.Errorf("c1 judged again: %+v %+v", v, v.Sequential)
	}
	if v := out[1]; v.Sequential.Look != 2 || v.Sequential.OwnLook != 2 || v.VerdictHolm != "held" || math.Abs(*v.P-4.5816065e-4) > 1e-9 ||
		math.Abs(*v.PHolm-2*(*v.P)) > 1e-15 || v.FamilySize != 2 {
		t.Errorf("c2 at look 2: %+v %+v", v, v.Sequential)
	}
	// Every look taken: c3 stays inconclusive on all 10 seeds.
	out, st = p.judgeSequential(full, dir, seqRuns(vals(map[string]int{"a": 5, "b": 5, "c": 10, "d": 10})), nil, nil)
	if st.taken != 5 || st.next != -1 {
		t.Fatalf("at the end: %+v", st)
	}
	if v := out[2]; v.Sequential.Look != 5 || v.Sequential.Decided || v.VerdictHolm != "inconclusive" || len(v.Seeds) != 10 || math.Abs(*v.DeltaMean) > 1e-12 ||
		math.Abs(v.Sequential.Alpha-0.0016324583999708445) > 1e-12 {
		t.Errorf("c3 at the last look: %+v %+v", v, v.Sequential)
	}
}

// A stage's seeds are a prefix of the plan's, so its arm-seeds have the
// numbers the whole plan gives them: what a Slurm worker of the stage
// (SequentialWorkerSpec) trains is what the stage submitted.
func TestSeqTaskNumbers(t *testing.T) {
	spec := &Spec{Seeds: []uint64{4, 2, 7}, Arms: []Arm{{Name: "a"}, {Name: "b"}, {Name: "c"}}}
	p := &SeqPlan{MaxSeeds: 7, StageSeeds: 2, Spending: SpendPocock, Registered: spec.Seeds}
	full := armSeeds(spec.withSeeds(p.seeds()))
	for _, n := range p.looks() {
		for i, j := range armSeeds(spec.withSeeds(p.seeds()[:n])) {
			if full[i].arm.Name != j.arm.Name || full[i].seed != j.seed {
				t.Errorf("%d seeds: task %d is %s/%d, the plan's is %s/%d", n, i, j.arm.Name, j.seed, full[i].arm.Name, full[i].seed)
			}
		}
	}
}

// A sequential bench end to end on a tiny testbed: 3 registered seeds,
// at most 5. Its only claim (arm a over the base policy on a metric no
// run logs) stays inconclusive, so stage 2 trains arm a and evaluates the
// base at seeds 4 and 5, and arm b, in no claim, gets no seed beyond the
// registered ones. The same command again trains nothing and gives the
// same verdicts, --report-only (without the flags) too; other flags on
// the directory are refused, as are the flags on a plain bench's report.
func TestSequentialBench(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "seq")
	spec, err := ParseSpec([]byte(`
base_eval: true
base:
  seed: 1
  task: {name: arith, levels: [1], eval_n: 4, eval_sets: [{name: l1, level: 1}]}
  model: {layers: 1, d_model: 16, heads: 2, max_len: 48, checkpoint: auto}
  backend: {engine: go}
  rollout: {n: 4, max_response_tokens: 12}
  train: {steps: 1, prompts_per_step: 2, checkpoint_every: 1}
  eval: {every: 0, k: 2, at_start: false}
  pretrain: {seed: 1, steps: 2, batch_size: 8, eval_every: 2, eval_k: 1, eval_max_problems: 4}
seeds: [1, 2, 3]
arms:
  - {name: a, config: {algorithm: {name: grpo}}}
  - {name: b, config: {algorithm: {name: grpo}}}
claims:
  - {name: "a beats the base", better: a, than: base, metric: no/such/metric}
`), "seq.yaml")
	if err != nil {
		t.Fatal(err)
	}
	run := func(o Options) (string, error) {
		var log syncBuffer
		o.Dir, o.Exe, o.Output, o.Log = dir, cdeRun, &log, zerolog.New(&log)
		err := Run(context.Background(), spec, o)
		return log.String(), err
	}
	seq := Options{MaxSeeds: 5, Command: "cde-run bench -c seq.yaml --until-conclusive --max-seeds 5"}
	log, err := run(seq)
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, log)
	}
	for _, want := range []string{"stage 1 of at most 2: every arm at seeds 1, 2, 3", "stage 2 of at most 2: base, a at seeds 1, 2, 3, 4, 5",
		"2 of 2 look(s) taken (seeds 3, 5); 0 of 1 claim(s) decided; the last look is taken"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	for _, r := range []struct {
		arm  string
		seed uint64
		done bool
	}{{"a", 5, true}, {BaseArm, 4, true}, {BaseArm, 5, true}, {"b", 3, true}, {"b", 4, false}} {
		_, err := os.Stat(filepath.Join(RunDir(dir, r.arm, r.seed), DoneFile))
		if (err == nil) != r.done {
			t.Errorf("%s seed %d: DONE %v, want %v", r.arm, r.seed, err == nil, r.done)
		}
	}
	verdicts := func() []byte {
		b, err := os.ReadFile(filepath.Join(dir, VerdictsFile))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	first := verdicts()
	var vs []ClaimVerdict
	if err := json.Unmarshal(first, &vs); err != nil || len(vs) != 1 || vs[0].Sequential == nil || vs[0].Sequential.Look != 2 ||
		vs[0].Sequential.Decided || vs[0].Sequential.SeedsPlanned != 5 || vs[0].VerdictHolm != "inconclusive" {
		t.Fatalf("verdicts: %s (%v)", first, err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "results.md"))
	for _, want := range []string{"**Sequential bench** (`--until-conclusive --max-seeds 5`)", "### Sequential looks",
		"| a beats the base | not decided (last look 2) |", "| a | 5 |", "| b | 3 |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("results.md lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(string(md), "b seed 4") {
		t.Errorf("results.md counts b's unplanned seeds as missing:\n%s", md)
	}
	log, err = run(seq)
	if err != nil || strings.Contains(log, ": starting") || !bytes.Equal(verdicts(), first) {
		t.Errorf("rerun: %v, verdicts changed %v:\n%s", err, !bytes.Equal(verdicts(), first), log)
	}
	if err := Report(spec, Options{Dir: dir}); err != nil || !bytes.Equal(verdicts(), first) {
		t.Errorf("report only: %v; verdicts now %s", err, verdicts())
	}
	if _, err := run(Options{MaxSeeds: 6}); err == nil || !strings.Contains(err.Error(), "cannot change") {
		t.Errorf("other --max-seeds: %v", err)
	}
	plain := t.TempDir()
	if err := Report(spec, Options{Dir: plain, MaxSeeds: 5}); err == nil || !strings.Contains(err.Error(), "no sequential bench there") {
		t.Errorf("--until-conclusive on a plain directory's report: %v", err)
	}
}
