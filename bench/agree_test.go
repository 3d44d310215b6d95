package bench

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSpearman(t *testing.T) {
	for _, c := range []struct {
		name   string
		xs, ys []float64
		want   float64
	}{
		// Ranks 1 4 2 3 5 against 1 3 2 5 4: sum of squared rank
		// differences 6, so 1 - 6*6/(5*24) = 0.7.
		{"no ties", []float64{0.1, 0.4, 0.2, 0.3, 0.5}, []float64{1, 3, 2, 5, 4}, 0.7},
		// Ranks 1 2.5 2.5 4 against 1 2 3 4: centred, (-1.5 0 0 1.5) and
		// (-1.5 -0.5 0.5 1.5); 4.5 / sqrt(4.5 * 5) = 3/sqrt(10).
		{"a tie", []float64{1, 2, 2, 3}, []float64{1, 2, 3, 4}, 3 / math.Sqrt(10)},
		// The same tie with one of the equal values a rounding residue
		// away (0.1 + 0.2 is 0.30000000000000004): still a tie.
		{"a tie up to rounding", []float64{0.1, 0.1 + 0.2, 0.3, 0.5}, []float64{1, 2, 3, 4}, 3 / math.Sqrt(10)},
		{"reversed", []float64{3, 2, 1}, []float64{-1, 0, 5}, -1},
		{"monotone, not linear", []float64{1, 2, 3, 4}, []float64{1, 10, 100, 1000}, 1},
	} {
		if got := Spearman(c.xs, c.ys); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s: Spearman = %v, want %v", c.name, got, c.want)
		}
	}
	if got := Spearman([]float64{1, 1, 1}, []float64{1, 2, 3}); !math.IsNaN(got) {
		t.Errorf("constant side: Spearman = %v, want NaN", got)
	}
}

func TestSpearmanInterval(t *testing.T) {
	// rho 0.7, n 9: z = atanh(0.7), se = sqrt((1 + 0.245) / 6), 1.96 z
	// either side, back through tanh (a plain Python loop gave these).
	lo, hi := SpearmanInterval(0.7, 9, 0.95)
	if math.Abs(lo-(-0.025500027938716363)) > 1e-9 || math.Abs(hi-0.9425149143101316) > 1e-9 {
		t.Errorf("interval = [%v, %v], want [-0.0255000279, 0.9425149143]", lo, hi)
	}
	for _, c := range []struct {
		rho float64
		n   int
	}{{0.5, 3}, {1, 9}, {-1, 9}, {math.NaN(), 9}} {
		if lo, hi := SpearmanInterval(c.rho, c.n, 0.95); !math.IsNaN(lo) || !math.IsNaN(hi) {
			t.Errorf("rho %v n %d: interval [%v, %v], want undefined", c.rho, c.n, lo, hi)
		}
	}
}

func TestSpearmanPermP(t *testing.T) {
	// Of the 120 pairings of 5 ranks, 14 have a sum of squared rank
	// differences at most 6 (rho >= 0.7): the identity, 4 adjacent swaps,
	// 3 pairs of disjoint adjacent swaps, 6 rotations of three neighbours.
	p, exact := spearmanPermP([]float64{0.1, 0.4, 0.2, 0.3, 0.5}, []float64{1, 3, 2, 5, 4}, 0.7)
	if !exact || math.Abs(p-14.0/120) > 1e-12 {
		t.Errorf("p = %v (exact %v), want 14/120", p, exact)
	}
	// Above 10 rows it draws: a perfect correlation of 12 rows has exact
	// probability 1/12!, so the estimate is the floor 1/(draws+1).
	xs := make([]float64, 12)
	for i := range xs {
		xs[i] = float64(i)
	}
	p, exact = spearmanPermP(xs, xs, 1)
	if exact || math.Abs(p-1.0/(PermDraws+1)) > 1e-15 {
		t.Errorf("12 rows: p = %v (exact %v), want 1/%d", p, exact, PermDraws+1)
	}
}

func TestBinomialUpper(t *testing.T) {
	for _, c := range []struct {
		n, k int
		want float64
	}{
		{9, 7, 46.0 / 512}, // C(9,7)+C(9,8)+C(9,9) = 36+9+1
		{9, 0, 1},
		{4, 4, 1.0 / 16},
		{0, 0, 1},
		{10, 5, 638.0 / 1024}, // 252+210+120+45+10+1
	} {
		if got := binomialUpper(c.n, c.k); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("P(X >= %d | n %d) = %v, want %v", c.k, c.n, got, c.want)
		}
	}
}

