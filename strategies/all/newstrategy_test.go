package all_test

import (
	"errors"
	"testing"

	"github.com/cde-rl/cde/core"
)

// lengthBonus stands for a reward-bonus strategy added after
// rewardscale_test.go was written and listed nowhere in it: it pays
// T_i / max_response_tokens (StepInfo.MaxResponseTokens), a
// length-normalised bonus. This test binary registers it; the suite must
// measure it by a derived case rather than fail because it is new.
type lengthBonus struct{}

func (lengthBonus) Name() string      { return "zz_length_bonus" }
func (lengthBonus) Needs() core.Needs { return core.Needs{} }
func (lengthBonus) RewardBonus(info core.StepInfo, r *core.Rollout) ([]float64, error) {
	if info.MaxResponseTokens <= 0 {
		return nil, errors.New("zz_length_bonus: StepInfo.MaxResponseTokens is not set")
	}
	out := make([]float64, len(r.Seqs))
	for i := range r.Seqs {
		out[i] = float64(r.Seqs[i].Len()) / float64(info.MaxResponseTokens)
	}
	return out, nil
}

func init() {
	core.RegisterStrategy("zz_length_bonus", func(p *core.Params, _ core.Algorithm) (core.Strategy, error) {
		return lengthBonus{}, p.Err()
	})
}

// A strategy scaleCases does not list gets a derived case, which the
// scale test runs (TestRewardBonusScaleInAllWrongGroups/zz_length_bonus/...).
func TestNewRewardBonusIsMeasured(t *testing.T) {
	for _, c := range cases(t) {
		if c.name == "zz_length_bonus" {
			if !c.derived || !c.reward || c.key != "" {
				t.Fatalf("zz_length_bonus: case %+v, want a derived reward case without a key", c)
			}
			return
		}
	}
	t.Fatal("zz_length_bonus has no case")
}
