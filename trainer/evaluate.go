package trainer

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cde-rl/cde/core"
)

// EvalSets returns the task's eval sets named by eval.sets (all when
// empty), in the task's order; an unknown name is an error naming the key.
func (t *Trainer) EvalSets() ([]core.EvalSet, error) {
	all := t.Task.EvalSets()
	var names []string
	byName := map[string]bool{}
	for _, s := range all {
		names = append(names, s.Name)
		byName[s.Name] = true
	}
	for _, n := range slices.Sorted(maps.Keys(t.Cfg.Eval.SetK)) {
		if !byName[n] {
			return nil, fmt.Errorf("config: eval.set_k.%s: unknown eval set %q (the task has: %s)", n, n, strings.Join(names, ", "))
		}
	}
	if len(t.Cfg.Eval.Sets) == 0 {
		return all, nil
	}
	want := map[string]bool{}
	for i, n := range t.Cfg.Eval.Sets {
		if !byName[n] {
			return nil, fmt.Errorf("config: eval.sets[%d]: unknown eval set %q (the task has: %s)", i, n, strings.Join(names, ", "))
		}
		want[n] = true
	}
	var out []core.EvalSet
	for _, s := range all {
		if want[s.Name] {
			out = append(out, s)
		}
	}
	return out, nil
}

// Evaluate samples k responses per held-out problem of every eval set (k
// = eval.set_k's for the set, else eval.k) and adds val/<set>/avg@k and,
// for every j of the curve CurveKs(k) (1, 2, 4, ..., k), val/<set>/pass@j,
// val/<set>/pass^j (PassHatK) and, when the task's verifier names answers
// (AnswerKeyer), val/<set>/maj@j (MajAtK over the first j samples) and
// val/<set>/distinct@k, the mean over problems of its distinct correct
// solutions (SolutionKeyer, else answer keys) to m. Over sets it adds val/mean/avg@<eval.k>, the mean of every set's
// avg@k (each an estimate of pass@1, as the paper's Avg column averages
// MATH's Avg@1 with the others' Avg@16), and val/mean/pass@j (pass^j,
// maj@j), the mean over the sets evaluated with k >= j. With eval.details and a run
// directory it writes each set's per-problem correct counts
// (WriteEvalDetail).
func (t *Trainer) Evaluate(step int, m map[string]float64) error {
	c := t.Cfg
	curves := map[int][]float64{} // j -> pass@j of the sets that have it
	hats := map[int][]float64{}   // j -> pass^j, likewise
	majs := map[int][]float64{}   // j -> maj@j of the sets whose verifier names answers
	var distincts []float64       // distinct@k of the sets evaluated with eval.k
	var avgs []float64
	sets, err := t.EvalSets()
	if err != nil {
		return err
	}
	for si, set := range sets {
		problems := set.Problems
		if c.Eval.MaxProblems > 0 && len(problems) > c.Eval.MaxProblems {
			problems = problems[:c.Eval.MaxProblems]
		}
		if len(problems) == 0 {
			continue
		}
		k := c.Eval.KAt(set.Name, t.finalEval)
		ks := CurveKs(k)
		r, err := t.evalRollout(step, si, problems, k)
		if err != nil {
			return fmt.Errorf("eval %s: %w", set.Name, err)
		}
		per := make([][]bool, len(problems))
		_, hasKeys := t.Task.Verifier().(core.AnswerKeyer) // rollout set AnswerKey
		solver, hasSolutions := t.Task.Verifier().(core.SolutionKeyer)
		var keys, sols [][]string
		if hasKeys || hasSolutions {
			keys, sols = make([][]string, len(problems)), make([][]string, len(problems))
		}
		for _, s := range r.Seqs {
			per[s.Group] = append(per[s.Group], s.Correct)
			if hasKeys {
				keys[s.Group] = append(keys[s.Group], s.AnswerKey)
			}
			switch {
			case hasSolutions:
				sols[s.Group] = append(sols[s.Group], solver.SolutionKey(problems[s.Group], s.Text))
			case hasKeys:
				sols[s.Group] = keys[s.Group]
			}
		}
		var distinct []int
		if sols != nil {
			distinct = make([]int, len(per))
			sum := 0
			for i := range per {
				distinct[i] = core.DistinctCorrect(sols[i], per[i])
				sum += distinct[i]
			}
			dm := float64(sum) / float64(len(per))
			m[fmt.Sprintf("val/%s/distinct@%d", set.Name, k)] = dm
			if k == c.Eval.MeanK(t.finalEval) {
				distincts = append(distincts, dm)
			}
		}
		avg, pass, err := core.EvalSummary(per, k)
		if err != nil {
			return fmt.Errorf("eval %s: %w", set.Name, err)
		}
		counts := make([]int, len(per))
		ids := make([]string, len(per))
		for i, samples := range per {
			for _, ok := range samples {
				if ok {
					counts[i]++
				}
			}
			ids[i] = problems[i].ID
		}
		curve, err := PassAtKCurve(k, counts, ks)
		if err != nil {
			return fmt.Errorf("eval %s: %w", set.Name, err)
		}
		for j, kj := range ks {
			if kj != k {
				m[fmt.Sprintf("val/%s/pass@%d", set.Name, kj)] = curve[j]
			}
			curves[kj] = append(curves[kj], curve[j])
			hat := 0.0
			for _, c := range counts {
				p, err := core.PassHatK(k, c, kj)
				if err != nil {
					return fmt.Errorf("eval %s: %w", set.Name, err)
				}
				hat += p
			}
			hat /= float64(len(counts))
			m[fmt.Sprintf("val/%s/pass^%d", set.Name, kj)] = hat
			hats[kj] = append(hats[kj], hat)
			if hasKeys {
				maj := 0.0
				for i := range per {
					if core.MajAtK(keys[i], per[i], kj) {
						maj++
					}
				}
				maj /= float64(len(per))
				m[fmt.Sprintf("val/%s/maj@%d", set.Name, kj)] = maj
				majs[kj] = append(majs[kj], maj)
			}
		}
		m[fmt.Sprintf("val/%s/avg@%d", set.Name, k)] = avg
		m[fmt.Sprintf("val/%s/pass@%d", set.Name, k)] = pass
		avgs = append(avgs, avg)
		if c.Eval.Details && t.RunDir != "" {
			// Details serve the bench's statistics; failing to write them
			// (a set name that is no file name) does not stop training.
			d := EvalDetail{Step: step, Set: set.Name, N: k, Problems: ids, Correct: counts}
			if hasKeys {
				d.recordSamples(keys, per)
			}
			d.Distinct = distinct
			if err := WriteEvalDetail(t.RunDir, d); err != nil {
				t.Log.Warn().Err(err).Str("set", set.Name).Msg("eval details not written")
			}
		}
	}
	if len(avgs) > 0 {
		for kj, vals := range curves {
			m[fmt.Sprintf("val/mean/pass@%d", kj)] = core.Mean(vals)
		}
		for kj, vals := range hats {
			m[fmt.Sprintf("val/mean/pass^%d", kj)] = core.Mean(vals)
		}
		for kj, vals := range majs {
			m[fmt.Sprintf("val/mean/maj@%d", kj)] = core.Mean(vals)
		}
		if len(distincts) > 0 {
			m[fmt.Sprintf("val/mean/distinct@%d", c.Eval.MeanK(t.finalEval))] = core.Mean(distincts)
		}
		k := c.Eval.MeanK(t.finalEval)
		m[fmt.Sprintf("val/mean/avg@%d", k)] = core.Mean(avgs)
		ev := t.Log.Info().Int("step", step).Float64("avg@k", core.Mean(avgs)).Int("k", k)
		if p, ok := m[fmt.Sprintf("val/mean/pass@%d", k)]; ok {
			ev = ev.Float64("pass@k", p)
		}
		ev.Msg("eval")
	}
	return nil
}

