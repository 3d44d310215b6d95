package trainer

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/cde-rl/cde/core"
)

// checkRolloutFinite returns a *NonFiniteError for the first non-finite
// reward, log-prob, entropy or value of r's sequences (what generation,
// verification and critic scoring produced).
func checkRolloutFinite(r *core.Rollout) error {
	for i := range r.Seqs {
		s := &r.Seqs[i]
		if !finite(s.Reward) {
			return &core.NonFiniteError{Quantity: "reward", Value: s.Reward, Where: fmt.Sprintf("sequence %d", i)}
		}
		for t, v := range s.LogProbs {
			if !finite(v) {
				return &core.NonFiniteError{Quantity: "rollout log-prob", Value: v, Where: fmt.Sprintf("sequence %d token %d", i, t)}
			}
		}
		for t, v := range s.RefLogProbs {
			if !finite(v) {
				return &core.NonFiniteError{Quantity: "reference log-prob", Value: v, Where: fmt.Sprintf("sequence %d token %d", i, t)}
			}
		}
		for t, v := range s.Entropies {
			if !finite(v) {
				return &core.NonFiniteError{Quantity: "rollout entropy", Value: v, Where: fmt.Sprintf("sequence %d token %d", i, t)}
			}
		}
		for j, v := range s.Values {
			if !finite(v) {
				k := s.Heads()
				return &core.NonFiniteError{Quantity: "critic value", Value: v, Where: fmt.Sprintf("sequence %d token %d head %d", i, j/k, j%k)}
			}
		}
	}
	return nil
}

// checkShapedFinite returns a *NonFiniteError for the first non-finite
// shaped reward, advantage or return after shaping.
func checkShapedFinite(r *core.Rollout) error {
	for i := range r.Seqs {
		s := &r.Seqs[i]
		if !finite(s.ShapedReward) {
			return &core.NonFiniteError{Quantity: "shaped reward", Value: s.ShapedReward, Where: fmt.Sprintf("sequence %d", i)}
		}
		for t, v := range s.Advantages {
			if !finite(v) {
				return &core.NonFiniteError{Quantity: "advantage", Value: v, Where: fmt.Sprintf("sequence %d token %d", i, t)}
			}
		}
		for t, v := range s.Returns {
			if !finite(v) {
				return &core.NonFiniteError{Quantity: "return", Value: v, Where: fmt.Sprintf("sequence %d token %d", i, t)}
			}
		}
	}
	return nil
}

// checkMetricsFinite returns a *NonFiniteError for the first non-finite
// metric whose name starts with one of prefixes (the update's metrics).
func checkMetricsFinite(m map[string]float64, prefixes ...string) error {
	keys := slices.Sorted(maps.Keys(m))
	for _, k := range keys {
		for _, p := range prefixes {
			if strings.HasPrefix(k, p) && !finite(m[k]) {
				return &core.NonFiniteError{Quantity: k, Value: m[k]}
			}
		}
	}
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
