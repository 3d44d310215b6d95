package bench

import (
	"fmt"
	"math"
	"sync"

	"gonum.org/v1/gonum/stat/distuv"
)

// PairedSeed is one seed's data for a paired comparison of arm A with its
// baseline B: per unit set (an eval set, say), the per-unit values of A and
// of B on the same units in the same order (A[s][i] and B[s][i] are unit i
// of set s: one held-out problem's pass@k, say). A seed-level metric with no
// units (a training metric) is one set of one unit.
type PairedSeed struct {
	Seed uint64
	A, B [][]float64
}

// seedMetric is the seed's value of an arm: the mean over sets of the mean
// over units (the val/mean/... of the eval).
func seedMetric(sets [][]float64) float64 {
	sum := 0.0
	for _, xs := range sets {
		m := 0.0
		for _, x := range xs {
			m += x
		}
		sum += m / float64(len(xs))
	}
	return sum / float64(len(sets))
}

// Design says how the seeds' problems relate.
type Design int

const (
	// Nested: each seed was evaluated on its own problems (or a claim has
	// one value per seed), so the per-seed effects are independent draws
	// and their spread is the whole error of their mean.
	Nested Design = iota
	// Crossed: every seed was evaluated on the same problems, so a
	// problem's difficulty is shared by all seeds; the spread between
	// seeds cannot see it and it is counted separately.
	Crossed
)

func (d Design) String() string {
	if d == Crossed {
		return "crossed"
	}
	return "nested"
}

// Interval is a paired effect with its t interval.
type Interval struct {
	Delta   float64   // mean over seeds of metric(A) - metric(B)
	PerSeed []float64 // metric(A) - metric(B) per seed, in input order
	// VarSeeds is the per-seed effects' sample variance over S, on
	// DFSeeds = S-1 degrees of freedom; VarProblems (crossed design) the
	// variance the seeds share through their common problems, estimated
	// from the problem and interaction mean squares and floored at 0, on
	// DFProblems (Satterthwaite's for the sets' problem mean squares: P-1
	// with one set; 0 when VarProblems is 0). SE is
	// sqrt(VarSeeds + VarProblems).
	VarSeeds, VarProblems float64
	DFSeeds, DFProblems   float64
	SE                    float64
	Low, High             float64 // Delta -/+ HalfWidth(Level)
	Level                 float64 // 0.95 for a 95% interval
}

// HalfWidth is the interval's half-width at two-sided level conf:
//
//	sqrt(t(q, DFSeeds)^2 VarSeeds + t(q, DFProblems)^2 VarProblems), q = (1+conf)/2
//
// each part with its own t quantile (Banerjee's interval for a sum of two
// independently estimated variances, which is conservative whatever their
// ratio; Satterthwaite's single degrees of freedom for the sum is not when
// the seeds' part has few of them). Without a problem part it is the t
// interval of a mean, t(q, S-1) SE.
func (iv Interval) HalfWidth(conf float64) float64 {
	q := (1 + conf) / 2
	h := 0.0
	if iv.VarSeeds > 0 {
		t := tQuantile(q, iv.DFSeeds)
		h += t * t * iv.VarSeeds
	}
	if iv.VarProblems > 0 {
		t := tQuantile(q, iv.DFProblems)
		h += t * t * iv.VarProblems
	}
	return math.Sqrt(h)
}

