package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
)

// Agreement compares the verdicts of the same claims judged on two
// testbeds: does an arm that beats its baseline on one beat it on the
// other, and do the arms' effects rank alike? It reads only verdicts.json
// files; it decides nothing the files did not.
type Agreement struct {
	LabelA, LabelB string
	// Metrics holds one entry per metric pair, in the order of A's first
	// claim on each metric.
	Metrics []AgreeMetric
	// OnlyA and OnlyB are the claims of one side with no match on the
	// other (by arms and mapped metric), as "better vs than on metric".
	OnlyA, OnlyB []string
	// ReplacedA and ReplacedB are what ReadVerdicts replaced on each side
	// (the caller sets them; the report lists them).
	ReplacedA, ReplacedB []string
}

// AgreeMetric is the comparison on one metric (MetricA on A's testbed,
// MetricB on B's).
type AgreeMetric struct {
	MetricA, MetricB string
	Rows             []AgreeRow
	// Signs is the rows whose effects are both nonzero (0 up to rounding,
	// RoundingTol, counts as 0); SignsAgree those
	// with the same sign; PSign the one-sided exact binomial probability of
	// at least SignsAgree agreements among Signs by chance (each sign a fair
	// coin, independent of the other testbed's).
	Signs, SignsAgree int
	PSign             float64
	// Rho is Spearman's rank correlation of the rows' effects (average
	// ranks for ties; NaN when either side's effects are all equal or
	// there are fewer than 3 rows). RhoLow and RhoHigh are its 95%
	// interval by Fisher's z with Bonett and Wright's standard error,
	// sqrt((1 + rho^2/2) / (n - 3)) (NaN below 4 rows or at |rho| = 1):
	// it treats the arms as a sample of methods. PRho is the one-sided
	// permutation probability of a correlation at least Rho when the
	// pairing of effects is random (exact over all n! pairings up to
	// 10 rows, else from PermDraws random ones); PRhoExact says which.
	Rho, RhoLow, RhoHigh, PRho float64
	PRhoExact                  bool
	// Conclusive is the rows whose verdicts (after the family's
	// correction) are "held" or "not held" on both testbeds;
	// ConclusiveAgree those with the same verdict.
	Conclusive, ConclusiveAgree int
}

// AgreeRow is one claim judged on both testbeds.
type AgreeRow struct {
	Better, Than string
	A, B         ClaimVerdict
}

// Agrees says whether the two effects are nonzero with the same sign, and
// whether they have a sign at all.
func (r AgreeRow) Agrees() (agree, signed bool) {
	a, b := effect(r.A), effect(r.B)
	if a == 0 || b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return false, false
	}
	return (a > 0) == (b > 0), true
}

// PermDraws is how many random pairings estimate PRho above 10 rows.
const PermDraws = 200000

// effect is v's effect with a rounding residue taken as 0 (effectOf), so
// an exact rational 0 counts as no sign and ranks with the other zeros.
func effect(v ClaimVerdict) float64 { return effectOf(v) }

// ReadVerdicts reads and concatenates verdicts.json files. A claim (by its
// arms and metric) given twice is an error naming both files, unless
// laterWins: then the later file's claim replaces the earlier one (a rerun
// of some arms), and replaced says which, as "claim (FILE replaces FILE)".
func ReadVerdicts(laterWins bool, paths ...string) (vs []ClaimVerdict, replaced []string, err error) {
	at := map[string]int{}
	from := map[string]string{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, nil, err
		}
		var file []ClaimVerdict
		if err := json.Unmarshal(data, &file); err != nil {
			return nil, nil, fmt.Errorf("%s: not a verdicts.json (a JSON array of claim verdicts): %v", p, err)
		}
		for i, v := range file {
			if len(v.Arms) != 2 || v.Metric == "" {
				return nil, nil, fmt.Errorf("%s: entry %d (%q) has no arms [better, than] or no metric", p, i, v.Claim)
			}
			k := v.Arms[0] + "\x00" + v.Arms[1] + "\x00" + v.Metric
			j, seen := at[k]
			switch {
			case seen && from[k] == p:
				return nil, nil, fmt.Errorf("%s: claim %q (%s vs %s on %s) is in the file twice", p, v.Claim, v.Arms[0], v.Arms[1], v.Metric)
			case seen && !laterWins:
				return nil, nil, fmt.Errorf("%s: claim %q (%s vs %s on %s) is also in %s (with later-wins the later file's replaces it)", p, v.Claim, v.Arms[0], v.Arms[1], v.Metric, from[k])
			case seen:
				replaced = append(replaced, fmt.Sprintf("%s (%s replaces %s)", v.Claim, p, from[k]))
				vs[j] = v
			default:
				at[k] = len(vs)
				vs = append(vs, v)
			}
			from[k] = p
		}
	}
	return vs, replaced, nil
}

