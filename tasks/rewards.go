package tasks

import (
	"math"

	"github.com/cde-rl/cde/core"
)

// MaxRewardMagnitude bounds correct_reward and incorrect_reward. Rewards
// are summed and squared in advantages and critic targets (float32 on the
// model side), so a reward near float64's range overflows to Inf; 1e6 is far
// beyond any verifier's scale.
const MaxRewardMagnitude = 1e6

// readRewards reads a task's correct_reward and incorrect_reward keys.
func readRewards(p *core.Params) AnswerVerifier {
	v := AnswerVerifier{CorrectReward: p.Float("correct_reward", 1), IncorrectReward: p.Float("incorrect_reward", -1)}
	for _, kv := range []struct {
		key string
		r   float64
	}{{"correct_reward", v.CorrectReward}, {"incorrect_reward", v.IncorrectReward}} {
		p.Check(math.Abs(kv.r) <= MaxRewardMagnitude, kv.key, "must be in [-%g, %g], got %v", float64(MaxRewardMagnitude), float64(MaxRewardMagnitude), kv.r)
	}
	return v
}

// TrainProblems implements core.TrainLister: the training file's problems,
// each with its file:line as Source, so a run checks them all at start.
func (t *JSONL) TrainProblems() []core.Problem { return t.Train }

var _ core.TrainLister = (*JSONL)(nil)