// EvaluateFinal is Evaluate as the evaluation after the last step runs it
// (eval.final_k applies): a bench's base row, which stands for every arm's
// step 0, is compared with the arms' final evaluations.
func (t *Trainer) EvaluateFinal(step int, m map[string]float64) error {
	t.finalEval = true
	defer func() { t.finalEval = false }()
	return t.Evaluate(step, m)
}

// evalRollout samples k responses to each problem of eval set number si,
// in chunks of whole problems of at most eval.max_rows responses. The
// first chunk draws with the set's seed as an unchunked evaluation does,
// chunk c > 0 with that seed mixed with c; groups are numbered over the
// whole set.
func (t *Trainer) evalRollout(step, si int, problems []core.Problem, k int) (*core.Rollout, error) {
	c := t.Cfg
	seed := Mix(c.Seed, seedEval, uint64(step), uint64(si))
	chunk := c.Eval.EvalChunk(k)
	var all *core.Rollout
	for lo := 0; lo < len(problems); lo += chunk {
		hi := min(lo+chunk, len(problems))
		s := seed
		if lo > 0 {
			s = Mix(seed, uint64(lo/chunk))
		}
		r, _, err := t.rollout(step, problems[lo:hi], k, c.Eval.Temperature, s, core.Needs{}, nil, 0, false) // eval.max_rows chunks it
		if err != nil {
			return nil, err
		}
		if all == nil {
			all = r
			continue
		}
		for i := range r.Seqs {
			r.Seqs[i].Group += lo
		}
		all.Seqs = append(all.Seqs, r.Seqs...)
	}
	if all == nil {
		all = &core.Rollout{}
	}
	return all, nil
}
