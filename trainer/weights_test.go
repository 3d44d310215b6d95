package trainer

import (
	"math"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
)

// constHooks answers every hook with constants: reward bonus 0.5, advantage
// bonus 0.25 a token, loss-term entropy coefficient 0.01, and a token loss
// of PGWeight 0.5, AbsKLCoef 0.2 and entropy coefficient 0.02.
type constHooks struct{ name string }

func (s constHooks) Name() string      { return s.name }
func (s constHooks) Needs() core.Needs { return core.Needs{} }
func (s constHooks) RewardBonus(_ core.StepInfo, r *core.Rollout) ([]float64, error) {
	out := make([]float64, len(r.Seqs))
	for i := range out {
		out[i] = 0.5
	}
	return out, nil
}
func (s constHooks) AdvantageBonus(_ core.StepInfo, r *core.Rollout) ([][]float64, error) {
	return s.rows(r, 0.25), nil
}
func (s constHooks) LossTerms(core.StepInfo) (core.LossTerms, error) {
	return core.LossTerms{EntropyCoef: 0.01}, nil
}
func (s constHooks) TokenLoss(_ core.StepInfo, r *core.Rollout) (core.TokenLoss, error) {
	return core.TokenLoss{PGWeight: s.rows(r, 0.5), AbsKLCoef: s.rows(r, 0.2), EntropyCoef: 0.02}, nil
}
func (constHooks) rows(r *core.Rollout, v float64) [][]float64 {
	out := make([][]float64, len(r.Seqs))
	for i := range r.Seqs {
		out[i] = make([]float64, r.Seqs[i].Len())
		for t := range out[i] {
			out[i][t] = v
		}
	}
	return out
}

// The trainer is the one owner of the entries' weights: strategy "a" with
// weight linear 3 -> 1 has w = 2 at step 5 of 10, so its reward bonus is
// 1, its advantage bonus 0.5 a token, its loss-term entropy coefficient
// 0.02, its AbsKLCoef 0.4 and token-loss entropy coefficient 0.04, while
// its PGWeight (a mask) stays 0.5; strategy "b" has no schedule (w = 1).
// Each logs explore/<name>/weight. A weight that is not finite stops the
// step, naming the strategy.
func TestStrategyWeights(t *testing.T) {
	cfg := fakeConfig(t, 10, 10)
	tr := fakeTrainer(t, cfg, &fakeBackend{})
	tr.Strategies = []core.Strategy{constHooks{"a"}, constHooks{"b"}}
	tr.Weights = []core.Schedule{core.WeightSchedule{Kind: "linear", W0: 3, WEnd: 1}, nil}
	info := core.StepInfo{Step: 5, TotalSteps: 10, Algorithm: "mean"}
	r := &core.Rollout{Seqs: []core.Sequence{
		{Group: 0, Response: []int32{5, 6}, LogProbs: []float64{-1, -1}, Reward: 1},
		{Group: 0, Response: []int32{7}, LogProbs: []float64{-1}, Reward: -1},
	}}
	m := map[string]float64{}
	lt, err := tr.shapeStep(5, info, r, m)
	if err != nil {
		t.Fatal(err)
	}
	near := func(what string, got, want float64) {
		if math.Abs(got-want) > 1e-12 {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	near("explore/a/weight", m["explore/a/weight"], 2)
	near("explore/b/weight", m["explore/b/weight"], 1)
	for _, s := range r.Seqs {
		near("reward bonus", s.RewardBonus, 2*0.5+0.5)
		for k := range s.AdvantageBonus {
			near("advantage bonus", s.AdvantageBonus[k], 2*0.25+0.25)
			near("PGWeight", s.PGWeight[k], 0.5*0.5)
			near("AbsKLCoef", s.AbsKLCoef[k], 2*0.2+0.2)
		}
	}
	// train.entropy_coef (0) + loss terms 2*0.01 + 0.01 + token loss 2*0.02 + 0.02.
	near("entropy coefficient", lt.EntropyCoef, 0.03+0.06)

	tr.Weights[0] = core.WeightSchedule{Kind: "constant", W0: math.Inf(1)}
	if _, err := tr.shapeStep(5, info, r, map[string]float64{}); err == nil || !strings.Contains(err.Error(), "strategies[0] (a): the weight w_t = +Inf is not finite") {
		t.Errorf("infinite weight: %v", err)
	}
}
