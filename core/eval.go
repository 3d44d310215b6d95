package core

import (
	"fmt"
	"math"
	"sort"
)

// PassAtK is the unbiased pass@k estimator for one problem with n samples of
// which c are correct: 1 - C(n-c, k) / C(n, k). It is computed in product
// form, 1 - prod_{i=n-c+1}^{n} (1 - k/i), which never forms a binomial
// coefficient. It requires 1 <= k <= n and 0 <= c <= n; otherwise it returns
// an error.
func PassAtK(n, c, k int) (float64, error) {
	if err := checkNCK("pass@k", n, c, k); err != nil {
		return 0, err
	}
	if n-c < k {
		// Every draw of k samples contains a correct one.
		return 1, nil
	}
	prod := 1.0
	for i := n - c + 1; i <= n; i++ {
		prod *= 1 - float64(k)/float64(i)
	}
	return 1 - prod, nil
}

// AvgAtK is the mean correctness over one problem's samples (NaN when empty).
func AvgAtK(correct []bool) float64 {
	if len(correct) == 0 {
		return math.NaN()
	}
	c := 0
	for _, ok := range correct {
		if ok {
			c++
		}
	}
	return float64(c) / float64(len(correct))
}

// EvalSummary averages avg@k (over all of a problem's samples) and pass@k
// over problems. Every problem needs at least k samples; no problems is an
// error.
func EvalSummary(perProblem [][]bool, k int) (avg, pass float64, err error) {
	if len(perProblem) == 0 {
		return 0, 0, fmt.Errorf("eval: no problems")
	}
	for i, samples := range perProblem {
		c := 0
		for _, ok := range samples {
			if ok {
				c++
			}
		}
		p, err := PassAtK(len(samples), c, k)
		if err != nil {
			return 0, 0, fmt.Errorf("eval: problem %d: %w", i, err)
		}
		avg += float64(c) / float64(len(samples))
		pass += p
	}
	n := float64(len(perProblem))
	return avg / n, pass / n, nil
}

// AUROC is the probability that a random positive scores higher than a
// random negative, ties counting 1/2 (the Mann-Whitney U statistic divided
// by P*N). It is NaN when either class is empty or a score is NaN, and panics
// when the slices differ in length.
func AUROC(scores []float64, positive []bool) float64 {
	if len(scores) != len(positive) {
		panic(fmt.Sprintf("core.AUROC: %d scores but %d labels", len(scores), len(positive)))
	}
	idx := make([]int, len(scores))
	nPos := 0
	for i, s := range scores {
		if math.IsNaN(s) {
			return math.NaN()
		}
		idx[i] = i
		if positive[i] {
			nPos++
		}
	}
	nNeg := len(scores) - nPos
	if nPos == 0 || nNeg == 0 {
		return math.NaN()
	}
	sort.Slice(idx, func(a, b int) bool { return scores[idx[a]] < scores[idx[b]] })
	// For each tie block, every positive beats the negatives seen below the
	// block and ties with the block's negatives.
	wins := 0.0
	negBelow := 0
	for lo := 0; lo < len(idx); {
		hi := lo
		for hi < len(idx) && scores[idx[hi]] == scores[idx[lo]] {
			hi++
		}
		p, q := 0, 0
		for _, i := range idx[lo:hi] {
			if positive[i] {
				p++
			} else {
				q++
			}
		}
		wins += float64(p) * (float64(negBelow) + float64(q)/2)
		negBelow += q
		lo = hi
	}
	return wins / (float64(nPos) * float64(nNeg))
}

// checkNCK checks the arguments of an unbiased estimator of k samples out
// of n, c of them correct: 1 <= k <= n and 0 <= c <= n.
func checkNCK(what string, n, c, k int) error {
	switch {
	case n < 1:
		return fmt.Errorf("%s: n = %d samples, want at least 1", what, n)
	case k < 1 || k > n:
		return fmt.Errorf("%s: k = %d, want 1 <= k <= n = %d", what, k, n)
	case c < 0 || c > n:
		return fmt.Errorf("%s: c = %d correct, want 0 <= c <= n = %d", what, c, n)
	}
	return nil
}
