package bench

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// The x of each row on each axis: what the run had spent before the row's
// step, worked out by hand from the rows below.
func TestComputeX(t *testing.T) {
	r := &armRun{Rows: []map[string]float64{
		// step 0: 4 responses, 10 tok/s x 2 s = 20 tokens, 3 s.
		{"step": 0, GeneratedMetric: 4, GeneratedTotalMetric: 4, genTokensPerSMetric: 10, genSMetric: 2, stepSMetric: 3},
		// step 1: 8 responses, 6 tok/s x 5 s = 30 tokens, 1.5 s.
		{"step": 1, GeneratedMetric: 8, GeneratedTotalMetric: 12, genTokensPerSMetric: 6, genSMetric: 5, stepSMetric: 1.5, "val/mean/pass@1": 0.2},
		// the evaluation after the last step.
		{"step": 2, "val/mean/pass@1": 0.3},
	}}
	for _, c := range []struct {
		axis string
		want []float64
	}{
		{AtResponses, []float64{0, 4, 12}},
		{AtTokens, []float64{0, 20, 50}},
		{AtWall, []float64{0, 3, 4.5}},
	} {
		if got := computeX(r, c.axis); !slices.Equal(got, c.want) {
			t.Errorf("%s: x %v, want %v", c.axis, got, c.want)
		}
	}
	bare := &armRun{Rows: []map[string]float64{{"step": 0, "val/mean/pass@1": 0.1}, {"step": 1}}}
	for _, axis := range []string{AtResponses, AtTokens, AtWall} {
		if got := computeX(bare, axis); got != nil {
			t.Errorf("%s of rows without its metrics: %v, want nil", axis, got)
		}
	}
}

func TestInterpolate(t *testing.T) {
	pts := []curvePoint{{0, 0.1, -1}, {100, 0.3, 10}, {300, 0.5, 20}}
	for _, c := range []struct {
		x    float64
		want float64
		from string
		ok   bool
	}{
		{0, 0.1, "base", true},
		{50, 0.2, "base (0) to step 10 (100)", true},
		{100, 0.3, "step 10", true},
		{200, 0.4, "step 10 (100) to step 20 (300)", true},
		{300, 0.5, "step 20", true},
		{-1, 0, "", false},
		{301, 0, "", false},
	} {
		v, from, ok := interpolate(pts, c.x)
		if ok != c.ok || math.Abs(v-c.want) > 1e-12 || from != c.from {
			t.Errorf("x %v: %v %q %v, want %v %q %v", c.x, v, from, ok, c.want, c.from, c.ok)
		}
	}
}

func TestFmtAxis(t *testing.T) {
	for x, want := range map[float64]string{0: "0", 999: "999", 25600: "25,600", 1234567: "1,234,567", 12.5: "12.5"} {
		if got := fmtAxis(x); got != want {
			t.Errorf("fmtAxis(%v) = %q, want %q", x, got, want)
		}
	}
}

// atRuns are two arms over 3 seeds from a shared base: "slow" generates
// 10 responses a step and evaluates at steps 10 and 20 (x 100 and 200),
// "fast" 20 a step, at x 200 and 400. pass@1 by seed: base, fast at steps
// 10 and 20, slow at steps 10 and 20.
func atRuns() map[string][]*armRun {
	vals := map[uint64][5]float64{
		1: {0.10, 0.30, 0.50, 0.25, 0.35},
		2: {0.10, 0.32, 0.40, 0.20, 0.30},
		3: {0.12, 0.40, 0.45, 0.28, 0.30},
	}
	arm := func(name string, seed uint64, per float64, v10, v20 float64) *armRun {
		r := &armRun{Arm: name, Seed: seed}
		total := 0.0
		for s := range 20 {
			total += per
			row := map[string]float64{"step": float64(s), GeneratedMetric: per, GeneratedTotalMetric: total}
			if s == 10 {
				row["val/mean/pass@1"] = v10
			}
			r.Rows = append(r.Rows, row)
		}
		r.Rows = append(r.Rows, map[string]float64{"step": 20, "val/mean/pass@1": v20})
		return r
	}
	runs := map[string][]*armRun{}
	for _, seed := range []uint64{1, 2, 3} {
		v := vals[seed]
		runs[BaseArm] = append(runs[BaseArm], &armRun{Arm: BaseArm, Seed: seed, Rows: []map[string]float64{{"step": 0, "val/mean/pass@1": v[0]}}})
		runs["fast"] = append(runs["fast"], arm("fast", seed, 20, v[1], v[2]))
		runs["slow"] = append(runs["slow"], arm("slow", seed, 10, v[3], v[4]))
	}
	return runs
}

