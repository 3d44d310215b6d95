package core

// AnswerKeyer is implemented by a verifier that can name a response's
// final answer: AnswerKey is the extracted answer normalised so that two
// answers the verifier judges alike have the same key, and "" when the
// response has none. maj@k groups an evaluation's samples by it.
type AnswerKeyer interface {
	AnswerKey(p Problem, response string) string
}

// SolutionKeyer is implemented by a verifier that can tell solutions
// apart beyond their final answer: SolutionKey names a correct response's
// solution ("" for an incorrect one), so that distinct keys are distinct
// solutions (countdown: the canonical expression). The diversity metric
// distinct@k counts them; without it, the answer key serves.
type SolutionKeyer interface {
	SolutionKey(p Problem, response string) string
}

// DistinctCorrect is the number of distinct non-empty keys among the
// correct samples.
func DistinctCorrect(keys []string, correct []bool) int {
	seen := map[string]bool{}
	for i, k := range keys {
		if correct[i] && k != "" {
			seen[k] = true
		}
	}
	return len(seen)
}

// PassHatK is the unbiased pass^k of one problem: the probability that k
// samples drawn without replacement from its n, c of them correct, are all
// correct, C(c, k) / C(n, k) (0 when c < k).
func PassHatK(n, c, k int) (float64, error) {
	if err := checkNCK("pass^k", n, c, k); err != nil {
		return 0, err
	}
	p := 1.0
	for i := range k {
		p *= float64(c-i) / float64(n-i)
	}
	return max(p, 0), nil
}

// MajAtK reports whether majority voting over the first k samples of one
// problem is right: among the samples with an answer (key != ""), the key
// given most often wins, a tie going to the key whose first sample comes
// earliest; the vote is right when that first sample is correct. No answer
// among the k samples is wrong.
func MajAtK(keys []string, correct []bool, k int) bool {
	k = min(k, len(keys))
	count := map[string]int{}
	first := map[string]int{}
	best := ""
	for i := range k {
		key := keys[i]
		if key == "" {
			continue
		}
		if _, seen := first[key]; !seen {
			first[key] = i
		}
		count[key]++
		if best == "" || count[key] > count[best] || count[key] == count[best] && first[key] < first[best] {
			best = key
		}
	}
	return best != "" && correct[first[best]]
}