// Agree pairs the claims of a and b that compare the same two arms on the
// same metric (A's metric m is B's metricMap[m] when mapped, else m) and
// measures their agreement per metric.
func Agree(labelA, labelB string, a, b []ClaimVerdict, metricMap map[string]string) *Agreement {
	ag := &Agreement{LabelA: labelA, LabelB: labelB}
	key := func(v ClaimVerdict, metric string) string { return v.Arms[0] + "\x00" + v.Arms[1] + "\x00" + metric }
	bByKey := map[string]ClaimVerdict{}
	for _, v := range b {
		bByKey[key(v, v.Metric)] = v
	}
	used := map[string]bool{}
	index := map[string]int{}
	for _, va := range a {
		mb := va.Metric
		if m, ok := metricMap[va.Metric]; ok {
			mb = m
		}
		vb, ok := bByKey[key(va, mb)]
		if !ok {
			ag.OnlyA = append(ag.OnlyA, fmt.Sprintf("%s vs %s on %s", va.Arms[0], va.Arms[1], va.Metric))
			continue
		}
		used[key(vb, vb.Metric)] = true
		i, ok := index[va.Metric]
		if !ok {
			i = len(ag.Metrics)
			index[va.Metric] = i
			ag.Metrics = append(ag.Metrics, AgreeMetric{MetricA: va.Metric, MetricB: mb})
		}
		ag.Metrics[i].Rows = append(ag.Metrics[i].Rows, AgreeRow{Better: va.Arms[0], Than: va.Arms[1], A: va, B: vb})
	}
	for _, v := range b {
		if !used[key(v, v.Metric)] {
			ag.OnlyB = append(ag.OnlyB, fmt.Sprintf("%s vs %s on %s", v.Arms[0], v.Arms[1], v.Metric))
		}
	}
	for i := range ag.Metrics {
		ag.Metrics[i].measure()
	}
	return ag
}

func (m *AgreeMetric) measure() {
	var xs, ys []float64
	for _, r := range m.Rows {
		if agree, signed := r.Agrees(); signed {
			m.Signs++
			if agree {
				m.SignsAgree++
			}
		}
		va, vb := r.A.VerdictHolm, r.B.VerdictHolm
		if conclusive(va) && conclusive(vb) {
			m.Conclusive++
			if va == vb {
				m.ConclusiveAgree++
			}
		}
		x, y := effect(r.A), effect(r.B)
		if !math.IsNaN(x) && !math.IsNaN(y) {
			xs, ys = append(xs, x), append(ys, y)
		}
	}
	m.PSign = binomialUpper(m.Signs, m.SignsAgree)
	m.Rho, m.RhoLow, m.RhoHigh, m.PRho = math.NaN(), math.NaN(), math.NaN(), math.NaN()
	if len(xs) < 3 {
		return
	}
	m.Rho = Spearman(xs, ys)
	if math.IsNaN(m.Rho) {
		return
	}
	m.RhoLow, m.RhoHigh = SpearmanInterval(m.Rho, len(xs), 0.95)
	m.PRho, m.PRhoExact = spearmanPermP(xs, ys, m.Rho)
}

func conclusive(v string) bool { return v == "held" || v == "not held" }

// binomialUpper is P(X >= k) for X ~ Binomial(n, 1/2); 1 when n is 0.
func binomialUpper(n, k int) float64 {
	if n == 0 {
		return 1
	}
	p := 0.0
	for j := k; j <= n; j++ {
		lc, _ := math.Lgamma(float64(n + 1))
		l1, _ := math.Lgamma(float64(j + 1))
		l2, _ := math.Lgamma(float64(n - j + 1))
		p += math.Exp(lc - l1 - l2 - float64(n)*math.Ln2)
	}
	return math.Min(p, 1)
}