func verdict(better, metric string, delta, lo, hi float64, v string) ClaimVerdict {
	return ClaimVerdict{Claim: better + " beats grpo on " + metric, Metric: metric, Arms: []string{better, "grpo"},
		DeltaMean: &delta, CILow: &lo, CIHigh: &hi, Verdict: v, VerdictHolm: v}
}

func TestAgree(t *testing.T) {
	a := []ClaimVerdict{
		verdict("ppo", "pass@256", 0.03, 0.01, 0.05, "held"),
		verdict("dapo", "pass@256", -0.02, -0.03, -0.01, "not held"),
		verdict("maxrl", "pass@256", 0.01, -0.01, 0.03, "inconclusive"),
		verdict("same", "pass@256", 0, 0, 0, "not held"),
		verdict("ppo", "entropy", 0.1, 0.05, 0.15, "held"),
		verdict("ppo", "pass@1", 0.1, 0.05, 0.15, "held"), // not judged on b
	}
	b := []ClaimVerdict{
		verdict("ppo", "pass@32", 0.05, 0.02, 0.08, "held"),
		verdict("dapo", "pass@32", 0.01, 0.005, 0.02, "held"),
		verdict("maxrl", "pass@32", 0.02, -0.01, 0.05, "inconclusive"),
		verdict("same", "pass@32", 0.03, -0.01, 0.07, "inconclusive"),
		verdict("ppo", "entropy", -0.2, -0.3, -0.1, "not held"),
		verdict("ppo", "pass@256", 0.5, 0.4, 0.6, "held"), // mapped away: unmatched
		verdict("rare", "entropy", 0.1, 0.0, 0.2, "inconclusive"),
	}
	ag := Agree("countdown", "wordprob", a, b, map[string]string{"pass@256": "pass@32"})
	if len(ag.Metrics) != 2 {
		t.Fatalf("%d metrics, want 2 (pass@256, entropy): %+v", len(ag.Metrics), ag.Metrics)
	}
	pk := ag.Metrics[0]
	if pk.MetricA != "pass@256" || pk.MetricB != "pass@32" || len(pk.Rows) != 4 {
		t.Fatalf("first metric %s/%s with %d rows", pk.MetricA, pk.MetricB, len(pk.Rows))
	}
	// Signs: ppo +/+, dapo -/+, maxrl +/+; "same" has a zero effect.
	if pk.Signs != 3 || pk.SignsAgree != 2 || math.Abs(pk.PSign-0.5) > 1e-12 {
		t.Errorf("signs %d/%d p %v, want 2/3 and P(X >= 2 | 3) = 4/8", pk.SignsAgree, pk.Signs, pk.PSign)
	}
	// Conclusive on both: ppo (held, held), dapo (not held, held).
	if pk.Conclusive != 2 || pk.ConclusiveAgree != 1 {
		t.Errorf("conclusive %d/%d, want 1/2", pk.ConclusiveAgree, pk.Conclusive)
	}
	// Effects a: 0.03 -0.02 0.01 0 -> ranks 4 1 3 2; b: 0.05 0.01 0.02
	// 0.03 -> 4 1 2 3; sum d^2 = 2, rho = 1 - 6*2/(4*15) = 0.8.
	if math.Abs(pk.Rho-0.8) > 1e-12 || !pk.PRhoExact {
		t.Errorf("rho %v (exact p %v), want 0.8", pk.Rho, pk.PRhoExact)
	}
	ent := ag.Metrics[1]
	if ent.Signs != 1 || ent.SignsAgree != 0 || ent.Conclusive != 1 || ent.ConclusiveAgree != 0 || !math.IsNaN(ent.Rho) {
		t.Errorf("entropy: %+v", ent)
	}
	if strings.Join(ag.OnlyA, ";") != "ppo vs grpo on pass@1" {
		t.Errorf("OnlyA = %q", ag.OnlyA)
	}
	if strings.Join(ag.OnlyB, ";") != "ppo vs grpo on pass@256;rare vs grpo on entropy" {
		t.Errorf("OnlyB = %q", ag.OnlyB)
	}
	md := ag.Markdown()
	for _, want := range []string{
		"| `pass@256` / `pass@32` | 4 | 2 / 3 | 0.5000 | 1 / 2 | +0.80 [",
		"| dapo | grpo | -0.02 [-0.03, -0.01] | not held | +0.01 [+0.005, +0.02] | held | differs |",
		"| same | grpo | +0 [+0, +0] | not held | +0.03 [-0.01, +0.07] | inconclusive | a zero effect |",
		"| all | | 2 / 4 | | 1 / 3 | | |",
		"- wordprob only: ppo vs grpo on pass@256; rare vs grpo on entropy",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

func TestReadVerdicts(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, vs any) string {
		p := filepath.Join(dir, name)
		data, _ := json.Marshal(vs)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	one := write("one.json", []ClaimVerdict{verdict("ppo", "m", 1, 0, 2, "held")})
	two := write("two.json", []ClaimVerdict{verdict("dapo", "m", 1, 0, 2, "held")})
	vs, _, err := ReadVerdicts(false, one, two)
	if err != nil || len(vs) != 2 {
		t.Fatalf("ReadVerdicts: %d verdicts, %v", len(vs), err)
	}
	dup := write("dup.json", []ClaimVerdict{verdict("ppo", "m", 3, 0, 2, "held")})
	if _, _, err := ReadVerdicts(false, one, dup); err == nil || !strings.Contains(err.Error(), "dup.json") || !strings.Contains(err.Error(), "one.json") {
		t.Errorf("a claim in two files: %v, want both files named", err)
	}
	vs, replaced, err := ReadVerdicts(true, one, two, dup)
	if err != nil || len(vs) != 2 || *vs[0].DeltaMean != 3 || len(replaced) != 1 || !strings.Contains(replaced[0], "dup.json replaces") {
		t.Errorf("later wins: %d verdicts (first effect %v), replaced %q, %v; want dup.json's ppo in one.json's place", len(vs), *vs[0].DeltaMean, replaced, err)
	}
	twice := write("twice.json", []ClaimVerdict{verdict("ppo", "m", 1, 0, 2, "held"), verdict("ppo", "m", 2, 0, 2, "held")})
	if _, _, err := ReadVerdicts(true, twice); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a claim twice in one file: %v", err)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"claim": 1}`), 0o644)
	if _, _, err := ReadVerdicts(false, bad); err == nil || !strings.Contains(err.Error(), "bad.json") {
		t.Errorf("not an array: %v, want the file named", err)
	}
	noArms := write("noarms.json", []map[string]any{{"claim": "x", "metric": "m"}})
	if _, _, err := ReadVerdicts(false, noArms); err == nil || !strings.Contains(err.Error(), "entry 0") {
		t.Errorf("no arms: %v, want the entry named", err)
	}
}

// An effect that is 0 as a rational but a rounding residue in the file
// (dapo's distinct@32 on the transfer bench: per-seed -23/200, 7/100,
// -3/40, 19/200, 1/40, stored as 6.661e-17) has no sign; a small real
// effect keeps its own.
func TestAgreeExactZero(t *testing.T) {
	residue := verdict("dapo", "distinct@32", 6.661338147750939e-17, -0.1162, 0.1162, "inconclusive")
	residue.PerSeed = []float64{-0.11499999999999999, 0.07, -0.07500000000000001, 0.095, 0.025000000000000022}
	small := verdict("ppo", "distinct@32", 1e-6, -0.1, 0.1, "inconclusive")
	for _, c := range []struct {
		name   string
		b      ClaimVerdict
		signed bool
		text   string
	}{
		{"residue", residue, false, "+0 [-0.1162, +0.1162]"},
		{"small effect", small, true, "+1e-06 [-0.1, +0.1]"},
	} {
		a := verdict(c.b.Arms[0], "distinct@32", 0.02, -0.05, 0.09, "inconclusive")
		m := Agree("a", "b", []ClaimVerdict{a}, []ClaimVerdict{c.b}, nil).Metrics[0]
		if _, signed := m.Rows[0].Agrees(); signed != c.signed || (m.Signs == 1) != c.signed {
			t.Errorf("%s: signed %v, signs %d, want %v", c.name, signed, m.Signs, c.signed)
		}
		if got := effectText(c.b); got != c.text {
			t.Errorf("%s: effect %q, want %q", c.name, got, c.text)
		}
	}
}
