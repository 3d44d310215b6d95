package trainer

import (
	"math"
	"testing"

	"github.com/cde-rl/cde/core"
)

// faultyStrategy is recStrategy with one hook's output broken.
type faultyStrategy struct {
	recStrategy
	fault string
}

func (s *faultyStrategy) RewardBonus(info core.StepInfo, r *core.Rollout) ([]float64, error) {
	out, err := s.recStrategy.RewardBonus(info, r)
	switch s.fault {
	case "reward-nan":
		out[1] = math.NaN()
	case "reward-short":
		out = out[:len(out)-1]
	}
	return out, err
}

func (s *faultyStrategy) AdvantageBonus(info core.StepInfo, r *core.Rollout) ([][]float64, error) {
	out, err := s.recStrategy.AdvantageBonus(info, r)
	switch s.fault {
	case "adv-inf":
		out[2][1] = math.Inf(1)
	case "adv-row":
		out[3] = append(out[3], 0)
	}
	return out, err
}

func (s *faultyStrategy) LossTerms(info core.StepInfo) (core.LossTerms, error) {
	lt, err := s.recStrategy.LossTerms(info)
	if s.fault == "loss-nan" {
		lt.EntropyCoef = math.NaN()
	}
	return lt, err
}

func (s *faultyStrategy) HeadMasks(info core.StepInfo, r *core.Rollout) ([][]float64, error) {
	out, err := s.recStrategy.HeadMasks(info, r)
	switch s.fault {
	case "masks-wide":
		out[0] = append(out[0], 1) // one entry more than T x K
	case "masks-negative":
		out[1][0] = -0.5
	}
	return out, err
}

func (s *faultyStrategy) Observe(info core.StepInfo, r *core.Rollout) (map[string]float64, error) {
	m, err := s.recStrategy.Observe(info, r)
	if s.fault == "observe-inf" {
		m["bad/x"] = math.Inf(-1)
	}
	return m, err
}

// Step checks every hook's output with core's checks and names the
// strategy, the hook and the place. The batch: 2 prompts x 2 responses of
// 2 tokens each (fakeBackend), K = 1 critic head (train.value_heads).
func TestStepRejectsBadHookOutputs(t *testing.T) {
	tests := []struct{ fault, want string }{
		{"reward-nan", "strategies[1] (bad): reward bonus: non-finite bonus NaN for sequence 1"},
		{"reward-short", "strategies[1] (bad): reward bonus: 3 bonuses for 4 sequences"},
		{"adv-inf", "strategies[1] (bad): advantage bonus: non-finite bonus +Inf at sequence 2 token 1"},
		{"adv-row", "strategies[1] (bad): advantage bonus: sequence 3: 3 bonuses for 2 tokens"},
		{"loss-nan", "strategies[1] (bad): loss terms: non-finite entropy coefficient NaN"},
		{"masks-wide", "strategies[1] (bad): head masks: sequence 0: 3 entries for 2 tokens x K = 1 heads"},
		{"masks-negative", "strategies[1] (bad): head masks: sequence 1 token 0 head 0: -0.5 is not a finite weight >= 0"},
		{"observe-inf", "strategies[1] (bad): observe: metric bad/x = -Inf is not finite"},
	}
	for _, tc := range tests {
		t.Run(tc.fault, func(t *testing.T) {
			var log []string
			good := &recStrategy{name: "good", log: &log, reward: 0.1, adv: 0.5}
			bad := &faultyStrategy{recStrategy: recStrategy{name: "bad", log: &log, reward: 0.1, adv: 0.5}, fault: tc.fault}
			tr := &Trainer{Cfg: fakeConfig(t, 1, 1), Task: fakeTask{}, Backend: &fakeBackend{}, Algo: &recAlgo{log: &log},
				Strategies: []core.Strategy{good, bad}, RunDir: t.TempDir()}
			var err error
			if tr.needs, err = tr.Needs(); err != nil {
				t.Fatal(err)
			}
			err = tr.Step(0, map[string]float64{})
			if err == nil || err.Error() != tc.want {
				t.Fatalf("err = %v\nwant %s", err, tc.want)
			}
		})
	}
}
