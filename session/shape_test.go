package session_test

import (
	"math"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/session"
	"github.com/cde-rl/cde/trainer"
)

func shapeCfg(t *testing.T, sets ...string) *trainer.Config {
	t.Helper()
	cfg, err := trainer.LoadConfig(trainer.LoadOptions{Env: []string{}, Sets: append([]string{`model.checkpoint=""`}, sets...)})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func shapeFile(t *testing.T, text string) *core.Rollout {
	t.Helper()
	r, err := core.ReadRollout(strings.NewReader(text), "batch.json")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// GRPO on one group of rewards 1 and -1 (2 and 1 tokens), worked by hand:
// mean 0, sample std sqrt(2), so A = +-1/(sqrt 2 + 1e-6) on every token.
// With new_logprobs equal to the old ones every ratio is 1 (inside the
// clip), so under token-mean aggregation the policy loss is -mean_t(A) =
// -(2a - a)/3 = -a/3 and d loss / d new_logprob_t = -A_t/3.
func TestShapeByHand(t *testing.T) {
	r := shapeFile(t, `{"step": 0, "total_steps": 10, "sequences": [
	  {"group": 0, "reward": 1, "logprobs": [-1, -2], "new_logprobs": [-1, -2], "correct": true},
	  {"group": 0, "reward": -1, "logprobs": [-3], "new_logprobs": [-3], "correct": false}]}`)
	o, err := session.Shape(shapeCfg(t, "algorithm.name=grpo", "train.loss_agg_mode=token-mean"), r, "batch.json", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	a := 1 / (math.Sqrt2 + 1e-6)
	want := [][]float64{{a, a}, {-a}}
	for i, s := range o.Sequences {
		for j, x := range s.Advantages {
			if math.Abs(x-want[i][j]) > 1e-12 {
				t.Errorf("A[%d][%d] = %v, want %v", i, j, x, want[i][j])
			}
			if c := s.LossCoef[j]; math.Abs(c+want[i][j]/3) > 1e-12 {
				t.Errorf("loss_coef[%d][%d] = %v, want %v", i, j, c, -want[i][j]/3)
			}
		}
	}
	if o.PolicyLoss == nil || math.Abs(*o.PolicyLoss+a/3) > 1e-12 {
		t.Errorf("policy loss %v, want %v", o.PolicyLoss, -a/3)
	}
	if o.KLLoss != nil {
		t.Errorf("kl loss %v without ref_logprobs", *o.KLLoss)
	}
}

// What the config needs and the file lacks is named by field and index.
func TestShapeMissingFields(t *testing.T) {
	noCorrect := `{"step": 0, "sequences": [
	  {"group": 0, "reward": 1, "logprobs": [-1], "correct": true},
	  {"group": 0, "reward": -1, "logprobs": [-2]}]}`
	for _, c := range []struct {
		name string
		sets []string
		file string
		want string
	}{
		{"grpo_passk reads the verdicts", []string{"algorithm.name=grpo_passk", "algorithm.k=2"}, noCorrect,
			"batch.json: sequences[1].correct: required by algorithm grpo_passk"},
		{"ppo reads critic values", []string{"algorithm.name=ppo"}, noCorrect, "batch.json: sequences[0].values: required"},
		{"simhash reads embeddings", []string{"strategies=[{name: simhash}]"}, noCorrect,
			`batch.json: sequences[0].embedding: required by a strategy with pooling "last"`},
		{"two poolings", []string{"strategies=[{name: simhash, pooling: mean}, {name: simhash, pooling: last}]"}, noCorrect,
			`strategies[1] (simhash): asks for pooling "last" but another strategy asked for "mean"`},
		{"a negative group", nil, `{"step": 0, "sequences": [{"group": 0, "reward": 1, "logprobs": [-1]}, {"group": -1, "reward": 1, "logprobs": [-1]}]}`,
			"batch.json: sequences[1].group: -1: want an integer >= 0"},
		{"a step past train.steps", []string{"train.steps=5"}, `{"step": 7, "sequences": [{"group": 0, "reward": 1, "logprobs": [-1]}]}`,
			"batch.json: step: 7: must be < train.steps (5)"},
	} {
		_, err := session.Shape(shapeCfg(t, c.sets...), shapeFile(t, c.file), "batch.json", zerolog.Nop())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// needsCorrect is a strategy that reads the verifier's verdicts
// (Needs.Correct) and adds them as a reward bonus.
type needsCorrect struct{}

func (needsCorrect) Name() string      { return "test_needs_correct" }
func (needsCorrect) Needs() core.Needs { return core.Needs{Correct: true} }
func (needsCorrect) RewardBonus(_ core.StepInfo, r *core.Rollout) ([]float64, error) {
	b := make([]float64, len(r.Seqs))
	for i, s := range r.Seqs {
		if s.Correct {
			b[i] = 1
		}
	}
	return b, nil
}

func init() {
	core.RegisterStrategy("test_needs_correct", func(*core.Params, core.Algorithm) (core.Strategy, error) { return needsCorrect{}, nil })
}

// A strategy's Needs.Correct is required of the file like the algorithm's:
// without it every verdict would read false and the bonus be 0 for all.
func TestShapeStrategyNeedsCorrect(t *testing.T) {
	cfg := shapeCfg(t, "algorithm.name=grpo", "strategies=[{name: test_needs_correct}]")
	_, err := session.Shape(cfg, shapeFile(t, `{"step": 0, "total_steps": 10, "sequences": [
	  {"group": 0, "reward": 1, "logprobs": [-1], "correct": true},
	  {"group": 0, "reward": -1, "logprobs": [-2]}]}`), "batch.json", zerolog.Nop())
	want := "batch.json: sequences[1].correct: required by strategy test_needs_correct (strategies[0])"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("%v, want %q", err, want)
	}
	o, err := session.Shape(cfg, shapeFile(t, `{"step": 0, "total_steps": 10, "sequences": [
	  {"group": 0, "reward": 1, "logprobs": [-1], "correct": true},
	  {"group": 0, "reward": -1, "logprobs": [-2], "correct": false}]}`), "batch.json", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if o.Sequences[0].RewardBonus == 0 || o.Sequences[1].RewardBonus != 0 {
		t.Errorf("bonuses %v, %v: want >0 for the correct one, 0 for the other", o.Sequences[0].RewardBonus, o.Sequences[1].RewardBonus)
	}
}
