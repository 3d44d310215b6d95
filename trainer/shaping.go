package trainer

import (
	"fmt"
	"math"

	"github.com/cde-rl/cde/core"
)

// Shape applies the reward hooks, the trainer's reward penalties
// (RewardPenalties: overlong punishment, KL in the reward), the algorithm's
// advantages, the advantage hooks and the algorithm's finalisation to r, in
// config order, and adds explore/<name>/bonus_mean metrics. It is the whole
// of `cde-run shape`.
func (t *Trainer) Shape(info core.StepInfo, r *core.Rollout, m map[string]float64) error {
	for i, s := range t.Strategies {
		w, _ := t.weight(i, info)
		if !finite(w) {
			return fmt.Errorf("strategies[%d] (%s): the weight w_t = %v is not finite (check its w0, w_end and stairs)", i, s.Name(), w)
		}
		m["explore/"+s.Name()+"/weight"] = w
	}
	for i := range r.Seqs {
		r.Seqs[i].RewardBonus = 0
		r.Seqs[i].RewardPenalty = 0
	}
	for i, s := range t.Strategies {
		h := t.hooks()[i]
		if h.RewardBonus == nil {
			continue
		}
		bonus, err := h.RewardBonus(info, r)
		if err != nil {
			return fmt.Errorf("strategies[%d] (%s): reward bonus: %w", i, s.Name(), err)
		}
		if err := core.CheckRewardBonus(len(r.Seqs), bonus); err != nil {
			return fmt.Errorf("strategies[%d] (%s): reward bonus: %w", i, s.Name(), err)
		}
		if w, weighted := t.weight(i, info); weighted {
			for j := range bonus {
				if bonus[j] *= w; !finite(bonus[j]) {
					return fmt.Errorf("strategies[%d] (%s): reward bonus: entry %d times the weight w_t = %v is not finite", i, s.Name(), j, w)
				}
			}
		}
		sum := 0.0
		for j, b := range bonus {
			r.Seqs[j].RewardBonus += b
			sum += b
		}
		m["explore/"+s.Name()+"/bonus_mean"] = sum / float64(max(len(bonus), 1))
	}
	if t.Cfg != nil {
		if err := RewardPenalties(t.Cfg, r, m); err != nil {
			return err
		}
	}
	for i := range r.Seqs {
		r.Seqs[i].ShapedReward = r.Seqs[i].Reward + r.Seqs[i].RewardBonus + r.Seqs[i].RewardPenalty
	}
	if err := t.Algo.Advantages(r); err != nil {
		return err
	}
	r.NewColumn(1, func(s *core.Sequence) *[]float64 { return &s.AdvantageBonus })
	if err := t.addAdvantageBonuses(info, r, m, false); err != nil {
		return err
	}
	if err := t.Algo.Finalize(r); err != nil {
		return err
	}
	return t.addAdvantageBonuses(info, r, m, true)
}

// addAdvantageBonuses adds the AdvantageHooks' bonuses, in config order:
// those placed before the algorithm's Finalize (after = false) or those
// placed after it (after = true, AfterFinalizer).
func (t *Trainer) addAdvantageBonuses(info core.StepInfo, r *core.Rollout, m map[string]float64, after bool) error {
	for i, s := range t.Strategies {
		h := t.hooks()[i]
		if h.AdvantageBonus == nil || h.AfterFinalize != after {
			continue
		}
		bonus, err := h.AdvantageBonus(info, r)
		if err != nil {
			return fmt.Errorf("strategies[%d] (%s): advantage bonus: %w", i, s.Name(), err)
		}
		if err := core.CheckAdvantageBonus(r.SeqLens(), bonus); err != nil {
			return fmt.Errorf("strategies[%d] (%s): advantage bonus: %w", i, s.Name(), err)
		}
		if w, weighted := t.weight(i, info); weighted {
			for j, row := range bonus {
				for k := range row {
					if row[k] *= w; !finite(row[k]) {
						return fmt.Errorf("strategies[%d] (%s): advantage bonus: sequence %d token %d times the weight w_t = %v is not finite", i, s.Name(), j, k, w)
					}
				}
			}
		}
		sum, n := 0.0, 0
		for j, row := range bonus {
			for k, b := range row {
				r.Seqs[j].Advantages[k] += b
				r.Seqs[j].AdvantageBonus[k] += b
				sum += b
				n++
			}
		}
		m["explore/"+s.Name()+"/bonus_mean"] = sum / float64(max(n, 1))
	}
	return nil
}