// A claim at equal responses takes each seed's value where both arms'
// evaluations reach, interpolated by hand below.
func TestJudgeClaimAt(t *testing.T) {
	runs := atRuns()
	x := func(v float64) *float64 { return &v }
	t975 := 4.302652729749464 // t(0.975, 2)
	for _, c := range []struct {
		name    string
		at      *float64
		perSeed []float64
		points  []float64
	}{
		// Default point: the earlier of the last evaluations, 200 (slow's
		// final). fast at 200 is its step-10 evaluation, slow its final:
		// 0.30-0.35, 0.32-0.30, 0.40-0.30.
		{"default", nil, []float64{-0.05, 0.02, 0.10}, []float64{200, 200, 200}},
		// At 150: fast between base (0) and 200, 3/4 of the way; slow
		// halfway between 100 and 200.
		// seed 1: 0.10+0.75*0.20 = 0.25 vs 0.25+0.5*0.10 = 0.30
		// seed 2: 0.10+0.75*0.22 = 0.265 vs 0.20+0.5*0.10 = 0.25
		// seed 3: 0.12+0.75*0.28 = 0.33 vs 0.28+0.5*0.02 = 0.29
		{"at 150", x(150), []float64{-0.05, 0.015, 0.04}, []float64{150, 150, 150}},
		// At 50: fast 0.10+0.25*0.20 = 0.15 etc.; slow between base and
		// step 10: 0.10+0.5*0.15 = 0.175, 0.10+0.5*0.10 = 0.15, 0.12+0.5*0.16 = 0.20.
		// fast: 0.15, 0.10+0.25*0.22 = 0.155, 0.12+0.25*0.28 = 0.19.
		{"at 50", x(50), []float64{-0.025, 0.005, -0.01}, []float64{50, 50, 50}},
	} {
		cl := Claim{Name: c.name, Better: "fast", Than: "slow", Metric: "val/mean/pass@1", At: AtResponses, AtValue: c.at}
		v, _, _ := judgeClaim(cl, t.TempDir(), runs)
		if len(v.PerSeed) != 3 {
			t.Fatalf("%s: per seed %v (note %q)", c.name, v.PerSeed, v.Note)
		}
		for i := range c.perSeed {
			if math.Abs(v.PerSeed[i]-c.perSeed[i]) > 1e-12 {
				t.Errorf("%s: seed %d effect %v, want %v", c.name, i+1, v.PerSeed[i], c.perSeed[i])
			}
		}
		if v.At != AtResponses || !slices.Equal(v.AtPoints, c.points) || v.Units != "none" || v.Method != "t" {
			t.Errorf("%s: at %q points %v units %q method %q", c.name, v.At, v.AtPoints, v.Units, v.Method)
		}
		// The t interval of the three effects, by hand.
		d := c.perSeed
		mean := (d[0] + d[1] + d[2]) / 3
		ss := 0.0
		for _, e := range d {
			ss += (e - mean) * (e - mean)
		}
		h := t975 * math.Sqrt(ss/2/3)
		if math.Abs(*v.DeltaMean-mean) > 1e-12 || math.Abs(*v.CILow-(mean-h)) > 1e-9 || math.Abs(*v.CIHigh-(mean+h)) > 1e-9 {
			t.Errorf("%s: d %v [%v, %v], want %v [%v, %v]", c.name, *v.DeltaMean, *v.CILow, *v.CIHigh, mean, mean-h, mean+h)
		}
		if !strings.Contains(v.Note, "judged at equal responses generated") || !strings.Contains(v.Note, "judged on seeds only: a claim at equal responses generated") {
			t.Errorf("%s: note %q", c.name, v.Note)
		}
	}
	// The default point's note, seed 1: fast's step-10 evaluation, slow's
	// final, no interpolation.
	v, _, _ := judgeClaim(Claim{Name: "n", Better: "fast", Than: "slow", Metric: "val/mean/pass@1", At: AtResponses}, t.TempDir(), runs)
	if want := "seed 1 at 200: fast 0.3 (step 10), slow 0.35 (step 20)"; !strings.Contains(v.Note, want) {
		t.Errorf("note %q lacks %q", v.Note, want)
	}
	// Past slow's last evaluation: never extrapolated, so no seed.
	v, _, _ = judgeClaim(Claim{Name: "past", Better: "fast", Than: "slow", Metric: "val/mean/pass@1", At: AtResponses, AtValue: x(250)}, t.TempDir(), runs)
	if len(v.Seeds) != 0 || v.Verdict != "inconclusive" || !strings.Contains(v.Note, "seed 1: no value at 250 responses generated (both arms have evaluations in [0, 200] only; a claim at equal compute is never extrapolated)") {
		t.Errorf("past the range: seeds %v verdict %q note %q", v.Seeds, v.Verdict, v.Note)
	}
	// Without the base evaluation fast starts at 200 and slow ends there:
	// 150 is outside fast's evaluations.
	noBase := map[string][]*armRun{"fast": runs["fast"], "slow": runs["slow"]}
	v, _, _ = judgeClaim(Claim{Name: "nobase", Better: "fast", Than: "slow", Metric: "val/mean/pass@1", At: AtResponses, AtValue: x(150)}, t.TempDir(), noBase)
	if len(v.Seeds) != 0 || !strings.Contains(v.Note, "both arms have evaluations in [200, 200] only") {
		t.Errorf("without the base: seeds %v note %q", v.Seeds, v.Note)
	}
	// Lower is better flips the sign, as at equal steps.
	v, _, _ = judgeClaim(Claim{Name: "lower", Better: "fast", Than: "slow", Metric: "val/mean/pass@1", At: AtResponses, LowerIsBetter: true}, t.TempDir(), runs)
	if len(v.PerSeed) != 3 || math.Abs(v.PerSeed[0]-0.05) > 1e-12 {
		t.Errorf("lower is better: per seed %v", v.PerSeed)
	}
	// Tokens: these runs log no perf/*, so no seed has the axis.
	v, _, _ = judgeClaim(Claim{Name: "tok", Better: "fast", Than: "slow", Metric: "val/mean/pass@1", At: AtTokens}, t.TempDir(), runs)
	if len(v.Seeds) != 0 || !strings.Contains(v.Note, "seed 1: fast: its metrics do not give tokens generated") {
		t.Errorf("tokens without perf metrics: seeds %v note %q", v.Seeds, v.Note)
	}
}

