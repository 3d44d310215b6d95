package trainer

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/internal/tensorboard"
	"github.com/rs/zerolog"
)

// Trainer runs the RLVR loop (docs/extending.md, "One training step") and
// owns the run directory:
//
//	RUN/config.yaml          the resolved config (written by the CLI)
//	RUN/metrics.jsonl        one JSON object per step (README.md, "Metrics")
//	RUN/checkpoints/step-N/  model, optimiser, strategy state, step (N = steps done)
//	RUN/checkpoints/LATEST   the name of the newest complete checkpoint
type Trainer struct {
	// Final is the evaluation after the last step, and LastStep the
	// metrics row of the last step trained, once Run has returned nil
	// (the summary train ends with).
	Final, LastStep map[string]float64
	// AlreadyDone is set when Run found the run finished (resumed at
	// train.steps with the final evaluation's row in metrics.jsonl) and
	// did nothing; Final and LastStep are then read from metrics.jsonl.
	AlreadyDone bool

	Cfg        *Config
	Task       core.Task
	Backend    core.Backend
	Algo       core.Algorithm
	Strategies []core.Strategy
	// Weights[i] is the `weight:` schedule of strategy i (nil, or an index
	// past the slice: none, w_t = 1). The trainer is its one owner: it
	// multiplies what the strategy returns by w_t (reward and advantage
	// bonuses, loss-term and token-loss entropy coefficients, token-loss
	// AbsKLCoef; not PGWeight, a mask) and logs explore/<name>/weight.
	Weights []core.Schedule
	RunDir  string
	Log     zerolog.Logger
	// Progress receives the progress bar (nil for none); TTY selects the
	// bar over plain lines.
	Progress io.Writer
	TTY      bool
	// DumpRollouts, when set, receives each step's batch as
	// rollout-<step>.json (docs/rollout-format.md).
	DumpRollouts string
	// Alloc, when set, holds every step's per-token columns (core.Allocator):
	// the plugin host's shared memory, so that plugins read them in place.
	// nil is the Go heap.
	Alloc       core.Allocator
	allocWarned bool
	// Gen generates the training batches; nil is the Backend (in-process).
	// With another Generator (remote servers, package rollout) the trainer
	// recomputes old log-probs and entropies with the Backend (Rescorer),
	// keeps the generator's log-probs as Sequence.RolloutLogProbs, applies
	// rollout.tis_cap, and, for a ServerGenerator, syncs weights
	// (rollout.weight_sync). Eval always generates in-process.
	Gen core.Generator
	// StopTokens end a response as the task's EOS does (GenerateRequest's
	// StopTokens): for a Hugging Face model, its stop ids by Hugging
	// Face's rule (hf.Config.StopIDs), so in-process and remote rollouts
	// stop where transformers and vLLM do.
	StopTokens []int32

	needs core.Needs
	// hookCache is what each strategy does (hooks).
	hookCache []core.Hooks
	metrics   *os.File
	tb        *tensorboard.Writer // train.logger has tensorboard
	// finalEval is set during the evaluation after the last step
	// (eval.final_k applies).
	finalEval bool
	// synced is set once the servers were given the policy in this Run.
	synced bool
	// generated is the number of responses generated in the run's steps
	// before step generatedAt (train/generated_responses_total less the
	// current step's): Step adds to it, checkpoints keep it, Restore sets
	// both, and Run rebuilds it from metrics.jsonl when it starts at
	// another step (see openMetrics).
	generated   int64
	generatedAt int
	// lastGenerated is the responses step generatedAt-1 generated (its
	// train/generated_responses; 0 before the first step): with generated
	// it tells whether that step crossed a multiple of
	// eval.every_responses (responseEvalDue).
	lastGenerated int64
}

// Mix derives a 64-bit seed from a run seed and labels: core.Mix, kept
// here for the trainer's callers.
func Mix(seed uint64, labels ...uint64) uint64 { return core.Mix(seed, labels...) }

const (
	seedProblems = iota + 1
	seedGenerate
	seedActor
	seedCritic
	seedEval
	seedStrategy
)

