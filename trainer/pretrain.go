package trainer

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/cde-rl/cde/core"
)

// Supervised is implemented by backends that can take a supervised
// (cross-entropy) step: the warm start that stands in for a base LLM.
type Supervised interface {
	SupervisedStep(seqs []*core.Sequence, lr float64) (meanNLL float64, err error)
}

// PretrainResult summarises a warm start.
type PretrainResult struct {
	Steps   int     // supervised steps taken
	Acc     float64 // final mean validation avg@k
	Metrics map[string]float64
}

// Pretrain trains the policy on the task's worked solutions until the mean
// validation avg@k reaches pretrain.stop_acc (checked every
// pretrain.eval_every steps) or pretrain.steps run out. Stopping early is the
// point: RL should start from an imperfect base, as from a base LLM.
func (t *Trainer) Pretrain(ctx context.Context) (PretrainResult, error) {
	c := t.Cfg
	sup, ok := t.Backend.(Supervised)
	if !ok {
		return PretrainResult{}, fmt.Errorf("pretrain: backend %s cannot take supervised steps", t.Backend.Engine())
	}
	tok := t.Task.Tokenizer()
	prog := NewProgress(t.Progress, t.TTY, "pretrain", 0, c.Pretrain.Steps)
	res := PretrainResult{}
	for step := 0; step < c.Pretrain.Steps; step++ {
		crashPoint("pretrain.step", step)
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		rng := rand.New(rand.NewPCG(Mix(c.Seed, 0x5f7, uint64(step)), 0))
		problems := t.Task.SampleTrain(rng, c.Pretrain.BatchSize)
		seqs := make([]*core.Sequence, len(problems))
		for i, p := range problems {
			sol := p.Solution
			if sol == "" {
				sol = "Answer: " + p.Answer
			}
			seqs[i] = &core.Sequence{Prompt: core.EncodePrompt(tok, p.Prompt), Response: append(tok.Encode(sol), tok.EOS())}
		}
		loss, err := sup.SupervisedStep(seqs, c.Pretrain.LR)
		if err != nil {
			return res, err
		}
		res.Steps = step + 1
		if (step+1)%c.Pretrain.EvalEvery == 0 {
			m := map[string]float64{}
			if err := t.Evaluate(step+1, m); err != nil {
				return res, err
			}
			res.Acc = m[fmt.Sprintf("val/mean/avg@%d", c.Eval.K)]
			res.Metrics = m
			t.Log.Info().Int("step", step+1).Float64("nll", loss).Float64("val_avg", res.Acc).Msg("pretrain")
			if res.Acc >= c.Pretrain.StopAcc {
				prog.Update(c.Pretrain.Steps, fmt.Sprintf("stopped at val avg %.3f", res.Acc))
				return res, nil
			}
		}
		prog.Update(step+1, fmt.Sprintf("nll %.3f", loss))
	}
	return res, nil
}
