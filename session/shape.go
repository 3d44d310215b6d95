package session

import (
	"fmt"
	"math"
	"sort"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/trainer"
)

// ShapeOutput is what `cde-run shape` prints as JSON (docs/rollout-format.md).
// PolicyLoss is set when the file carries new_logprobs; KLLoss when it
// also carries ref_logprobs and train.kl_mode is loss with kl_coef > 0.
type ShapeOutput struct {
	Sequences  []ShapeSeq         `json:"sequences"`
	PolicyLoss *float64           `json:"policy_loss,omitempty"`
	KLLoss     *float64           `json:"kl_loss,omitempty"`
	Metrics    map[string]float64 `json:"metrics"`
}

// ShapeSeq is one sequence of the output. RewardPenalty is set when the
// config turns on a trainer reward term (train.overlong, train.kl_mode:
// reward); LossCoef[t] = d policy_loss / d new_logprobs[t] and KLLossCoef[t]
// = d kl_loss / d new_logprobs[t] come with policy_loss and kl_loss.
// PGWeight and AbsKLCoef are the strategies' per-token actor-loss weights
// (core.TokenLoss), present when a token-loss hook set them; loss_coef
// includes them.
type ShapeSeq struct {
	RewardBonus    float64   `json:"reward_bonus"`
	RewardPenalty  *float64  `json:"reward_penalty,omitempty"`
	ShapedReward   float64   `json:"shaped_reward"`
	Advantages     []float64 `json:"advantages"`
	AdvantageBonus []float64 `json:"advantage_bonus"`
	Returns        []float64 `json:"returns"`
	LossCoef       []float64 `json:"loss_coef,omitempty"`
	KLLossCoef     []float64 `json:"kl_loss_coef,omitempty"`
	PGWeight       []float64 `json:"pg_weight,omitempty"`
	AbsKLCoef      []float64 `json:"abs_kl_coef,omitempty"`
}

// Shape applies cfg's algorithm and strategies to a recorded batch r (read
// from path, which errors name), as one training step would: reward bonuses,
// the trainer's reward penalties, advantages, advantage bonuses,
// finalisation. It checks that r carries every field they need, and that the
// results are finite. When the file carries new_logprobs (r.File), it adds
// the policy loss of the whole file as one minibatch and its gradient
// (core.PolicyLoss with the train section's clip_low, clip_high,
// clip_ratio_c, ratio_level and loss_agg_mode; KL and entropy excluded),
// and, with ref_logprobs and train.kl_mode: loss and kl_coef > 0, the KL
// term's aggregated estimate (before kl_coef) and its gradient. The
// strategies' token-loss hooks run after the shaping (Trainer.ApplyTokenLoss)
// and their per-token weights enter the policy loss and loss_coef.
func Shape(cfg *trainer.Config, r *core.Rollout, path string, log zerolog.Logger) (ShapeOutput, error) {
	var o ShapeOutput
	for i, s := range r.Seqs {
		if s.Group < 0 {
			return o, fmt.Errorf("%s: sequences[%d].group: %d: want an integer >= 0 (the index of the prompt the response answers)", path, i, s.Group)
		}
	}
	algo, err := BuildAlgorithm(cfg)
	if err != nil {
		return o, err
	}
	strats, weights, err := BuildStrategies(cfg, algo, log)
	if err != nil {
		return o, err
	}
	defer core.CloseAll(strats)
	needs, err := core.RunNeeds(algo, strats)
	if err != nil {
		return o, err
	}
	if err := checkNeeds(r, needs, path); err != nil {
		return o, err
	}
	if needs.Correct && r.File != nil {
		for i, given := range r.File.HasCorrect {
			if !given {
				return o, fmt.Errorf("%s: sequences[%d].correct: required by %s (the verifier's verdict, true or false)", path, i, correctReader(algo, strats))
			}
		}
	}
	r.Algorithm = algo.Name()
	if r.TotalSteps <= 0 {
		r.TotalSteps = cfg.Train.Steps
		if r.Step >= r.TotalSteps {
			return o, fmt.Errorf("%s: step: %d: must be < train.steps (%d) of the config, which stands in for the file's missing total_steps", path, r.Step, r.TotalSteps)
		}
	}
	tr := &trainer.Trainer{Cfg: cfg, Algo: algo, Strategies: strats, Weights: weights} // for its Shape and ApplyTokenLoss
	m := map[string]float64{}
	info := core.StepInfo{Step: r.Step, TotalSteps: r.TotalSteps, Algorithm: algo.Name(), Seed: cfg.Seed,
		MaxResponseTokens: cfg.Rollout.MaxResponseTokens}
	if err := tr.Shape(info, r, m); err != nil {
		return o, err
	}
	if _, err := tr.ApplyTokenLoss(info, r, m); err != nil {
		return o, err
	}
	o.Metrics = m
	penalties := cfg.Train.Overlong.Buffer > 0 || cfg.Train.KLMode == "reward" && cfg.Train.KLCoef > 0
	for i := range r.Seqs {
		s := &r.Seqs[i]
		out := ShapeSeq{RewardBonus: s.RewardBonus, ShapedReward: s.ShapedReward,
			Advantages: s.Advantages, AdvantageBonus: s.AdvantageBonus, Returns: s.Returns,
			PGWeight: s.PGWeight, AbsKLCoef: s.AbsKLCoef}
		if penalties {
			p := s.RewardPenalty
			out.RewardPenalty = &p
		}
		o.Sequences = append(o.Sequences, out)
	}
	if r.File != nil && r.File.NewLogProbs != nil {
		if err := shapeLoss(cfg, r, &o); err != nil {
			return o, fmt.Errorf("%s: %w", path, err)
		}
	}
	if err := checkFinite(o); err != nil {
		return o, fmt.Errorf("%s: %w (the inputs are too large for float64: rewards, values or log-probs near 1e308?)", path, err)
	}
	return o, nil
}