// PairedInterval is the effect of A over B (the mean over seeds of each
// seed's metric(A) - metric(B), the metric the mean over sets of the mean
// over units) and its two-sided interval at level conf (0.95: a 95%
// interval).
//
// Nested design (and one value per seed): the per-seed effects r_s are
// independent, so Var(Delta) is estimated by their sample variance over S
// with S-1 degrees of freedom, and the interval is the t interval of a
// mean.
//
// Crossed design: d[s][p] = A - B of seed s on problem p of set j is
// modelled as the effect plus a seed term, a problem term shared by every
// seed, and an interaction, all independent (a two-way random model per
// set). The seeds' sample variance over S estimates the seed and
// interaction parts of Var(Delta) but not the shared problem term, which
// it cannot see; that part is estimated per set from the mean squares of
// problems (MS_P, P_j-1 df) and of the interaction (MS_R, (S-1)(P_j-1) df)
// as (MS_P - MS_R)/S per problem, weighted by (1/(J P_j))^2 for each of
// the set's P_j problems (J sets), floored at 0:
//
//	VarSeeds    = s_r^2 / S                                 (S-1 df)
//	VarProblems = max(0, sum_j (MS_P,j - MS_R,j) / (J^2 P_j S))  (the MS_P,j's df)
//
// and the half-width is HalfWidth's. A set with one unit adds no problem
// part.
//
// It is an error when seeds has fewer than 2 entries, a seed's A and B
// differ in sets or units, a set has no units, or (Crossed) two seeds
// differ in sets or units.
func PairedInterval(seeds []PairedSeed, conf float64, design Design) (Interval, error) {
	S := len(seeds)
	if S < 2 {
		return Interval{}, fmt.Errorf("interval: %d seed(s): want at least 2", S)
	}
	if !(conf > 0 && conf < 1) {
		return Interval{}, fmt.Errorf("interval: level %v: want 0 < level < 1", conf)
	}
	for _, s := range seeds {
		if len(s.A) == 0 || len(s.A) != len(s.B) {
			return Interval{}, fmt.Errorf("interval: seed %d: %d sets for A, %d for B (want the same, at least one)", s.Seed, len(s.A), len(s.B))
		}
		for j := range s.A {
			if len(s.A[j]) == 0 || len(s.A[j]) != len(s.B[j]) {
				return Interval{}, fmt.Errorf("interval: seed %d set %d: %d units for A, %d for B (want the same, at least one)", s.Seed, j, len(s.A[j]), len(s.B[j]))
			}
		}
		if design == Crossed {
			s0 := seeds[0]
			if len(s.A) != len(s0.A) {
				return Interval{}, fmt.Errorf("interval: crossed design: seed %d has %d sets, seed %d has %d", s.Seed, len(s.A), s0.Seed, len(s0.A))
			}
			for j := range s.A {
				if len(s.A[j]) != len(s0.A[j]) {
					return Interval{}, fmt.Errorf("interval: crossed design: set %d has %d units in seed %d, %d in seed %d", j, len(s.A[j]), s.Seed, len(s0.A[j]), s0.Seed)
				}
			}
		}
	}
	out := Interval{Level: conf, DFSeeds: float64(S - 1)}
	// Rounding residues are 0 (RoundingTol): a per-seed effect, the effect
	// and the seeds' SE at the scale of the values, the problems' part
	// relative to the mean squares it is the difference of. An exact
	// rational 0 is then 0, and no verdict turns on a residue's sign.
	scale := valueScale(seeds)
	for _, s := range seeds {
		d := zeroBelowRounding(seedMetric(s.A)-seedMetric(s.B), scale)
		out.PerSeed = append(out.PerSeed, d)
		out.Delta += d
	}
	out.Delta = zeroBelowRounding(out.Delta/float64(S), scale)
	ss := 0.0
	for _, d := range out.PerSeed {
		ss += (d - out.Delta) * (d - out.Delta)
	}
	fS := float64(S)
	out.VarSeeds = ss / (fS - 1) / fS
	if belowRounding(math.Sqrt(out.VarSeeds), scale) {
		out.VarSeeds = 0
	}
	if design == Crossed {
		// The degrees of freedom are Satterthwaite's for the sum of the
		// sets' problem mean squares sum_j k_j MS_P,j, each on P_j - 1
		// (sum_i k_i M_i over independent mean squares M_i with df_i has
		// df (sum k_i M_i)^2 / sum (k_i M_i)^2 / df_i): P-1 for one set. The
		// interaction's MS_R is left out of them on purpose: it only
		// removes the interaction's share, which the seeds' part already
		// counts, and the Satterthwaite df of the difference MS_P - MS_R
		// falls towards 0 as the difference does, which would give a
		// vanishing part an unbounded quantile.
		J := float64(len(seeds[0].A))
		vp, sumP, sumPR, denom := 0.0, 0.0, 0.0, 0.0
		for j := range seeds[0].A {
			P := len(seeds[0].A[j])
			if P < 2 {
				continue
			}
			msP, msR := crossedMeanSquares(seeds, j)
			k := 1 / (J * J * float64(P) * fS)
			vp += k * (msP - msR)
			sumP += k * msP
			sumPR += k * (msP + msR)
			denom += k * k * msP * msP / float64(P-1)
		}
		// A difference of mean squares that are equal as rationals is a
		// residue of their rounding, as is a part whose root is below
		// rounding at the values' scale.
		if vp <= RoundingTol*sumPR || belowRounding(math.Sqrt(max(vp, 0)), scale) {
			vp = 0
		}
		if vp > 0 && denom > 0 {
			out.VarProblems, out.DFProblems = vp, sumP*sumP/denom
		}
	}
	out.SE = math.Sqrt(out.VarSeeds + out.VarProblems)
	h := out.HalfWidth(conf)
	out.Low, out.High = out.Delta-h, out.Delta+h
	return out, nil
}

