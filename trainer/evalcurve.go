package trainer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/cde-rl/cde/core"
)

// CurveKs are the k of a pass@k curve for n samples per problem: the
// powers of two 1, 2, 4, ... up to n, and n itself when it is not one.
func CurveKs(n int) []int {
	var ks []int
	for k := 1; k <= n; k *= 2 {
		ks = append(ks, k)
	}
	if len(ks) > 0 && ks[len(ks)-1] != n {
		ks = append(ks, n)
	}
	return ks
}

// PassAtKCurve is the mean over problems of the unbiased pass@k (PassAtK)
// for every k in ks, from each problem's correct count out of n samples.
func PassAtKCurve(n int, correct []int, ks []int) ([]float64, error) {
	if len(correct) == 0 {
		return nil, fmt.Errorf("pass@k curve: no problems")
	}
	out := make([]float64, len(ks))
	for j, k := range ks {
		for i, c := range correct {
			p, err := core.PassAtK(n, c, k)
			if err != nil {
				return nil, fmt.Errorf("pass@k curve: problem %d: %w", i, err)
			}
			out[j] += p
		}
		out[j] /= float64(len(correct))
	}
	return out, nil
}

// EvalDetail is one eval set's per-problem outcome at one evaluation: the
// problems in eval order and each one's count of correct samples out of N.
// The bench's paired bootstrap resamples these problems.
type EvalDetail struct {
	Step     int      `json:"step"`
	Set      string   `json:"set"`
	N        int      `json:"n"`
	Problems []string `json:"problems"`
	Correct  []int    `json:"correct"`
	// The samples, in order, when the task's verifier names answers
	// (AnswerKeyer): per problem, its distinct answer keys (Keys, in order
	// of first appearance), each sample's index into them (Answers; -1: no
	// answer), and each sample's correctness (Hits: '1' or '0' per
	// sample). maj@k and per-problem diversity are computed from these.
	Keys    [][]string `json:"keys,omitempty"`
	Answers [][]int    `json:"answers,omitempty"`
	Hits    []string   `json:"hits,omitempty"`
	// Distinct is each problem's count of distinct correct solutions
	// (distinct@k), when the verifier tells solutions or answers apart.
	Distinct []int `json:"distinct,omitempty"`
	// MajAt is, per k ("16"), each problem's maj@k (1 right, 0 not), for
	// a detail restored from a committed records file that keeps maj@k
	// but not the samples (docs/bench.md, "Re-judging a committed
	// bench"). The trainer writes the samples instead and never this.
	MajAt map[string][]int `json:"maj_at,omitempty"`
}

// recordSamples fills Keys, Answers and Hits from each problem's sample
// keys and correctness.
func (d *EvalDetail) recordSamples(keys [][]string, correct [][]bool) {
	d.Keys = make([][]string, len(keys))
	d.Answers = make([][]int, len(keys))
	d.Hits = make([]string, len(keys))
	for i, ks := range keys {
		index := map[string]int{}
		d.Keys[i] = []string{}
		d.Answers[i] = make([]int, len(ks))
		hits := make([]byte, len(ks))
		for j, k := range ks {
			hits[j] = '0'
			if correct[i][j] {
				hits[j] = '1'
			}
			if k == "" {
				d.Answers[i][j] = -1
				continue
			}
			at, ok := index[k]
			if !ok {
				at = len(d.Keys[i])
				index[k] = at
				d.Keys[i] = append(d.Keys[i], k)
			}
			d.Answers[i][j] = at
		}
		d.Hits[i] = string(hits)
	}
}

var evalSetNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// EvalDetailPath is RUN/evals/<set>/step-<step>.json.
func EvalDetailPath(run, set string, step int) string {
	return filepath.Join(run, "evals", set, fmt.Sprintf("step-%06d.json", step))
}

// WriteEvalDetail writes d to EvalDetailPath atomically (a rerun of the
// same evaluation after a resume replaces it).
func WriteEvalDetail(run string, d EvalDetail) error {
	if !evalSetNameRE.MatchString(d.Set) {
		return fmt.Errorf("eval detail: set name %q is not a plain file name", d.Set)
	}
	if len(d.Problems) != len(d.Correct) {
		return fmt.Errorf("eval detail %s step %d: %d problems, %d counts", d.Set, d.Step, len(d.Problems), len(d.Correct))
	}
	path := EvalDetailPath(run, d.Set, d.Step)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return core.WriteFileAtomic(path, append(data, '\n'))
}

// ReadEvalDetail reads and checks one file WriteEvalDetail wrote.
func ReadEvalDetail(path string) (EvalDetail, error) {
	var d EvalDetail
	data, err := os.ReadFile(path)
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return d, fmt.Errorf("%s: %v", path, err)
	}
	if d.N < 1 || len(d.Problems) != len(d.Correct) || len(d.Problems) == 0 {
		return d, fmt.Errorf("%s: n %d, %d problems, %d counts: want n >= 1 and one count per problem", path, d.N, len(d.Problems), len(d.Correct))
	}
	for i, c := range d.Correct {
		if c < 0 || c > d.N {
			return d, fmt.Errorf("%s: problem %d (%s): %d correct of %d", path, i, d.Problems[i], c, d.N)
		}
	}
	return d, nil
}
