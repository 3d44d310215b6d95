package core

import (
	"fmt"
	"maps"
	"slices"
)

// The checks of what a strategy's hooks return, shared by everything that
// calls hooks: the Trainer, the conformance kit (core/strategytest) and the
// plugin host (plugins). Each returns nil or an error describing the first
// problem, naming the sequence, token and head where there is one; the
// caller adds its own context ("strategies[1] (ppl): reward bonus: ",
// "RewardBonus: ", the plugin's label). They check shapes and finiteness
// only and never modify their input.

// CheckRewardBonus checks a RewardHook's answer for a batch of n
// sequences: one finite bonus per sequence.
func CheckRewardBonus(n int, bonus []float64) error {
	if len(bonus) != n {
		return fmt.Errorf("%d bonuses for %d sequences", len(bonus), n)
	}
	for i, b := range bonus {
		if !finite(b) {
			return fmt.Errorf("non-finite bonus %v for sequence %d", b, i)
		}
	}
	return nil
}

// CheckAdvantageBonus checks an AdvantageHook's answer for sequences of
// lens[i] response tokens: one row per sequence, row i of lens[i] finite
// bonuses.
func CheckAdvantageBonus(lens []int, rows [][]float64) error {
	if len(rows) != len(lens) {
		return fmt.Errorf("%d rows for %d sequences", len(rows), len(lens))
	}
	for i, row := range rows {
		if len(row) != lens[i] {
			return fmt.Errorf("sequence %d: %d bonuses for %d tokens", i, len(row), lens[i])
		}
		if AllFinite(row) {
			continue
		}
		for t, b := range row {
			if !finite(b) {
				return fmt.Errorf("non-finite bonus %v at sequence %d token %d", b, i, t)
			}
		}
	}
	return nil
}

// CheckHeadMasks checks a HeadMasker's answer for sequences of lens[i]
// response tokens and k value heads: one mask per sequence, each nil (every
// head sees every token) or lens[i]*k entries, flat with the head axis
// last (token t's weights at [t*k, (t+1)*k)), every entry a finite weight
// >= 0.
func CheckHeadMasks(lens []int, masks [][]float64, k int) error {
	if len(masks) != len(lens) {
		return fmt.Errorf("%d masks for %d sequences", len(masks), len(lens))
	}
	for i, m := range masks {
		if m == nil {
			continue
		}
		if len(m) != lens[i]*k {
			return fmt.Errorf("sequence %d: %d entries for %d tokens x K = %d heads", i, len(m), lens[i], k)
		}
		for j, x := range m {
			if !finite(x) || x < 0 {
				return fmt.Errorf("sequence %d token %d head %d: %v is not a finite weight >= 0", i, j/k, j%k, x)
			}
		}
	}
	return nil
}

// CheckLossTerms checks a LossHook's answer: a finite entropy coefficient.
func CheckLossTerms(lt LossTerms) error {
	if !finite(lt.EntropyCoef) {
		return fmt.Errorf("non-finite entropy coefficient %v", lt.EntropyCoef)
	}
	return nil
}

// CheckTokenLoss checks a TokenLossHook's answer for sequences of lens[i]
// response tokens: PGWeight and AbsKLCoef each nil or one row per sequence
// of lens[i] finite entries >= 0; a finite EntropyCoef.
func CheckTokenLoss(lens []int, tl TokenLoss) error {
	for _, f := range []struct {
		name string
		rows [][]float64
	}{{"PGWeight", tl.PGWeight}, {"AbsKLCoef", tl.AbsKLCoef}} {
		if f.rows == nil {
			continue
		}
		if len(f.rows) != len(lens) {
			return fmt.Errorf("%s: %d rows for %d sequences", f.name, len(f.rows), len(lens))
		}
		for i, row := range f.rows {
			if len(row) != lens[i] {
				return fmt.Errorf("%s: sequence %d: %d entries for %d tokens", f.name, i, len(row), lens[i])
			}
			for t, x := range row {
				if !finite(x) || x < 0 {
					return fmt.Errorf("%s: sequence %d token %d: %v is not a finite weight >= 0", f.name, i, t, x)
				}
			}
		}
	}
	if !finite(tl.EntropyCoef) {
		return fmt.Errorf("non-finite entropy coefficient %v", tl.EntropyCoef)
	}
	return nil
}

// CheckObserve checks an Observer's metrics: no empty name, every value
// finite. Names are checked in sorted order, so the error is the same
// whatever the map's iteration order.
func CheckObserve(metrics map[string]float64) error {
	for _, k := range slices.Sorted(maps.Keys(metrics)) {
		if k == "" {
			return fmt.Errorf("empty metric name")
		}
		if v := metrics[k]; !finite(v) {
			return fmt.Errorf("metric %s = %v is not finite", k, v)
		}
	}
	return nil
}

// SeqLens returns the number of response tokens of every sequence, the
// shape CheckAdvantageBonus and CheckHeadMasks check against.
func (r *Rollout) SeqLens() []int {
	out := make([]int, len(r.Seqs))
	for i := range r.Seqs {
		out[i] = r.Seqs[i].Len()
	}
	return out
}