// crossedMeanSquares are the problem and interaction mean squares of set
// j's seeds x problems table of differences A - B.
func crossedMeanSquares(seeds []PairedSeed, j int) (msP, msR float64) {
	S, P := len(seeds), len(seeds[0].A[j])
	rows := make([]float64, S)
	cols := make([]float64, P)
	grand := 0.0
	for s, ps := range seeds {
		for p := range P {
			d := ps.A[j][p] - ps.B[j][p]
			rows[s] += d / float64(P)
			cols[p] += d / float64(S)
			grand += d
		}
	}
	grand /= float64(S * P)
	ssP, ssR := 0.0, 0.0
	for p := range P {
		ssP += (cols[p] - grand) * (cols[p] - grand)
	}
	for s, ps := range seeds {
		for p := range P {
			r := ps.A[j][p] - ps.B[j][p] - rows[s] - cols[p] + grand
			ssR += r * r
		}
	}
	msP = float64(S) * ssP / float64(P-1)
	msR = ssR / float64((S-1)*(P-1))
	return msP, msR
}

// tQuantile is the q-quantile of Student's t with df degrees of freedom
// (df may be fractional, as Satterthwaite's are; +Inf is the normal).
// Integer degrees of freedom are remembered; from 100 on, the Cornish-Fisher
// expansion in 1/df to its fourth term (relative error below 1e-8 there, checked
// against the exact quantile in the tests) spares the incomplete beta
// inversion, which a coverage simulation would call a million times.
func tQuantile(q, df float64) float64 {
	if df >= 100 {
		z := distuv.UnitNormal.Quantile(q)
		z2 := z * z
		g1 := (z2 + 1) * z / 4
		g2 := ((5*z2+16)*z2 + 3) * z / 96
		g3 := (((3*z2+19)*z2+17)*z2 - 15) * z / 384
		g4 := ((((79*z2+776)*z2+1482)*z2-1920)*z2 - 945) * z / 92160
		return z + g1/df + g2/(df*df) + g3/(df*df*df) + g4/(df*df*df*df)
	}
	if df == math.Trunc(df) {
		key := [2]float64{q, df}
		tqMu.Lock()
		t, ok := tqCache[key]
		tqMu.Unlock()
		if ok {
			return t
		}
		t = distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(q)
		tqMu.Lock()
		tqCache[key] = t
		tqMu.Unlock()
		return t
	}
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(q)
}

var (
	tqMu    sync.Mutex
	tqCache = map[[2]float64]float64{}
)

// PValues are a claim's tests, from its interval: Two is the two-sided p
// of "no effect", the 1-conf at which the interval's end reaches 0, so it
// is below 0.05 exactly when the 95% interval excludes 0. Equiv, with a
// margin m > 0, is the two one-sided tests' (TOST) p of "the effect is at
// least m away from 0", doubled likewise: below 0.05 exactly when the 95%
// interval lies inside (-m, m).
type PValues struct {
	Two, Equiv float64
}

// Tests are iv's p values (Equiv is 1 without a margin). A zero SE (every
// seed's effect the same, no problem part: Degenerate) gives no test: both
// are 1, as its verdict is inconclusive.
func Tests(iv Interval, margin float64) PValues {
	p := PValues{Two: pReaching(iv, math.Abs(iv.Delta)), Equiv: 1}
	if iv.Degenerate() {
		return PValues{Two: 1, Equiv: 1}
	}
	if margin > 0 {
		p.Equiv = pReaching(iv, margin-math.Abs(iv.Delta))
	}
	return p
}

// pReaching is 1-conf for the conf whose half-width is x: 1 for x <= 0,
// 0 for a zero SE and x > 0. Without a problem part it is the t
// distribution's two-sided tail; with one, HalfWidth is increasing in conf
// and conf is found by bisection to 1e-12.
func pReaching(iv Interval, x float64) float64 {
	switch {
	case x <= 0:
		return 1
	case iv.SE == 0:
		return 0
	case iv.VarProblems == 0:
		return min(1, 2*distuv.StudentsT{Mu: 0, Sigma: 1, Nu: iv.DFSeeds}.Survival(x/math.Sqrt(iv.VarSeeds)))
	}
	lo, hi := 0.0, 1.0 // conf
	if iv.HalfWidth(1-1e-15) < x {
		return 0
	}
	for hi-lo > 1e-12 {
		mid := (lo + hi) / 2
		if iv.HalfWidth(mid) < x {
			lo = mid
		} else {
			hi = mid
		}
	}
	return 1 - (lo+hi)/2
}

// Verdict is a claim's verdict from its interval: "held" when the whole
// interval is above 0 (the claimed-better arm is better), "not held" when
// the whole interval is at or below 0, "equivalent" when neither and the
// interval lies inside (-margin, margin) (margin > 0), "inconclusive"
// otherwise, and for a point interval (low == high: no spread, see
// Interval.Degenerate), whose sign says nothing about the error. The
// interval is in the claim's direction (for a lower-is-better metric,
// B - A).
func Verdict(low, high, margin float64) string {
	switch {
	case low == high:
		return "inconclusive"
	case low > 0:
		return "held"
	case high <= 0:
		return "not held"
	case margin > 0 && low > -margin && high < margin:
		return "equivalent"
	default:
		return "inconclusive"
	}
}