// ranks are the average ranks (1-based) of xs: tied values share the mean
// of the ranks they span. Values equal up to rounding (RoundingTol at
// their own scale: two effects of 1/1500 computed along different paths)
// are tied.
func ranks(xs []float64) []float64 {
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool { return xs[idx[i]] < xs[idx[j]] })
	r := make([]float64, len(xs))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && belowRounding(xs[idx[j+1]]-xs[idx[i]], max(math.Abs(xs[idx[j+1]]), math.Abs(xs[idx[i]]))) {
			j++
		}
		avg := float64(i+j)/2 + 1
		for k := i; k <= j; k++ {
			r[idx[k]] = avg
		}
		i = j + 1
	}
	return r
}

// pearson is the correlation of xs and ys; NaN when either is constant.
func pearson(xs, ys []float64) float64 {
	n := float64(len(xs))
	mx, my := 0.0, 0.0
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx, my = mx/n, my/n
	sxy, sxx, syy := 0.0, 0.0, 0.0
	for i := range xs {
		dx, dy := xs[i]-mx, ys[i]-my
		sxy += dx * dy
		sxx += dx * dx
		syy += dy * dy
	}
	if sxx == 0 || syy == 0 {
		return math.NaN()
	}
	return sxy / math.Sqrt(sxx*syy)
}

// Spearman is the rank correlation of xs and ys: the Pearson correlation
// of their average ranks. NaN when either side is constant.
func Spearman(xs, ys []float64) float64 {
	return pearson(ranks(xs), ranks(ys))
}

// SpearmanInterval is rho's two-sided interval at level conf by Fisher's
// z transform with Bonett and Wright's (2000) standard error for
// Spearman's correlation, sqrt((1 + rho^2/2) / (n - 3)); NaN for n < 4 or
// |rho| = 1.
func SpearmanInterval(rho float64, n int, conf float64) (low, high float64) {
	if n < 4 || math.Abs(rho) >= 1 || math.IsNaN(rho) {
		return math.NaN(), math.NaN()
	}
	z := math.Atanh(rho)
	se := math.Sqrt((1 + rho*rho/2) / float64(n-3))
	q := math.Sqrt2 * math.Erfinv(conf)
	return math.Tanh(z - q*se), math.Tanh(z + q*se)
}

// spearmanPermP is the one-sided probability that a random pairing of ys
// with xs gives a rank correlation at least rho (ties within 1e-12 count),
// exact over every permutation up to 10 values, else over PermDraws
// random permutations (seeded, so it is the same on every run).
func spearmanPermP(xs, ys []float64, rho float64) (p float64, exact bool) {
	rx, ry := ranks(xs), ranks(ys)
	perm := make([]float64, len(ry))
	hits, total := 0, 0
	count := func() {
		total++
		if pearson(rx, perm) >= rho-1e-12 {
			hits++
		}
	}
	if len(ry) <= 10 {
		copy(perm, ry)
		permute(perm, 0, count)
		return float64(hits) / float64(total), true
	}
	rng := rand.New(rand.NewPCG(47, 2))
	for d := 0; d < PermDraws; d++ {
		copy(perm, ry)
		rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		count()
	}
	// The observed pairing counts as one of the draws.
	return float64(hits+1) / float64(total+1), false
}

// permute calls f once for every ordering of xs[k:], by swapping each
// element into place k in turn and restoring it on return.
func permute(xs []float64, k int, f func()) {
	if k >= len(xs)-1 {
		f()
		return
	}
	for i := k; i < len(xs); i++ {
		xs[k], xs[i] = xs[i], xs[k]
		permute(xs, k+1, f)
		xs[k], xs[i] = xs[i], xs[k]
	}
}