// ApplyTokenLoss calls the strategies' TokenLossHooks on the shaped batch,
// in config order, and stores their combined per-token weights in
// Sequence.PGWeight (rows multiplied) and Sequence.AbsKLCoef (rows added);
// both stay nil when no hook set them. It returns the sum of the hooks'
// entropy coefficients (added to the actor loss's) and adds, per hook,
// explore/<name>/pg_weight_mean (the mean PGWeight over valid tokens) and
// explore/<name>/abs_kl_coef_mean when the hook set those rows, and
// explore/<name>/entropy_coef when its coefficient is not 0, to m.
// Step calls it after Shape; `cde-run shape` calls it too.
func (t *Trainer) ApplyTokenLoss(info core.StepInfo, r *core.Rollout, m map[string]float64) (float64, error) {
	for i := range r.Seqs {
		r.Seqs[i].PGWeight, r.Seqs[i].AbsKLCoef = nil, nil
	}
	entCoef := 0.0
	for i, s := range t.Strategies {
		h := t.hooks()[i]
		if h.TokenLoss == nil {
			continue
		}
		tl, err := h.TokenLoss(info, r)
		if err != nil {
			return 0, fmt.Errorf("strategies[%d] (%s): token loss: %w", i, s.Name(), err)
		}
		if err := core.CheckTokenLoss(r.SeqLens(), tl); err != nil {
			return 0, fmt.Errorf("strategies[%d] (%s): token loss: %w", i, s.Name(), err)
		}
		if w, weighted := t.weight(i, info); weighted {
			// The weight scales the KL-Cov coefficients and the entropy
			// coefficient; PGWeight is a mask and stays.
			if tl.AbsKLCoef != nil {
				_, scaled := r.TokenRows(1)
				for j, row := range tl.AbsKLCoef {
					for k, x := range row {
						if scaled[j][k] = w * x; !finite(scaled[j][k]) {
							return 0, fmt.Errorf("strategies[%d] (%s): token loss: abs_kl_coef at sequence %d token %d times the weight w_t = %v is not finite", i, s.Name(), j, k, w)
						}
					}
				}
				tl.AbsKLCoef = scaled
			}
			if tl.EntropyCoef *= w; !finite(tl.EntropyCoef) {
				return 0, fmt.Errorf("strategies[%d] (%s): token loss: the entropy coefficient times the weight w_t = %v is not finite", i, s.Name(), w)
			}
		}
		prefix := "explore/" + s.Name() + "/"
		if tl.PGWeight != nil {
			if len(r.Seqs) > 0 && r.Seqs[0].PGWeight == nil { // the first hook to set them: a column of 1
				block := r.NewColumn(1, func(s *core.Sequence) *[]float64 { return &s.PGWeight })
				for k := range block {
					block[k] = 1
				}
			}
			sum := 0.0
			for j, row := range tl.PGWeight {
				w := r.Seqs[j].PGWeight
				for k, x := range row {
					w[k] *= x
					sum += x
				}
			}
			m[prefix+"pg_weight_mean"] = sum / float64(max(r.NumTokens(), 1))
		}
		if tl.AbsKLCoef != nil {
			if len(r.Seqs) > 0 && r.Seqs[0].AbsKLCoef == nil { // the first hook to set them: a column of 0
				r.NewColumn(1, func(s *core.Sequence) *[]float64 { return &s.AbsKLCoef })
			}
			sum := 0.0
			for j, row := range tl.AbsKLCoef {
				c := r.Seqs[j].AbsKLCoef
				for k, x := range row {
					c[k] += x
					sum += x
				}
			}
			m[prefix+"abs_kl_coef_mean"] = sum / float64(max(r.NumTokens(), 1))
		}
		if tl.EntropyCoef != 0 {
			m[prefix+"entropy_coef"] = tl.EntropyCoef
		}
		entCoef += tl.EntropyCoef
	}
	return entCoef, nil
}

// SeqPerplexity is exp(mean negative log-prob) of a response.
func SeqPerplexity(s *core.Sequence) float64 {
	if len(s.LogProbs) == 0 {
		return math.NaN()
	}
	nll := 0.0
	for _, lp := range s.LogProbs {
		nll -= lp
	}
	return math.Exp(nll / float64(len(s.LogProbs)))
}

// RolloutMetrics adds the batch's rollout metrics: GenerationMetrics over
// its responses, reward/shaped_mean, and with a critic critic/head_std and
// critic/explained_variance.
func RolloutMetrics(r *core.Rollout, m map[string]float64) {
	GenerationMetrics(r.Seqs, m)
	shaped := 0.0
	for i := range r.Seqs {
		shaped += r.Seqs[i].ShapedReward
	}
	m["reward/shaped_mean"] = shaped / float64(len(r.Seqs))
	if r.ValueHeads > 0 {
		if std, ok := core.HeadStd(r); ok {
			m["critic/head_std"] = std
		}
		if ev, ok := core.ExplainedVariance(r); ok {
			m["critic/explained_variance"] = ev
		}
	}
}

