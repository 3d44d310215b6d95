package trainer

import (
	"testing"

	"github.com/cde-rl/cde/core"
)

// infoStrategy records the StepInfo its reward and loss hooks get.
type infoStrategy struct{ seen []core.StepInfo }

func (s *infoStrategy) Name() string      { return "info" }
func (s *infoStrategy) Needs() core.Needs { return core.Needs{} }
func (s *infoStrategy) RewardBonus(info core.StepInfo, r *core.Rollout) ([]float64, error) {
	s.seen = append(s.seen, info)
	return make([]float64, len(r.Seqs)), nil
}
func (s *infoStrategy) LossTerms(info core.StepInfo) (core.LossTerms, error) {
	s.seen = append(s.seen, info)
	return core.LossTerms{}, nil
}

// Every hook of a step sees the run's limits in StepInfo, so a
// length-normalised bonus can divide by rollout.max_response_tokens.
func TestStepInfoCarriesRunLimits(t *testing.T) {
	cfg := fakeConfig(t, 4, 4)
	cfg.Rollout.MaxResponseTokens = 7
	s := &infoStrategy{}
	tr := fakeTrainer(t, cfg, &fakeBackend{})
	tr.Strategies = []core.Strategy{s}
	var err error
	if tr.needs, err = tr.Needs(); err != nil {
		t.Fatal(err)
	}
	if err := tr.Step(2, map[string]float64{}); err != nil {
		t.Fatal(err)
	}
	want := core.StepInfo{Step: 2, TotalSteps: 4, Algorithm: tr.Algo.Name(), Seed: cfg.Seed, MaxResponseTokens: 7}
	if len(s.seen) != 2 {
		t.Fatalf("%d hook calls, want the reward and the loss hook's", len(s.seen))
	}
	for _, got := range s.seen {
		if got != want {
			t.Errorf("StepInfo %+v, want %+v", got, want)
		}
	}
}