func TestParseClaimAt(t *testing.T) {
	spec := func(claim string) string {
		return "base: {seed: 1}\nseeds: [1]\narms: [{name: a}, {name: b}]\nclaims:\n  - " + claim + "\n"
	}
	for _, c := range []struct {
		claim, err string
	}{
		{`{name: x, better: a, than: b, metric: val/mean/pass@1, at: respones}`, `claims[0].at: unknown value "respones", did you mean "responses"?`},
		{`{name: x, better: a, than: b, metric: val/mean/pass@1, at_value: 100}`, `claims[0].at_value: needs at: responses, tokens or wall`},
		{`{name: x, better: a, than: b, metric: val/mean/pass@1, at: responses, at_value: 0}`, `claims[0].at_value: want a finite point > 0`},
		{`{name: x, better: a, than: b, metric: val/mean/pass@1, at: tokens, window: 3}`, `claims[0].window: a claim at equal tokens generated compares one interpolated value per seed`},
		{`{name: x, better: a, than: b, metric: rollout/entropy, at: wall}`, `claims[0].at: judges evaluations (val/* metrics) at equal compute; rollout/entropy is not one`},
	} {
		_, err := ParseSpec([]byte(spec(c.claim)), "b.yaml")
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: error %v, want %q", c.claim, err, c.err)
		}
	}
	hash := func(claim string) string {
		t.Helper()
		s, err := ParseSpec([]byte(spec(claim)), "b.yaml")
		if err != nil {
			t.Fatal(err)
		}
		return claimHash(s.Claims[0])
	}
	plain := hash(`{name: x, better: a, than: b, metric: val/mean/pass@1}`)
	if got := hash(`{name: x, better: a, than: b, metric: val/mean/pass@1, at: steps}`); got != plain {
		t.Error("at: steps, the default spelled out, changed the claim's hash")
	}
	resp := hash(`{name: x, better: a, than: b, metric: val/mean/pass@1, at: responses}`)
	for _, h := range []string{resp, hash(`{name: x, better: a, than: b, metric: val/mean/pass@1, at: responses, at_value: 100}`),
		hash(`{name: x, better: a, than: b, metric: val/mean/pass@1, at: tokens}`)} {
		if h == plain {
			t.Error("a claim at equal compute hashes as the claim at equal steps")
		}
	}
	if resp == hash(`{name: x, better: a, than: b, metric: val/mean/pass@1, at: responses, at_value: 100}`) {
		t.Error("at_value does not change the hash")
	}
}

