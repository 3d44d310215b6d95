package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
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

// metric is the seed's value of an arm: the mean over sets of the mean
// over units (the val/mean/... of the eval), for the units idx[s] of each
// set s (nil: all units once).
func seedMetric(sets [][]float64, idx [][]int) float64 {
	sum := 0.0
	for s, xs := range sets {
		m := 0.0
		if idx == nil {
			for _, x := range xs {
				m += x
			}
			m /= float64(len(xs))
		} else {
			for _, i := range idx[s] {
				m += xs[i]
			}
			m /= float64(len(idx[s]))
		}
		sum += m
	}
	return sum / float64(len(sets))
}

// Interval is a paired effect with its bootstrap interval.
type Interval struct {
	Delta     float64   // mean over seeds of metric(A) - metric(B)
	PerSeed   []float64 // metric(A) - metric(B) per seed, in input order
	Low, High float64   // percentile interval of Delta
	Reps      int
}

// Design says how a bootstrap draw resamples problems.
type Design int

const (
	// Nested draws each drawn seed's problems on their own: right when
	// seeds were evaluated on different problems.
	Nested Design = iota
	// Crossed draws one set of problem indices per eval set and uses it
	// for every drawn seed: right when every seed was evaluated on the same
	// problems, so a problem's difficulty is shared by all seeds and the
	// seeds are not independent given the problems.
	Crossed
)

func (d Design) String() string {
	if d == Crossed {
		return "crossed"
	}
	return "nested"
}

// PairedBootstrap is the effect of A over B and its percentile bootstrap
// interval at level conf (0.95 for a 95% interval), from reps resamples
// drawn with rng. The resampling is two-level and paired: each resample
// draws len(seeds) seeds with replacement and draws units with
// replacement, the same units for A and B (so the noise A and B share, the
// problem's difficulty, cancels); the resampled effect is the mean over
// the drawn seeds of metric(A) - metric(B) on the drawn units. With
// design Nested every drawn seed draws its own units of each set; with
// Crossed one draw of unit indices per set serves every drawn seed (unit i
// is the same problem in every seed), so the spread between problems is
// counted once for the whole experiment, not averaged away over seeds.
// Low and High are the (1-conf)/2 and (1+conf)/2 quantiles of the reps
// effects (linear interpolation between order statistics, R's type 7).
// Units of different sets are never mixed.
//
// It is an error when seeds is empty, a seed's A and B differ in sets or
// units, a set has no units, or (Crossed) two seeds differ in sets or units.
func PairedBootstrap(seeds []PairedSeed, reps int, conf float64, design Design, rng *rand.Rand) (Interval, error) {
	if len(seeds) == 0 {
		return Interval{}, fmt.Errorf("bootstrap: no seeds")
	}
	if reps < 1 || !(conf > 0 && conf < 1) {
		return Interval{}, fmt.Errorf("bootstrap: reps %d, level %v: want reps >= 1 and 0 < level < 1", reps, conf)
	}
	for _, s := range seeds {
		if len(s.A) == 0 || len(s.A) != len(s.B) {
			return Interval{}, fmt.Errorf("bootstrap: seed %d: %d sets for A, %d for B (want the same, at least one)", s.Seed, len(s.A), len(s.B))
		}
		for j := range s.A {
			if len(s.A[j]) == 0 || len(s.A[j]) != len(s.B[j]) {
				return Interval{}, fmt.Errorf("bootstrap: seed %d set %d: %d units for A, %d for B (want the same, at least one)", s.Seed, j, len(s.A[j]), len(s.B[j]))
			}
		}
		if design == Crossed {
			s0 := seeds[0]
			if len(s.A) != len(s0.A) {
				return Interval{}, fmt.Errorf("bootstrap: crossed design: seed %d has %d sets, seed %d has %d", s.Seed, len(s.A), s0.Seed, len(s0.A))
			}
			for j := range s.A {
				if len(s.A[j]) != len(s0.A[j]) {
					return Interval{}, fmt.Errorf("bootstrap: crossed design: set %d has %d units in seed %d, %d in seed %d", j, len(s.A[j]), s.Seed, len(s0.A[j]), s0.Seed)
				}
			}
		}
	}
	out := Interval{Reps: reps}
	for _, s := range seeds {
		d := seedMetric(s.A, nil) - seedMetric(s.B, nil)
		out.PerSeed = append(out.PerSeed, d)
		out.Delta += d
	}
	out.Delta /= float64(len(seeds))
	effects := make([]float64, reps)
	for r := range effects {
		effects[r] = resampledEffect(seeds, design, rng)
	}
	slices.Sort(effects)
	out.Low = quantile(effects, (1-conf)/2)
	out.High = quantile(effects, (1+conf)/2)
	return out, nil
}

// resampledEffect is one bootstrap draw of PairedBootstrap's effect.
func resampledEffect(seeds []PairedSeed, design Design, rng *rand.Rand) float64 {
	draw := func(sets [][]float64) [][]int {
		idx := make([][]int, len(sets))
		for j, xs := range sets {
			idx[j] = make([]int, len(xs))
			for i := range idx[j] {
				idx[j][i] = rng.IntN(len(xs))
			}
		}
		return idx
	}
	// Seeds are drawn before problems in both designs, so that a draw's
	// seeds do not depend on the design.
	drawn := make([]int, len(seeds))
	for i := range drawn {
		drawn[i] = rng.IntN(len(seeds))
	}
	var shared [][]int
	if design == Crossed {
		shared = draw(seeds[0].A)
	}
	sum := 0.0
	for _, k := range drawn {
		s := seeds[k]
		idx := shared
		if idx == nil {
			idx = draw(s.A)
		}
		sum += seedMetric(s.A, idx) - seedMetric(s.B, idx)
	}
	return sum / float64(len(seeds))
}

// quantile is the q-quantile of sorted xs by linear interpolation between
// order statistics (R's type 7: position q*(n-1)).
func quantile(sorted []float64, q float64) float64 {
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(sorted)-1)
	return sorted[lo] + (pos-float64(lo))*(sorted[hi]-sorted[lo])
}

// Verdict is a claim's verdict from its interval: "held" when the whole
// interval is above 0 (the claimed-better arm is better), "not held" when
// the whole interval is at or below 0, "inconclusive" when it contains 0.
// The interval is in the claim's direction (for a lower-is-better metric,
// B - A).
func Verdict(low, high float64) string {
	switch {
	case low > 0:
		return "held"
	case high <= 0:
		return "not held"
	default:
		return "inconclusive"
	}
}