// Markdown is the agreement as a report: per metric, each arm's effect,
// interval and verdict on both testbeds, then the metric's sign agreement,
// verdict agreement and rank correlation; then the claims with no match.
func (ag *Agreement) Markdown() string {
	var b strings.Builder
	a, bl := ag.LabelA, ag.LabelB
	fmt.Fprintf(&b, "Effects are each claim's `delta_mean` (claimed-better arm minus its baseline, in the metric's units) with its 95%% interval (unadjusted); verdicts are after the family's Holm correction (`verdict_holm`).\n\n")
	fmt.Fprintf(&b, "| metric (%s / %s) | arms | signs agree | p (signs, chance) | both conclusive, same verdict | Spearman rho [95%% interval] | p (rho, permutation) |\n|---|---|---|---|---|---|---|\n", a, bl)
	totS, totA, totC, totCA := 0, 0, 0, 0
	for _, m := range ag.Metrics {
		fmt.Fprintf(&b, "| %s | %d | %d / %d | %s | %d / %d | %s | %s |\n", metricPair(m), len(m.Rows), m.SignsAgree, m.Signs, fmtP4(m.PSign),
			m.ConclusiveAgree, m.Conclusive, rhoText(m), permText(m))
		totS, totA, totC, totCA = totS+m.Signs, totA+m.SignsAgree, totC+m.Conclusive, totCA+m.ConclusiveAgree
	}
	fmt.Fprintf(&b, "| all | | %d / %d | | %d / %d | | |\n\n", totA, totS, totCA, totC)
	b.WriteString("The sign test treats each effect's sign as a fair coin independent of the other testbed's; the rows of all metrics share runs, so no p value is given for the pooled count. The rank correlation's interval treats the arms as a sample of methods (Fisher's z, Bonett and Wright's standard error); with few arms it is wide and approximate.\n")
	for _, m := range ag.Metrics {
		fmt.Fprintf(&b, "\n### %s\n\n| arm | vs | %s effect [95%% interval] | %s verdict | %s effect [95%% interval] | %s verdict | sign |\n|---|---|---|---|---|---|---|\n",
			metricPair(m), a, a, bl, bl)
		rows := append([]AgreeRow(nil), m.Rows...)
		sort.SliceStable(rows, func(i, j int) bool { return effect(rows[i].A) > effect(rows[j].A) })
		for _, r := range rows {
			sign := "differs"
			if agree, signed := r.Agrees(); !signed {
				sign = "a zero effect"
			} else if agree {
				sign = "agrees"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", r.Better, r.Than, effectText(r.A), r.A.VerdictHolm, effectText(r.B), r.B.VerdictHolm, sign)
		}
	}
	if len(ag.ReplacedA)+len(ag.ReplacedB) > 0 {
		b.WriteString("\n### Claims replaced by a later file\n\n")
		for _, r := range ag.ReplacedA {
			fmt.Fprintf(&b, "- %s: %s\n", a, r)
		}
		for _, r := range ag.ReplacedB {
			fmt.Fprintf(&b, "- %s: %s\n", bl, r)
		}
	}
	if len(ag.OnlyA)+len(ag.OnlyB) > 0 {
		b.WriteString("\n### Claims judged on one testbed only\n\n")
		if len(ag.OnlyA) > 0 {
			fmt.Fprintf(&b, "- %s only: %s\n", a, strings.Join(ag.OnlyA, "; "))
		}
		if len(ag.OnlyB) > 0 {
			fmt.Fprintf(&b, "- %s only: %s\n", bl, strings.Join(ag.OnlyB, "; "))
		}
	}
	return b.String()
}

func metricPair(m AgreeMetric) string {
	if m.MetricA == m.MetricB {
		return "`" + m.MetricA + "`"
	}
	return "`" + m.MetricA + "` / `" + m.MetricB + "`"
}

func effectText(v ClaimVerdict) string {
	if v.DeltaMean == nil {
		return "-"
	}
	if v.CILow == nil || v.CIHigh == nil {
		return fmt.Sprintf("%+.4g", effect(v))
	}
	return fmt.Sprintf("%+.4g [%+.4g, %+.4g]", effect(v), *v.CILow, *v.CIHigh)
}

func rhoText(m AgreeMetric) string {
	if math.IsNaN(m.Rho) {
		return "undefined"
	}
	if math.IsNaN(m.RhoLow) {
		return fmt.Sprintf("%+.2f", m.Rho)
	}
	return fmt.Sprintf("%+.2f [%+.2f, %+.2f]", m.Rho, m.RhoLow, m.RhoHigh)
}

func permText(m AgreeMetric) string {
	if math.IsNaN(m.PRho) {
		return "-"
	}
	if m.PRhoExact {
		return fmtP4(m.PRho) + " (exact)"
	}
	return fmtP4(m.PRho)
}

func fmtP4(p float64) string {
	if p < 0.0001 {
		return "< 0.0001"
	}
	return fmt.Sprintf("%.4f", p)
}