// Claims without at hash as they did when the committed benches
// registered them: every claim of the leaderboard rerun is registered.
func TestClaimHashUnchanged(t *testing.T) {
	spec, err := Load("leaderboard-rerun.yaml")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join("..", "docs", "results", "leaderboard", "rerun", ClaimsFile))
	if err != nil {
		t.Fatal(err)
	}
	var reg registration
	if err := json.Unmarshal(data, &reg); err != nil {
		t.Fatal(err)
	}
	for _, c := range spec.Claims {
		if reg.Claims[c.Name] != claimHash(c) {
			t.Errorf("claim %q: hash %s, registered %s", c.Name, claimHash(c), reg.Claims[c.Name])
		}
	}
}

// docsExample is the bench file of docs/bench.md's "Claims at equal
// compute".
func docsExample(t *testing.T) []byte {
	t.Helper()
	md, err := os.ReadFile(filepath.Join("..", "docs", "bench.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)### Claims at equal compute\n.*?```yaml\n(.*?)```").FindSubmatch(md)
	if m == nil {
		t.Fatal("docs/bench.md: no yaml block under \"### Claims at equal compute\"")
	}
	return m[1]
}

// The docs' example parses and every arm's config is valid; it is the
// quick preset's base and seeds with eval.every_responses.
func TestDocsEqualResponsesExample(t *testing.T) {
	spec, err := ParseSpec(docsExample(t), "quick-responses.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := spec.Validate(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	quick, err := Load("quick.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(spec.Seeds, quick.Seeds) || spec.BaseEval != quick.BaseEval || len(spec.Claims) != 1 || spec.Claims[0].At != AtResponses {
		t.Errorf("the example: seeds %v base_eval %v claims %+v", spec.Seeds, spec.BaseEval, spec.Claims)
	}
	cfg, err := spec.ArmConfig(t.TempDir(), spec.Arms[0], 1)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Eval.EveryResponses == 0 {
		t.Error("the example's arms do not set eval.every_responses")
	}
}

// A smoke-sized bench with an equal-responses claim trains, evaluates on
// the responses schedule and judges the claim on 3 seeds: each seed's
// point is grpo's total (the arm that generated less), and its effect is
// dapo's and grpo's evaluations interpolated there, recomputed here from
// the runs' metrics.jsonl.
func TestBenchEqualResponses(t *testing.T) {
	dir := t.TempDir()
	spec, err := ParseSpec([]byte(`
base:
  seed: 1
  task: {name: arith, levels: [1], eval_n: 6, eval_sets: [{name: l1, level: 1}]}
  model: {layers: 1, d_model: 16, heads: 2, max_len: 48, checkpoint: ""}
  backend: {engine: go}
  rollout: {n: 4, max_response_tokens: 12}
  train: {steps: 3, prompts_per_step: 2, checkpoint_every: 3}
  eval: {every: 0, every_responses: 8, k: 2}
seeds: [1, 2, 3]
arms:
  - {name: grpo, config: {algorithm: {name: grpo}}}
  - {name: dapo, config: {algorithm: {name: grpo}, train: {dynamic_sampling: {enabled: true, max_extra_batches: 2}}}}
claims:
  - {name: "dapo at equal responses", better: dapo, than: grpo, metric: val/mean/avg@2, at: responses}
`), "eq.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var log syncBuffer
	if err := Run(context.Background(), spec, Options{Dir: dir, Exe: cdeRun, Output: &log, Log: zerolog.New(&log), Jobs: 2}); err != nil {
		t.Fatalf("bench: %v\n%s", err, log.String())
	}
	data, err := os.ReadFile(filepath.Join(dir, VerdictsFile))
	if err != nil {
		t.Fatal(err)
	}
	var vs []ClaimVerdict
	if err := json.Unmarshal(data, &vs); err != nil {
		t.Fatal(err)
	}
	v := vs[0]
	if len(v.Seeds) != 3 || v.At != AtResponses || len(v.AtPoints) != 3 || v.Verdict == "" {
		t.Fatalf("verdict %+v", v)
	}
	// (x, value) of each evaluation: x the responses generated before the
	// row's step, from the rows' own counts.
	curve := func(arm string, seed uint64) (xs, ys []float64) {
		rows, err := readMetricRows(filepath.Join(RunDir(dir, arm, seed), "metrics.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		before := 0.0
		for _, row := range rows {
			if y, ok := row["val/mean/avg@2"]; ok {
				xs, ys = append(xs, before), append(ys, y)
			}
			before += row["train/generated_responses"]
		}
		return xs, ys
	}
	at := func(xs, ys []float64, x float64) float64 {
		for i := 1; i < len(xs); i++ {
			if xs[i-1] <= x && x <= xs[i] {
				return ys[i-1] + (ys[i]-ys[i-1])*(x-xs[i-1])/(xs[i]-xs[i-1])
			}
		}
		t.Fatalf("%v outside %v", x, xs)
		return 0
	}
	for i, seed := range v.Seeds {
		gx, gy := curve("grpo", seed)
		dx, dy := curve("dapo", seed)
		// grpo: 8 responses a step, every 8 -> every step boundary, and
		// 24 in all; dapo draws at least as many a step.
		if !slices.Equal(gx, []float64{0, 8, 16, 24}) {
			t.Errorf("seed %d: grpo evaluated at %v responses, want 0, 8, 16, 24", seed, gx)
		}
		if dx[len(dx)-1] < 24 || v.AtPoints[i] != 24 {
			t.Errorf("seed %d: dapo's last evaluation at %v, point %v (want 24, grpo's total)", seed, dx[len(dx)-1], v.AtPoints[i])
		}
		want := at(dx, dy, 24) - gy[len(gy)-1]
		if math.Abs(v.PerSeed[i]-want) > 1e-12 {
			t.Errorf("seed %d: effect %v, want %v", seed, v.PerSeed[i], want)
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, "results.md"))
	if !strings.Contains(string(md), "| dapo at equal responses | val/mean/avg@2 (at equal responses generated) | dapo | grpo | 3 | seeds |") {
		t.Errorf("results.md lacks the claim's row:\n%s", md)
	}
}
