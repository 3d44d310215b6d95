package core

import "math"

// Small statistics shared by the trainer, algorithms, strategies and the
// bench. Each sums in slice order, so a result is bit-for-bit the same as
// the plain loop it replaces.

// Mean is the arithmetic mean of xs; NaN for none.
func Mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// PopStd is the population standard deviation of xs (divisor n); NaN for
// none.
func PopStd(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	return math.Sqrt(sumSquaredDev(xs) / float64(len(xs)))
}

// SampleStd is the sample standard deviation of xs (divisor n-1), the
// square root of SampleVar: 0 for a single value, NaN for none.
func SampleStd(xs []float64) float64 { return math.Sqrt(SampleVar(xs)) }

// SampleVar is the sample variance of xs (divisor n-1); 0 for a single
// value, NaN for none.
func SampleVar(xs []float64) float64 {
	switch len(xs) {
	case 0:
		return math.NaN()
	case 1:
		return 0
	}
	return sumSquaredDev(xs) / float64(len(xs)-1)
}

// sumSquaredDev is the sum of (x - Mean(xs))^2.
func sumSquaredDev(xs []float64) float64 {
	mu := Mean(xs)
	v := 0.0
	for _, x := range xs {
		v += (x - mu) * (x - mu)
	}
	return v
}

// HeadStd is the critic's head disagreement of a batch, the metric
// critic/head_std: the population std over the K heads of each value row
// (one per response token), averaged over every row of every sequence. ok
// is false when the batch has no value row with a head (no critic values).
func HeadStd(r *Rollout) (std float64, ok bool) {
	sum, n := 0.0, 0
	for i := range r.Seqs {
		s := &r.Seqs[i]
		if s.Heads() == 0 {
			continue
		}
		for t := range s.Len() {
			sum += PopStd(s.ValueRow(t))
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}

// ExplainedVariance is the critic's explained variance over the batch's
// valid tokens (CleanRL's diagnostic): 1 - Var(R - V) / Var(R), with V the
// mean of a token's value heads (as the rollout scored them, before the
// update) and R its return (the critic's target); population variances.
// 1 is a perfect critic, 0 one no better than a constant, below 0 worse.
// ok is false without values or returns, or when Var(R) is 0.
func ExplainedVariance(r *Rollout) (ev float64, ok bool) {
	var res, ret []float64
	for i := range r.Seqs {
		s := &r.Seqs[i]
		if s.Heads() == 0 || len(s.Returns) != s.Len() {
			continue
		}
		for t := range s.Len() {
			v := s.ValueRow(t)
			res = append(res, s.Returns[t]-Mean(v))
			ret = append(ret, s.Returns[t])
		}
	}
	if len(ret) == 0 {
		return 0, false
	}
	vr := PopStd(ret)
	if vr == 0 {
		return 0, false
	}
	e := PopStd(res)
	return 1 - e*e/(vr*vr), true
}