// shapeLoss adds policy_loss and loss_coef (and kl_loss, kl_loss_coef) to
// o from r's final advantages and its file's new_logprobs.
func shapeLoss(cfg *trainer.Config, r *core.Rollout, o *ShapeOutput) error {
	tc := cfg.Train
	withKL := tc.KLMode == "loss" && tc.KLCoef > 0 && r.Seqs[0].RefLogProbs != nil
	seqs := make([]core.LossSeq, len(r.Seqs))
	for i := range r.Seqs {
		s := &r.Seqs[i]
		seqs[i] = core.LossSeq{OldLogProbs: s.LogProbs, NewLogProbs: r.File.NewLogProbs[i], Advantages: s.Advantages,
			PGWeight: s.PGWeight, AbsKLCoef: s.AbsKLCoef}
		if withKL {
			seqs[i].RefLogProbs = s.RefLogProbs
		}
	}
	res, err := core.PolicyLoss(seqs, core.PolicyLossOptions{ClipLow: tc.ClipLow, ClipHigh: tc.ClipHigh,
		ClipRatioC: tc.ClipRatioC, AggMode: tc.LossAggMode, RatioLevel: tc.RatioLevel,
		MaxResponseTokens: cfg.Rollout.MaxResponseTokens, KLEstimator: tc.KLEstimator, Loss: tc.PolicyLoss,
		LossParams: tc.PolicyLossParams})
	if err != nil {
		return err
	}
	o.PolicyLoss = &res.PGLoss
	o.Metrics["actor/pg_clipfrac"] = res.ClipFrac
	for i := range o.Sequences {
		o.Sequences[i].LossCoef = res.PGCoef[i]
	}
	if withKL {
		o.KLLoss = &res.KL
		for i := range o.Sequences {
			o.Sequences[i].KLLossCoef = res.KLCoef[i]
		}
	}
	return nil
}

// checkFinite names the first output number that is NaN or infinite (JSON
// cannot carry it): finite inputs can still overflow, e.g. a reward of
// 1e308 minus a value of -1e308.
func checkFinite(o ShapeOutput) error {
	bad := func(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) }
	for i, s := range o.Sequences {
		for _, f := range []struct {
			name string
			x    float64
		}{{"reward_bonus", s.RewardBonus}, {"shaped_reward", s.ShapedReward}, {"reward_penalty", deref(s.RewardPenalty)}} {
			if bad(f.x) {
				return fmt.Errorf("sequences[%d].%s = %v: not finite", i, f.name, f.x)
			}
		}
		for _, f := range []struct {
			name string
			xs   []float64
		}{{"advantages", s.Advantages}, {"advantage_bonus", s.AdvantageBonus}, {"returns", s.Returns},
			{"loss_coef", s.LossCoef}, {"kl_loss_coef", s.KLLossCoef}} {
			for t, x := range f.xs {
				if bad(x) {
					return fmt.Errorf("sequences[%d].%s[%d] = %v: not finite", i, f.name, t, x)
				}
			}
		}
	}
	if x := deref(o.PolicyLoss); bad(x) {
		return fmt.Errorf("policy_loss = %v: not finite", x)
	}
	if x := deref(o.KLLoss); bad(x) {
		return fmt.Errorf("kl_loss = %v: not finite", x)
	}
	keys := make([]string, 0, len(o.Metrics))
	for k := range o.Metrics {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if bad(o.Metrics[k]) {
			return fmt.Errorf("metrics[%q] = %v: not finite", k, o.Metrics[k])
		}
	}
	return nil
}

func deref(x *float64) float64 {
	if x == nil {
		return 0
	}
	return *x
}

// correctReader names who declared Needs.Correct, the algorithm first:
// "algorithm grpo_passk" or "strategy NAME (strategies[i])".
func correctReader(algo core.Algorithm, strats []core.Strategy) string {
	if a, ok := algo.(core.AlgorithmNeeds); ok && a.Needs().Correct {
		return "algorithm " + algo.Name()
	}
	for i, s := range strats {
		if s.Needs().Correct {
			return fmt.Sprintf("strategy %s (strategies[%d])", s.Name(), i)
		}
	}
	return "the config"
}

// checkNeeds reports a rollout field a strategy or the algorithm needs but
// the file lacks.
func checkNeeds(r *core.Rollout, n core.Needs, path string) error {
	for i, s := range r.Seqs {
		if n.Entropies && s.Entropies == nil {
			return fmt.Errorf("%s: sequences[%d].entropies: required by the configured strategies", path, i)
		}
		if n.ValueHeads > 0 && s.Values == nil {
			return fmt.Errorf("%s: sequences[%d].values: required (the algorithm or a strategy reads critic values)", path, i)
		}
		if n.ValueHeads > 1 && len(s.Values) > 0 && s.Heads() < n.ValueHeads {
			return fmt.Errorf("%s: sequences[%d].values: %d heads, the config asks for %d", path, i, s.Heads(), n.ValueHeads)
		}
		if n.Pooling != "" && s.Embedding == nil {
			return fmt.Errorf("%s: sequences[%d].embedding: required by a strategy with pooling %q", path, i, n.Pooling)
		}
	}
	return nil
}
