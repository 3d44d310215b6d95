package plugins

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/plugins/internal/wire"
)

// The checks of a plugin's outputs, before the trainer sees them: pure
// functions of the answer and the batch's shape, so that
// FuzzCheckOutputs (check_fuzz_test.go) can test them on any input. Each
// unpacks the wire form, checks it with core's hook-output checks (the
// ones the trainer and strategytest use: core/hookcheck.go), and returns
// the output in the trainer's form, scaled by the entry's weight w where a
// weight applies, or an error describing the first problem (the host adds
// the plugin and the hook). A weight that is not finite (a schedule with
// extreme w0 and w_end can overflow) is an error too.

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
	if err := core.CheckRewardBonus(n, bonus); err != nil {
		return nil, err
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
// the rows scaled by w: slices of bonus, scaled in place, or, with
// copyRows (bonus is a view of the shared answer region, which the next
// call reuses), copies of them, one allocation a row.
func checkAdvantageBonus(lengths []int32, bonus []float64, seqLens []int, w float64, copyRows bool) ([][]float64, error) {
	if err := checkWeight(w); err != nil {
		return nil, err
	}
	// The wire form first: row lengths >= 0 that add up to len(bonus).
	total := 0
	for i, l := range lengths {
		if l < 0 {
			return nil, fmt.Errorf("sequence %d: row length %d", i, l)
		}
		total += int(l)
	}
	if len(bonus) != total {
		return nil, fmt.Errorf("%d bonuses for rows of %d in all", len(bonus), total)
	}
	if copyRows { // one block, windows onto it
		bonus = slices.Clone(bonus)
	}
	out := make([][]float64, len(lengths))
	off := 0
	for i, l := range lengths {
		out[i] = bonus[off : off+int(l) : off+int(l)]
		off += int(l)
	}
	if err := core.CheckAdvantageBonus(seqLens, out); err != nil {
		return nil, err
	}
	if w != 1 {
		for i, row := range out {
			for t, x := range row {
				row[t] = w * x
				if !finite(row[t]) {
					return nil, fmt.Errorf("bonus %v at sequence %d token %d times weight w_t = %v is not finite", x, i, t, w)
				}
			}
		}
	}
	return out, nil
}

// checkLossTerms checks the entropy coefficient and returns w * coef.
func checkLossTerms(coef, w float64) (float64, error) {
	if err := checkWeight(w); err != nil {
		return 0, err
	}
	if err := core.CheckLossTerms(core.LossTerms{EntropyCoef: coef}); err != nil {
		return 0, err
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
func checkHeadMasks(rows []int32, masks []float64, seqLens []int, k int) ([][]float64, error) {
	// The wire form first: row counts >= 0, k entries per row in all.
	total := 0
	for i, n := range rows {
		if n < 0 {
			return nil, fmt.Errorf("sequence %d: row count %d", i, n)
		}
		total += int(n)
	}
	if len(masks) != total*k {
		return nil, fmt.Errorf("%d mask entries for %d rows of K = %d heads", len(masks), total, k)
	}
	out := make([][]float64, len(rows))
	off := 0
	for i, n := range rows {
		if n == 0 {
			continue
		}
		end := off + int(n)*k
		out[i] = masks[off:end:end]
		off = end
	}
	if err := core.CheckHeadMasks(seqLens, out, k); err != nil {
		return nil, err
	}
	return out, nil
}

// checkTokenLoss checks a TokenLossResponse for sequences of seqLens
// tokens: each present per-token array of sum(seqLens) entries, finite and
// >= 0, and a finite entropy coefficient. The entry's weight w scales
// AbsKLCoef and EntropyCoef (like LossTerms's coefficient); it does not
// apply to PGWeight (a mask, like head masks).
func checkTokenLoss(resp tokenLossWire, seqLens []int, w float64) (core.TokenLoss, error) {
	if err := checkWeight(w); err != nil {
		return core.TokenLoss{}, err
	}
	total := 0
	for _, l := range seqLens {
		total += l
	}
	var tl core.TokenLoss
	unpack := func(name string, has bool, flat []float64) ([][]float64, error) {
		if !has {
			if len(flat) != 0 {
				return nil, fmt.Errorf("%s: %d entries but has_%s is false", name, len(flat), name)
			}
			return nil, nil
		}
		if len(flat) != total {
			return nil, fmt.Errorf("%s: %d entries for %d tokens", name, len(flat), total)
		}
		rows := make([][]float64, len(seqLens))
		off := 0
		for i, l := range seqLens {
			rows[i] = flat[off : off+l : off+l]
			off += l
		}
		return rows, nil
	}
	var err error
	if tl.PGWeight, err = unpack("pg_weight", resp.hasPG, resp.pg); err != nil {
		return core.TokenLoss{}, err
	}
	if tl.AbsKLCoef, err = unpack("abs_kl_coef", resp.hasKL, resp.kl); err != nil {
		return core.TokenLoss{}, err
	}
	tl.EntropyCoef = resp.ent
	if err := core.CheckTokenLoss(seqLens, tl); err != nil {
		return core.TokenLoss{}, err
	}
	if w != 1 {
		for i, row := range tl.AbsKLCoef {
			for t, x := range row {
				row[t] = w * x
				if !finite(row[t]) {
					return core.TokenLoss{}, fmt.Errorf("abs_kl_coef %v at sequence %d token %d times weight w_t = %v is not finite", x, i, t, w)
				}
			}
		}
		tl.EntropyCoef = w * resp.ent
		if !finite(tl.EntropyCoef) {
			return core.TokenLoss{}, fmt.Errorf("entropy coefficient %v times weight w_t = %v is not finite", resp.ent, w)
		}
	}
	return tl, nil
}

// tokenLossWire is a TokenLossResponse's fields (so the check is a pure
// function of plain values).
type tokenLossWire struct {
	hasPG, hasKL bool
	pg, kl       []float64
	ent          float64
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
	if err := core.CheckObserve(metrics); err != nil {
		return nil, err
	}
	prefix := metricPrefix(name)
	out := make(map[string]float64, len(metrics)+1)
	from := make(map[string]string, len(metrics))
	for _, k := range wire.SortedMetricNames(metrics) {
		v := metrics[k]
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

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
