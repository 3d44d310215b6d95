package plugins

import (
	"fmt"
	"strings"
)

// The checks of a plugin's outputs, before the trainer sees them: pure
// functions of the answer and the batch's shape, so that
// FuzzCheckOutputs (check_fuzz_test.go) can test them on any input. Each
// returns the output in the trainer's form, scaled by the entry's weight w
// where a weight applies, or an error describing the first problem (the
// host adds the plugin and the hook). A weight that is not finite (a
// schedule with extreme w0 and w_end can overflow) is an error too.

func checkWeight(w float64) error {
	if !finite(w) {
		return fmt.Errorf("the entry's weight w_t = %v is not finite (check its w0, w_end and stairs)", w)
	}
	return nil
}

// checkRewardBonus checks one bonus per sequence (n sequences), every
// bonus finite, and returns w * bonus (bonus itself when w = 1).
func checkRewardBonus(bonus []float64, n int, w float64) ([]float64, error) {
	if err := checkWeight(w); err != nil {
		return nil, err
	}
	if len(bonus) != n {
		return nil, fmt.Errorf("%d bonuses for %d sequences", len(bonus), n)
	}
	for i, x := range bonus {
		if !finite(x) {
			return nil, fmt.Errorf("non-finite bonus %v for sequence %d", x, i)
		}
	}
	if w == 1 {
		return bonus, nil
	}
	out := make([]float64, n)
	for i, x := range bonus {
		out[i] = w * x
		if !finite(out[i]) {
			return nil, fmt.Errorf("bonus %v for sequence %d times weight w_t = %v is not finite", x, i, w)
		}
	}
	return out, nil
}

// checkAdvantageBonus checks the packed advantage bonuses of an
// AdvantageBonusResponse: one row per sequence, row i of seqLens[i]
// entries, lengths summing to len(bonus), every bonus finite. It returns
// the rows scaled by w: slices of bonus, scaled in place.
func checkAdvantageBonus(lengths []int32, bonus []float64, seqLens []int, w float64) ([][]float64, error) {
	if err := checkWeight(w); err != nil {
		return nil, err
	}
	if len(lengths) != len(seqLens) {
		return nil, fmt.Errorf("%d rows for %d sequences", len(lengths), len(seqLens))
	}
	total := 0
	for i, l := range lengths {
		if int(l) != seqLens[i] {
			return nil, fmt.Errorf("sequence %d: %d bonuses for %d tokens", i, l, seqLens[i])
		}
		total += int(l)
	}
	if len(bonus) != total {
		return nil, fmt.Errorf("%d bonuses for %d tokens", len(bonus), total)
	}
	out := make([][]float64, len(seqLens))
	off := 0
	for i, l := range lengths {
		row := bonus[off : off+int(l) : off+int(l)]
		for t, x := range row {
			if !finite(x) {
				return nil, fmt.Errorf("non-finite bonus %v at sequence %d token %d", x, i, t)
			}
			if w != 1 {
				row[t] = w * x
				if !finite(row[t]) {
					return nil, fmt.Errorf("bonus %v at sequence %d token %d times weight w_t = %v is not finite", x, i, t, w)
				}
			}
		}
		out[i] = row
		off += int(l)
	}
	return out, nil
}

// checkLossTerms checks the entropy coefficient and returns w * coef.
func checkLossTerms(coef, w float64) (float64, error) {
	if err := checkWeight(w); err != nil {
		return 0, err
	}
	if !finite(coef) {
		return 0, fmt.Errorf("non-finite entropy coefficient %v", coef)
	}
	if !finite(w * coef) {
		return 0, fmt.Errorf("entropy coefficient %v times weight w_t = %v is not finite", coef, w)
	}
	return w * coef, nil
}

// checkHeadMasks checks a HeadMasksResponse for sequences of seqLens
// tokens and k value heads: per sequence 0 rows (no mask) or one row per
// token, k entries per row, every entry a finite weight >= 0. The weight
// w_t does not apply to masks.
func checkHeadMasks(rows []int32, masks []float64, seqLens []int, k int) ([][][]float64, error) {
	if len(rows) != len(seqLens) {
		return nil, fmt.Errorf("%d masks for %d sequences", len(rows), len(seqLens))
	}
	total := 0
	for i, n := range rows {
		if n != 0 && int(n) != seqLens[i] {
			return nil, fmt.Errorf("sequence %d: %d rows for %d tokens", i, n, seqLens[i])
		}
		total += int(n)
	}
	if len(masks) != total*k {
		return nil, fmt.Errorf("%d mask entries for %d rows of K = %d heads", len(masks), total, k)
	}
	out := make([][][]float64, len(seqLens))
	off := 0
	for i, n := range rows {
		if n == 0 {
			continue
		}
		m := make([][]float64, n)
		for t := range m {
			row := masks[off : off+k : off+k]
			for j, x := range row {
				if !finite(x) || x < 0 {
					return nil, fmt.Errorf("sequence %d token %d head %d: %v is not a finite weight >= 0", i, t, j, x)
				}
			}
			m[t] = row
			off += k
		}
		out[i] = m
	}
	return out, nil
}

// metricPrefix is the prefix of a plugin's metrics: explore/<name>/.
func metricPrefix(name string) string { return "explore/" + name + "/" }

// checkObserve checks an Observe answer (names not empty, values finite)
// and returns it with every name under explore/<name>/: a name already
// starting with that prefix is kept, any other gets it prepended (so a
// plugin's "distinct_frac" is logged as explore/<name>/distinct_frac).
// Two names that end up the same are an error. With weighted, the host
// adds explore/<name>/weight = w (the entry's w_t), which no plugin metric
// may then be named.
func checkObserve(metrics map[string]float64, name string, weighted bool, w float64) (map[string]float64, error) {
	if weighted {
		if err := checkWeight(w); err != nil {
			return nil, err
		}
	}
	prefix := metricPrefix(name)
	out := make(map[string]float64, len(metrics)+1)
	from := make(map[string]string, len(metrics))
	for _, k := range sortedMetricNames(metrics) {
		if k == "" {
			return nil, fmt.Errorf("empty metric name")
		}
		v := metrics[k]
		if !finite(v) {
			return nil, fmt.Errorf("metric %s = %v is not finite", k, v)
		}
		full := k
		if !strings.HasPrefix(k, prefix) {
			full = prefix + k
		}
		if other, dup := from[full]; dup {
			return nil, fmt.Errorf("metrics %q and %q are both logged as %s", other, k, full)
		}
		if weighted && full == prefix+"weight" {
			return nil, fmt.Errorf("metric %q is logged as %s, which holds the entry's weight w_t; rename it", k, full)
		}
		from[full] = k
		out[full] = v
	}
	if weighted {
		out[prefix+"weight"] = w
	}
	return out, nil
}