// Needs is TrainNeeds of the trainer's config, algorithm and strategies.
func (t *Trainer) Needs() (core.Needs, error) { return TrainNeeds(t.Cfg, t.Algo, t.Strategies) }

// TrainNeeds is what a run of cfg computes: RunNeeds of its algorithm and
// strategies, plus log-probs and entropies (always), with a critic of
// train.value_heads heads unless a strategy asks for more (cfg may be nil:
// then the declared heads).
func TrainNeeds(cfg *Config, algo core.Algorithm, strategies []core.Strategy) (core.Needs, error) {
	n, err := core.RunNeeds(algo, strategies)
	if err != nil {
		return n, err
	}
	n.LogProbs, n.Entropies = true, true
	if n.ValueHeads > 0 && cfg != nil {
		n.ValueHeads = max(n.ValueHeads, cfg.Train.ValueHeads)
	}
	return n, nil
}

// Run trains from step start (0, or the step of the checkpoint resumed
// from) to train.steps. On ctx cancellation it writes a checkpoint of the
// last completed step and returns ctx.Err().
func (t *Trainer) Run(ctx context.Context, start int) error {
	var err error
	if t.needs, err = t.Needs(); err != nil {
		return err
	}
	if t.Gen != nil {
		if err := core.CheckRemoteNeeds(t.Strategies, t.Backend); err != nil {
			return err
		}
	}
	if t.Cfg.Train.CriticWarmup > 0 && t.needs.ValueHeads == 0 {
		return fmt.Errorf("config: train.critic_warmup = %d: the run has no critic (algorithm %s and its strategies need none)", t.Cfg.Train.CriticWarmup, t.Algo.Name())
	}
	t.synced = false
	if start == t.Cfg.Train.Steps {
		final, last, done, err := t.finishedRows(start)
		if err != nil {
			return err
		}
		if done {
			// A finished run resumed without more steps: nothing to
			// train or evaluate, and nothing in the run directory changes.
			t.Final, t.LastStep, t.AlreadyDone = final, last, true
			t.Log.Info().Int("step", start).Str("run_dir", t.RunDir).
				Msgf("nothing to do: the run finished at step %d (to train on, resume with --set train.steps=N, N > %d)", start, start)
			return nil
		}
	}
	if err := t.openMetrics(start); err != nil {
		return err
	}
	defer t.metrics.Close()
	if slices.Contains(t.Cfg.Train.Logger, "tensorboard") {
		if t.tb, err = tensorboard.Open(t.RunDir, start); err != nil {
			return err
		}
		defer func() { t.tb.Close(); t.tb = nil }()
		// The run's config as hyperparameters and as text (once a run).
		if err := t.tb.Config(time.Now(), t.Cfg.Raw); err != nil {
			return fmt.Errorf("train.logger tensorboard: %w", err)
		}
	}
	total := t.Cfg.Train.Steps
	still := &stillWatch{}
	prog := NewProgress(t.Progress, t.TTY, "train", start, total)
	t.Log.Info().Int("from_step", start).Int("steps", total).Str("algorithm", t.Algo.Name()).
		Str("strategies", strategyNames(t.Strategies)).Str("run_dir", t.RunDir).Msg("training")
	for step := start; step < total; step++ {
		if ctx.Err() != nil {
			return t.interrupted(ctx, step)
		}
		m := map[string]float64{}
		if t.Cfg.Eval.Every > 0 && step%t.Cfg.Eval.Every == 0 && (step > 0 || t.Cfg.Eval.AtStart) || step == 0 && t.Cfg.Eval.AtStart ||
			responseEvalDue(t.Cfg.Eval.EveryResponses, t.generated, t.lastGenerated) {
			if err := t.Evaluate(step, m); err != nil {
				return err
			}
		}
		if err := t.Step(step, m); err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
		still.observe(t.Log, step, m)
		if err := t.writeMetrics(step, m); err != nil {
			return err
		}
		t.LastStep = m
		prog.Update(step+1, fmt.Sprintf("acc %.3f reward %.3f", m["reward/acc"], m["reward/mean"]))
		if (step+1)%t.Cfg.Train.CheckpointEvery == 0 || step+1 == total {
			if err := t.Checkpoint(step + 1); err != nil {
				return err
			}
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	still.end(t.Log, start, total)
	m := map[string]float64{}
	if err := t.EvaluateFinal(total, m); err != nil {
		return err
	}
	if err := t.writeMetrics(total, m); err != nil {
		return err
	}
	ev := zerolog.Dict()
	for k, v := range m {
		ev = ev.Float64(k, v)
	}
	if t.TTY {
		// A terminal gets the summary table next: no need to repeat it.
		t.Log.Info().Msg("done")
	} else {
		t.Log.Info().Dict("final", ev).Msg("done")
	}
	t.Final = m
	return nil
}

func (t *Trainer) interrupted(ctx context.Context, step int) error {
	t.Log.Warn().Int("step", step).Msg("interrupted: writing a checkpoint")
	if err := t.Checkpoint(step); err != nil {
		return err
	}
	return ctx.Err()
}

func strategyNames(ss []core.Strategy) string {
	var names []string
	for _, s := range ss {
		names = append(names, s.Name())
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ",")
}

func (t *Trainer) info(step int) core.StepInfo {
	return core.StepInfo{Step: step, TotalSteps: t.Cfg.Train.Steps, Algorithm: t.Algo.Name(), Seed: t.Cfg.Seed,
		MaxResponseTokens: t.Cfg.Rollout.MaxResponseTokens}
}

// Step runs one training step and adds its metrics to m.
func (t *Trainer) Step(step int, m map[string]float64) error {
	stepStart := time.Now()
	info := t.info(step)
	if a, ok := t.Alloc.(core.StepAllocator); ok {
		// The previous step's columns are no longer read.
		if err := a.Reset(); err != nil && !t.allocWarned {
			t.allocWarned = true
			t.Log.Warn().Err(err).Msg("plugins: the shared-memory arena could not grow; columns stay on the heap and are copied to the plugins")
		}
	}
	r, generated, genTime, klCoef, err := t.sample(step, m)
	if err != nil {
		return err
	}
	t.lastGenerated = int64(m["train/generated_responses"])
	t.generated += t.lastGenerated
	t.generatedAt = step + 1
	m["train/generated_responses_total"] = float64(t.generated)
	lossTerms, err := t.shapeStep(step, info, r, m)
	if err != nil {
		return err
	}
	updStart := time.Now()
	if err := t.updateActor(step, r, lossTerms, klCoef, m); err != nil {
		return err
	}
	if err := t.updateCritic(step, info, r, m); err != nil {
		return err
	}
	if err := t.observe(info, r, m); err != nil {
		return err
	}
	rolloutMetrics(r, generated, m)
	m["perf/gen_s"] = genTime.Seconds()
	if _, ok := m["perf/gen_tokens_per_s"]; !ok { // set by Collect under dynamic sampling
		m["perf/gen_tokens_per_s"] = float64(r.NumTokens()) / genTime.Seconds()
	}
	m["perf/update_s"] = time.Since(updStart).Seconds()
	if every := t.Cfg.Rollout.WeightSync.Every; every > 0 && (step+1)%every == 0 && step+1 < t.Cfg.Train.Steps {
		if err := t.syncWeights(m); err != nil {
			return err
		}
	}
	m["perf/step_s"] = time.Since(stepStart).Seconds()
	return nil
}

// sample is a step's first part: the servers synced (once per Run), the
// batch collected, the critic's values and (for the KL reward) the
// reference log-probs scored, all checked finite. klCoef is the actor
// loss's KL weight: train.kl_coef, or 0 when the KL is in the reward.
//
// generated is every response generated under dynamic sampling (see
// collect), nil without it.
func (t *Trainer) sample(step int, m map[string]float64) (r *core.Rollout, generated []core.Sequence, genTime time.Duration, klCoef float64, err error) {
	c := t.Cfg
	if !t.synced {
		// Once before the first generation of this Run, so the servers
		// hold the trainer's policy from the start, and after a resume.
		if err := t.syncWeights(m); err != nil {
			return nil, nil, 0, 0, err
		}
	}
	r, generated, genTime, err = t.collect(step, m)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	if sg, ok := t.Gen.(core.ServerGenerator); ok {
		m["rollout/servers_live"] = float64(sg.LiveServers())
	}
	if t.needs.ValueHeads > 0 {
		r.Alloc = t.Alloc
		if err := inParts(r, t.scoringPart(len(r.Seqs)), t.Backend.ScoreValues); err != nil {
			return nil, nil, 0, 0, err
		}
	}
	klCoef = c.Train.KLCoef
	if c.Train.KLMode == "reward" && c.Train.KLCoef > 0 {
		klCoef = 0
		if err := t.referenceLogProbs(r); err != nil {
			return nil, nil, 0, 0, err
		}
	}
	// Every per-token signal one column from here to the loss (core/columns.go).
	r.Alloc = t.Alloc
	r.Pack()
	if err := checkRolloutFinite(r); err != nil {
		return nil, nil, 0, 0, err
	}
	return r, generated, genTime, klCoef, nil
}

// shapeStep is a step's second part: rewards and advantages shaped (Shape),
// the strategies' loss terms and token-loss weights gathered, the
// importance weights of a remote batch applied, the batch dumped when
// asked. It returns the actor loss's terms.
func (t *Trainer) shapeStep(step int, info core.StepInfo, r *core.Rollout, m map[string]float64) (core.LossTerms, error) {
	c := t.Cfg
	if err := t.Shape(info, r, m); err != nil {
		return core.LossTerms{}, err
	}
	if err := checkShapedFinite(r); err != nil {
		return core.LossTerms{}, err
	}
	lossTerms := core.LossTerms{EntropyCoef: c.Train.EntropyCoef}
	for i, s := range t.Strategies {
		if h := t.hooks()[i]; h.LossTerms != nil {
			lt, err := h.LossTerms(info)
			if err != nil {
				return core.LossTerms{}, fmt.Errorf("strategies[%d] (%s): loss terms: %w", i, s.Name(), err)
			}
			if err := core.CheckLossTerms(lt); err != nil {
				return core.LossTerms{}, fmt.Errorf("strategies[%d] (%s): loss terms: %w", i, s.Name(), err)
			}
			if w, weighted := t.weight(i, info); weighted {
				if lt.EntropyCoef *= w; !finite(lt.EntropyCoef) {
					return core.LossTerms{}, fmt.Errorf("strategies[%d] (%s): loss terms: the entropy coefficient times the weight w_t = %v is not finite", i, s.Name(), w)
				}
			}
			lossTerms.EntropyCoef += lt.EntropyCoef
		}
	}
	tokenEntCoef, err := t.ApplyTokenLoss(info, r, m)
	if err != nil {
		return core.LossTerms{}, err
	}
	lossTerms.EntropyCoef += tokenEntCoef
	if t.Gen != nil || c.Rollout.BF16() {
		if err := applyTIS(r, c.Rollout.TISCap, m); err != nil {
			return core.LossTerms{}, err
		}
	}
	if t.DumpRollouts != "" {
		if err := core.WriteRolloutFile(filepath.Join(t.DumpRollouts, fmt.Sprintf("rollout-%06d.json", step)), r); err != nil {
			return core.LossTerms{}, err
		}
	}
	return lossTerms, nil
}

// updateActor takes the actor's update of a step, unless the critic is
// still warming up (the first train.critic_warmup steps leave the actor as
// it is: actor/updated 0).
func (t *Trainer) updateActor(step int, r *core.Rollout, lossTerms core.LossTerms, klCoef float64, m map[string]float64) error {
	c := t.Cfg
	m["actor/entropy_coef"] = lossTerms.EntropyCoef
	if step < c.Train.CriticWarmup {
		m["actor/updated"] = 0
		return nil
	}
	if def, _ := core.LookupPolicyLoss(c.Train.PolicyLoss); def.Sequence != nil {
		for i := range r.Seqs {
			if r.Seqs[i].PGWeight != nil || r.Seqs[i].AbsKLCoef != nil {
				return fmt.Errorf("train.policy_loss %s is a sequence-level loss: the per-token weights of a token-loss strategy "+
					"(clip_cov, kl_cov, forking_tokens, a plugin's token loss) or of rollout.tis_cap cannot apply to it", c.Train.PolicyLoss)
			}
		}
	}
	am, err := t.Backend.UpdateActor(r, core.ActorUpdate{Epochs: c.Train.PPOEpochs, Minibatches: c.Train.Minibatches, MicroBatchSize: c.Train.MicroBatchSize,
		ClipLow: c.Train.ClipLow, ClipHigh: c.Train.ClipHigh, ClipRatioC: c.Train.ClipRatioC,
		LossAggMode: c.Train.LossAggMode, RatioLevel: c.Train.RatioLevel, MaxResponseTokens: c.Rollout.MaxResponseTokens,
		EntropyCoef: lossTerms.EntropyCoef, KLCoef: klCoef, KLEstimator: c.Train.KLEstimator, PolicyLoss: c.Train.PolicyLoss,
		PolicyLossParams: c.Train.PolicyLossParams, Temperature: c.Rollout.Temperature, Seed: Mix(c.Seed, seedActor, uint64(step))})
	if err != nil {
		return err
	}
	if err := checkMetricsFinite(am, "actor/"); err != nil {
		return err
	}
	for k, v := range am {
		m[k] = v
	}
	m["actor/updated"] = 1
	return nil
}

// updateCritic fits the critic, when the run has one, with the head masks
// the strategies draw.
func (t *Trainer) updateCritic(step int, info core.StepInfo, r *core.Rollout, m map[string]float64) error {
	if t.needs.ValueHeads == 0 {
		return nil
	}
	c := t.Cfg
	for i, s := range t.Strategies {
		if h := t.hooks()[i]; h.HeadMasks != nil {
			masks, err := h.HeadMasks(info, r)
			if err != nil {
				return fmt.Errorf("strategies[%d] (%s): head masks: %w", i, s.Name(), err)
			}
			if err := core.CheckHeadMasks(r.SeqLens(), masks, r.ValueHeads); err != nil {
				return fmt.Errorf("strategies[%d] (%s): head masks: %w", i, s.Name(), err)
			}
			for j := range r.Seqs {
				r.Seqs[j].HeadMask = masks[j]
			}
		}
	}
	cm, err := t.Backend.UpdateCritic(r, core.CriticUpdate{Epochs: c.Train.PPOEpochs, Minibatches: c.Train.Minibatches, MicroBatchSize: c.Train.MicroBatchSize,
		Seed: Mix(c.Seed, seedCritic, uint64(step))})
	if err != nil {
		return err
	}
	if err := checkMetricsFinite(cm, "critic/"); err != nil {
		return err
	}
	for k, v := range cm {
		m[k] = v
	}
	return nil
}

// observe gives the finished step to the strategies' Observers and adds
// their metrics.
func (t *Trainer) observe(info core.StepInfo, r *core.Rollout, m map[string]float64) error {
	for i, s := range t.Strategies {
		if h := t.hooks()[i]; h.Observe != nil {
			om, err := h.Observe(info, r)
			if err != nil {
				return fmt.Errorf("strategies[%d] (%s): observe: %w", i, s.Name(), err)
			}
			if err := core.CheckObserve(om); err != nil {
				return fmt.Errorf("strategies[%d] (%s): observe: %w", i, s.Name(), err)
			}
			for k, v := range om {
				m[k] = v
			}
		}
	}
	return nil
}

// applyTIS multiplies each token's PGWeight (the strategies' combined
// weight, nil = 1) by its truncated importance-sampling weight (TISWeights)
// when capC > 0, and adds the mismatch metrics to m either way.
func applyTIS(r *core.Rollout, capC float64, m map[string]float64) error {
	w, err := core.TISWeights(r, capC, m)
	if err != nil || w == nil {
		return err
	}
	for i := range r.Seqs {
		s := &r.Seqs[i]
		if s.PGWeight == nil {
			s.PGWeight = w[i]
			continue
		}
		for t := range s.PGWeight {
			s.PGWeight[t] *= w[i][t]
		}
	}
	return nil
}

// referenceLogProbs fills RefLogProbs from the backend's frozen reference
// policy (train.kl_mode: reward), in parts of scoringPart sequences.
func (t *Trainer) referenceLogProbs(r *core.Rollout) error {
	rs, ok := t.Backend.(core.ReferenceScorer)
	if !ok {
		return fmt.Errorf("config: train.kl_mode: reward: the backend (%s) scores no reference log-probs (core.ReferenceScorer)", t.Backend.Engine())
	}
	lo := 0 // index in r.Seqs of the part's first sequence
	return inParts(r, t.scoringPart(len(r.Seqs)), func(sub *core.Rollout) error {
		lps, err := rs.ReferenceLogProbs(sub, t.Cfg.Rollout.Temperature)
		if err != nil {
			return fmt.Errorf("train.kl_mode: reward: %w", err)
		}
		if len(lps) != len(sub.Seqs) {
			return fmt.Errorf("train.kl_mode: reward: the backend gave %d reference rows for %d sequences", len(lps), len(sub.Seqs))
		}
		for i := range sub.Seqs {
			if len(lps[i]) != sub.Seqs[i].Len() {
				return fmt.Errorf("train.kl_mode: reward: sequence %d: %d reference log-probs for %d tokens", lo+i, len(lps[i]), sub.Seqs[i].Len())
			}
			sub.Seqs[i].RefLogProbs = lps[i]
		}
		lo += len(sub.Seqs)
		return nil
	})
}

// stillSteps is how many actor updates in a row with a zero gradient make
// the trainer warn that the policy is not moving.
const stillSteps = 10

// stillWatch follows actor/grad_norm over a run's updates. A zero gradient
// norm means that update changed nothing by its gradient (every token's
// advantage and loss weight zero: in GRPO, every group's rewards equal),
// and when every update since the run started had one, Adam's moments are
// still zero and no parameter has moved at all: the run, and an adapter
// exported from it, is its base. Both are logged as warnings, since
// actor/updated says only that an update step ran.
type stillWatch struct {
	streak, updates, moved int
	warned                 bool
}

func (w *stillWatch) observe(log zerolog.Logger, step int, m map[string]float64) {
	if m["actor/updated"] != 1 {
		return
	}
	w.updates++
	if g, ok := m["actor/grad_norm"]; ok && g == 0 {
		w.streak++
	} else {
		w.streak, w.warned = 0, false
		w.moved++
	}
	if w.streak == stillSteps && !w.warned {
		w.warned = true
		ev := log.Warn().Int("step", step).Int("updates", stillSteps)
		if w.moved == 0 {
			ev.Msg("no parameter has moved: actor/grad_norm was 0 in every update of this run so far (every advantage zero: in GRPO every group's rewards are equal, e.g. all -1); check the rewards and the base model")
		} else {
			ev.Msg("the policy is not moving: actor/grad_norm was 0 in each of the last updates (every advantage zero: in GRPO every group's rewards are equal)")
		}
	}
}

// end warns, at the end of a run shorter than stillSteps updates, when none
// of its updates moved anything.
func (w *stillWatch) end(log zerolog.Logger, start, total int) {
	if w.updates > 0 && w.moved == 0 && !w.warned {
		log.Warn().Int("from_step", start).Int("steps", total).Int("updates", w.updates).
			Msg("no parameter has moved: actor/grad_norm was 0 in every update of this run (every advantage zero: in GRPO every group's rewards are equal, e.g. all -1); the weights, and an adapter exported from them, are the base's")
	}
}