// GenerationMetricNames are the metrics GenerationMetrics writes: those
// of a step's rollout metrics that need only what generation and the
// verifier give a response, so they can be taken over every response
// generated under dynamic sampling, dropped groups included.
var GenerationMetricNames = []string{"reward/mean", "reward/acc", "response/length_mean", "response/truncated_frac",
	"actor/ppl", "rollout/entropy", "calib/ppl_correct", "calib/ppl_incorrect", "calib/auroc"}

// KeptPrefix names the generation metrics of the batch trained on under
// dynamic sampling (kept/rollout/entropy, ...), when the plain names are
// over every response generated (see Trainer.Step).
const KeptPrefix = "kept/"

// GenerationMetrics adds the metrics of GenerationMetricNames over seqs:
// reward/mean and reward/acc (verifier rewards and verdicts),
// response/length_mean and response/truncated_frac, actor/ppl (mean
// response perplexity), rollout/entropy (mean over response tokens of the
// sampling policy's entropy), calib/ppl_correct and calib/ppl_incorrect
// (mean response perplexities by verdict) and calib/auroc (the
// probability that a correct response has lower perplexity than an
// incorrect one). A metric without data (no entropies, no correct
// response, ...) is left out.
func GenerationMetrics(seqs []core.Sequence, m map[string]float64) {
	n := float64(len(seqs))
	var reward, acc, length, trunc, ent, ppl float64
	var entN int
	var pplC, pplI []float64
	var scores []float64
	var pos []bool
	for i := range seqs {
		s := &seqs[i]
		reward += s.Reward
		if s.Correct {
			acc++
		}
		length += float64(s.Len())
		if s.Truncated {
			trunc++
		}
		for _, e := range s.Entropies {
			ent += e
			entN++
		}
		p := SeqPerplexity(s)
		ppl += p
		if s.Correct {
			pplC = append(pplC, p)
		} else {
			pplI = append(pplI, p)
		}
		scores = append(scores, -p)
		pos = append(pos, s.Correct)
	}
	m["reward/mean"] = reward / n
	m["reward/acc"] = acc / n
	m["response/length_mean"] = length / n
	m["response/truncated_frac"] = trunc / n
	m["actor/ppl"] = ppl / n
	if entN > 0 {
		m["rollout/entropy"] = ent / float64(entN)
	}
	if len(pplC) > 0 {
		m["calib/ppl_correct"] = core.Mean(pplC)
	}
	if len(pplI) > 0 {
		m["calib/ppl_incorrect"] = core.Mean(pplI)
	}
	if a := core.AUROC(scores, pos); !math.IsNaN(a) {
		m["calib/auroc"] = a
	}
}

// rolloutMetrics adds the step's rollout metrics to m. Without dynamic
// sampling (generated nil) they are RolloutMetrics of the batch r. Under
// it the generation metrics (GenerationMetricNames) are over generated,
// every response the step generated, kept or dropped, so that they
// compare with a run without dynamic sampling; the batch trained on has
// them as kept/<name>; the others (reward/shaped_mean, critic/*) are the
// batch's, under their own names.
func rolloutMetrics(r *core.Rollout, generated []core.Sequence, m map[string]float64) {
	RolloutMetrics(r, m)
	if generated == nil {
		return
	}
	for _, k := range GenerationMetricNames {
		if v, ok := m[k]; ok {
			m[KeptPrefix+k] = v
			delete(m, k)
		}
	}
	GenerationMetrics(generated, m)
}

// hooks returns what each strategy does (core.HooksOf), asked once: the
// first call fills the cache, and a changed Strategies slice refills it.
func (t *Trainer) hooks() []core.Hooks {
	if len(t.hookCache) != len(t.Strategies) {
		t.hookCache = make([]core.Hooks, len(t.Strategies))
		for i, s := range t.Strategies {
			t.hookCache[i] = core.HooksOf(s)
		}
	}
	return t.hookCache
}

// weight is strategy i's w_t at info's step, and whether the strategy has a
// schedule at all (else 1, false).
func (t *Trainer) weight(i int, info core.StepInfo) (float64, bool) {
	if i < len(t.Weights) && t.Weights[i] != nil {
		return t.Weights[i].Weight(info.Step, info.TotalSteps), true
	}
	return 1, false
}
