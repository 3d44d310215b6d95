package trainer

import (
	"math"
	"testing"

	"github.com/cde-rl/cde/core"
)

// RolloutMetrics logs critic/explained_variance: the batch of
// TestExplainedVariance, worked there by hand to 0.75.
func TestRolloutMetricsExplainedVariance(t *testing.T) {
	r := &core.Rollout{ValueHeads: 2, Seqs: []core.Sequence{
		{Response: []int32{1, 2}, Values: []float64{0, 2, 2, 2}, Returns: []float64{1, 3}},
		{Response: []int32{1}, Values: []float64{3, 3}, Returns: []float64{5}},
	}}
	m := map[string]float64{}
	RolloutMetrics(r, m)
	if math.Abs(m["critic/explained_variance"]-0.75) > 1e-15 {
		t.Errorf("RolloutMetrics: %v", m["critic/explained_variance"])
	}
}
