package core

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// Trainer runs the RLVR loop of DESIGN section 1 and owns the run directory:
//
//	RUN/config.yaml          the resolved config (written by the CLI)
//	RUN/metrics.jsonl        one JSON object per step (DESIGN section 6 names)
//	RUN/checkpoints/step-N/  model, optimiser, strategy state, step (N = steps done)
//	RUN/checkpoints/LATEST   the name of the newest complete checkpoint
type Trainer struct {
	// Final is the evaluation after the last step, and LastStep the
	// metrics row of the last step trained, once Run has returned nil
	// (the summary train ends with).
	Final, LastStep map[string]float64

	Cfg        *Config
	Task       Task
	Backend    Backend
	Algo       Algorithm
	Strategies []Strategy
	RunDir     string
	Log        zerolog.Logger
	// Progress receives the progress bar (nil for none); TTY selects the
	// bar over plain lines.
	Progress io.Writer
	TTY      bool
	// DumpRollouts, when set, receives each step's batch as
	// rollout-<step>.json (DESIGN section 4).
	DumpRollouts string
	// Gen generates the training batches; nil is the Backend (in-process).
	// With another Generator (remote servers, package rollout) the trainer
	// recomputes old log-probs and entropies with the Backend (Rescorer),
	// keeps the generator's log-probs as Sequence.RolloutLogProbs, applies
	// rollout.tis_cap, and, for a ServerGenerator, syncs weights
	// (rollout.weight_sync). Eval always generates in-process.
	Gen Generator
	// StopTokens end a response as the task's EOS does (GenerateRequest's
	// StopTokens): for a Hugging Face model, its stop ids by Hugging
	// Face's rule (hf.Config.StopIDs), so in-process and remote rollouts
	// stop where transformers and vLLM do.
	StopTokens []int32

	needs   Needs
	metrics *os.File
	// finalEval is set during the evaluation after the last step
	// (eval.final_k applies).
	finalEval bool
	// synced is set once the servers were given the policy in this Run.
	synced bool
}

// Mix derives a 64-bit seed from a run seed and labels (SplitMix64 over the
// labels), so every step, purpose and eval draws independent, reproducible
// randomness without any RNG state to checkpoint.
func Mix(seed uint64, labels ...uint64) uint64 {
	z := seed
	for _, l := range labels {
		z ^= l + 0x9e3779b97f4a7c15 + (z << 6) + (z >> 2)
		z += 0x9e3779b97f4a7c15
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
	}
	return z
}

const (
	seedProblems = iota + 1
	seedGenerate
	seedActor
	seedCritic
	seedEval
	seedStrategy
)

// Needs is TrainNeeds of the trainer's config, algorithm and strategies.
func (t *Trainer) Needs() (Needs, error) { return TrainNeeds(t.Cfg, t.Algo, t.Strategies) }

// TrainNeeds is what a run of cfg computes: RunNeeds of its algorithm and
// strategies, plus log-probs and entropies (always), with a critic of
// train.value_heads heads unless a strategy asks for more (cfg may be nil:
// then the declared heads).
func TrainNeeds(cfg *Config, algo Algorithm, strategies []Strategy) (Needs, error) {
	n, err := RunNeeds(algo, strategies)
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
		if err := CheckRemoteNeeds(t.Strategies, t.Backend); err != nil {
			return err
		}
	}
	if t.Cfg.Train.CriticWarmup > 0 && t.needs.ValueHeads == 0 {
		return fmt.Errorf("config: train.critic_warmup = %d: the run has no critic (algorithm %s and its strategies need none)", t.Cfg.Train.CriticWarmup, t.Algo.Name())
	}
	t.synced = false
	if err := t.openMetrics(start); err != nil {
		return err
	}
	defer t.metrics.Close()
	total := t.Cfg.Train.Steps
	prog := NewProgress(t.Progress, t.TTY, "train", start, total)
	t.Log.Info().Int("from_step", start).Int("steps", total).Str("algorithm", t.Algo.Name()).
		Str("strategies", strategyNames(t.Strategies)).Str("run_dir", t.RunDir).Msg("training")
	for step := start; step < total; step++ {
		if ctx.Err() != nil {
			return t.interrupted(ctx, step)
		}
		m := map[string]float64{}
		if t.Cfg.Eval.Every > 0 && step%t.Cfg.Eval.Every == 0 && (step > 0 || t.Cfg.Eval.AtStart) || step == 0 && t.Cfg.Eval.AtStart {
			if err := t.Evaluate(step, m); err != nil {
				return err
			}
		}
		if err := t.Step(step, m); err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
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
	t.Log.Info().Dict("final", ev).Msg("done")
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

func strategyNames(ss []Strategy) string {
	var names []string
	for _, s := range ss {
		names = append(names, s.Name())
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ",")
}

func (t *Trainer) info(step int) StepInfo {
	return StepInfo{Step: step, TotalSteps: t.Cfg.Train.Steps, Algorithm: t.Algo.Name(), Seed: t.Cfg.Seed}
}

// Collect samples one step's batch: prompts_per_step problems x rollout.n
// responses, verified. With train.dynamic_sampling it is DAPO's dynamic
// sampling (KeepInformativeGroups): groups whose verifier rewards are all
// equal are dropped and another prompts_per_step problems are drawn (batch
// e = 1, 2, ... with seeds mixed from the step and e, so a run is
// reproducible) until prompts_per_step groups are kept or
// max_extra_batches more batches were drawn; kept groups are taken in
// draw order, renumbered 0, 1, .... When fewer were kept, the step trains
// on them, cut to the largest count whose responses divide into
// train.minibatches equal minibatches; when none remain, on the first
// batch as drawn (every group uninformative: its outcome advantages are 0).
// It adds train/dropped_groups, train/extra_batches and train/kept_groups
// to m, and perf/gen_tokens_per_s over every batch drawn.
func (t *Trainer) Collect(step int, m map[string]float64) (*Rollout, time.Duration, error) {
	c := t.Cfg
	draw := func(extra int) (*Rollout, time.Duration, error) {
		labels := []uint64{uint64(step)}
		if extra > 0 {
			labels = append(labels, uint64(extra))
		}
		rng := rand.New(rand.NewPCG(Mix(c.Seed, append([]uint64{seedProblems}, labels...)...), 0))
		problems := t.Task.SampleTrain(rng, c.Train.PromptsPerStep)
		return t.rollout(step, problems, c.Rollout.N, c.Rollout.Temperature, Mix(c.Seed, append([]uint64{seedGenerate}, labels...)...), t.needs, t.Gen)
	}
	first, genTime, err := draw(0)
	if err != nil || !c.Train.DynamicSampling.Enabled {
		return first, genTime, err
	}
	out := &Rollout{Step: first.Step, TotalSteps: first.TotalSteps, Algorithm: first.Algorithm, ValueHeads: first.ValueHeads}
	var groupLens []int
	r, dropped, extra := first, 0, 0
	genTokens := first.NumTokens()
	for {
		keep, d := KeepInformativeGroups(r)
		dropped += d
		for _, idx := range keep {
			if len(groupLens) == c.Train.PromptsPerStep {
				break
			}
			for _, i := range idx {
				s := r.Seqs[i]
				s.Group = len(groupLens)
				out.Seqs = append(out.Seqs, s)
			}
			groupLens = append(groupLens, len(idx))
		}
		if len(groupLens) == c.Train.PromptsPerStep || extra == c.Train.DynamicSampling.MaxExtraBatches {
			break
		}
		extra++
		var dt time.Duration
		if r, dt, err = draw(extra); err != nil {
			return nil, 0, err
		}
		genTime += dt
		genTokens += r.NumTokens()
	}
	// Equal minibatches: drop the last kept groups until the responses divide.
	n := len(out.Seqs)
	for g := len(groupLens); n%max(c.Train.Minibatches, 1) != 0 && g > 0; g-- {
		n -= groupLens[g-1]
		groupLens = groupLens[:g-1]
	}
	out.Seqs = out.Seqs[:n]
	m["train/dropped_groups"] = float64(dropped)
	m["train/extra_batches"] = float64(extra)
	m["train/kept_groups"] = float64(len(groupLens))
	// Generation speed counts every batch drawn, kept or not.
	m["perf/gen_tokens_per_s"] = float64(genTokens) / genTime.Seconds()
	if n == 0 {
		return first, genTime, nil
	}
	return out, genTime, nil
}

// EncodePrompt is BOS followed by the prompt's tokens; without BOS (a
// negative BOS id) only the prompt's tokens.
func EncodePrompt(tok Tokenizer, prompt string) []int32 {
	if tok.BOS() < 0 {
		return tok.Encode(prompt)
	}
	return append([]int32{tok.BOS()}, tok.Encode(prompt)...)
}

// rollout samples n responses to each problem with gen (nil: the Backend,
// in-process) and verifies them. A batch from another generator is
// rescored with the Backend (see Trainer.Gen); the rescoring is not in the
// returned generation time.
func (t *Trainer) rollout(step int, problems []Problem, n int, temp float64, seed uint64, needs Needs, gen Generator) (*Rollout, time.Duration, error) {
	tok := t.Task.Tokenizer()
	ver := t.Task.Verifier()
	keyer, hasKeys := ver.(AnswerKeyer)
	solver, hasSolutions := ver.(SolutionKeyer)
	var prompts [][]int32
	r := &Rollout{Step: step, TotalSteps: t.Cfg.Train.Steps, ValueHeads: needs.ValueHeads}
	if t.Algo != nil {
		r.Algorithm = t.Algo.Name()
	}
	for gi, p := range problems {
		enc := EncodePrompt(tok, p.Prompt)
		for range n {
			prompts = append(prompts, enc)
			r.Seqs = append(r.Seqs, Sequence{Group: gi, ProblemID: p.ID, Prompt: enc})
		}
	}
	remote := gen != nil
	pooling := needs.Pooling
	if !remote {
		gen = t.Backend
	} else {
		pooling = "" // servers give no states; rescore pools them
	}
	start := time.Now()
	gens, err := gen.Generate(GenerateRequest{Prompts: prompts, Temperature: temp,
		MaxTokens: t.Cfg.Rollout.MaxResponseTokens, Seed: seed, Pooling: pooling, StopTokens: t.StopTokens})
	if err != nil {
		return nil, 0, err
	}
	genTime := time.Since(start)
	if len(gens) != len(prompts) {
		return nil, 0, fmt.Errorf("generate: %d generations for %d prompts", len(gens), len(prompts))
	}
	for i, g := range gens {
		s := &r.Seqs[i]
		s.Response, s.Truncated = g.Tokens, g.Truncated
		s.LogProbs, s.Entropies, s.Embedding = g.LogProbs, g.Entropies, g.Embedding
		if remote {
			s.LogProbs, s.Entropies, s.Embedding, s.RolloutLogProbs = nil, nil, nil, g.LogProbs
			if len(g.LogProbs) != len(g.Tokens) || len(g.Tokens) == 0 {
				return nil, 0, fmt.Errorf("generate: sequence %d: %d log-probs for %d tokens (want equal, >= 1)", i, len(g.LogProbs), len(g.Tokens))
			}
		}
		s.Text = tok.Decode(g.Tokens)
		s.Reward, s.Correct = ver.Verify(problems[s.Group], s.Text)
		if hasKeys {
			s.AnswerKey = keyer.AnswerKey(problems[s.Group], s.Text)
		}
		if hasSolutions && s.Correct {
			s.SolutionKey = solver.SolutionKey(problems[s.Group], s.Text)
		}
	}
	if remote {
		if err := t.rescore(r, temp, needs.Pooling); err != nil {
			return nil, 0, err
		}
	}
	return r, genTime, nil
}

// scoringPart is how many of n sequences one of the trainer's scoring
// passes takes (old log-probs after remote generation, values, reference
// log-probs): an actor minibatch (train.minibatches), or
// train.micro_batch_size when that is smaller, so that scoring needs no
// more activation memory than an update pass does.
func (t *Trainer) scoringPart(n int) int {
	part := (n + t.Cfg.Train.Minibatches - 1) / max(t.Cfg.Train.Minibatches, 1)
	if mb := t.Cfg.Train.MicroBatchSize; mb > 0 && mb < part {
		part = mb
	}
	return max(part, 1)
}

// inParts calls f on consecutive parts of r of at most part sequences:
// rollouts with r's fields whose Seqs share r's sequences.
func inParts(r *Rollout, part int, f func(sub *Rollout) error) error {
	for lo := 0; lo < len(r.Seqs); lo += part {
		sub := *r
		sub.Seqs = r.Seqs[lo:min(lo+part, len(r.Seqs))]
		if err := f(&sub); err != nil {
			return err
		}
	}
	return nil
}

// rescore sets each sequence's LogProbs and Entropies (and, with pooling,
// Embedding) from the Backend's current policy (the old policy of the actor
// loss) after remote generation, in parts of scoringPart sequences.
func (t *Trainer) rescore(r *Rollout, temp float64, pooling string) error {
	return inParts(r, t.scoringPart(len(r.Seqs)), func(sub *Rollout) error {
		return t.rescorePart(sub.Seqs, temp, pooling)
	})
}

func (t *Trainer) rescorePart(part []Sequence, temp float64, pooling string) error {
	seqs := make([]*Sequence, len(part))
	for i := range part {
		seqs[i] = &part[i]
	}
	var lps, ents, embs [][]float64
	var err error
	if pooling != "" {
		er, ok := t.Backend.(EmbeddingRescorer)
		if !ok {
			return fmt.Errorf("config: rollout.servers: pooling %s: the backend (%s) cannot recompute pooled states (core.EmbeddingRescorer)", pooling, t.Backend.Engine())
		}
		lps, ents, embs, err = er.RescoreWithEmbeddings(seqs, temp, pooling)
		if err == nil && len(embs) != len(seqs) {
			err = fmt.Errorf("%d embeddings for %d sequences", len(embs), len(seqs))
		}
	} else {
		rs, ok := t.Backend.(Rescorer)
		if !ok {
			return fmt.Errorf("config: rollout.servers: the backend (%s) cannot recompute log-probs (core.Rescorer), which remote generation needs", t.Backend.Engine())
		}
		lps, ents, err = rs.ScoreLogProbs(seqs, temp)
	}
	if err != nil {
		return fmt.Errorf("rescoring the servers' responses: %w", err)
	}
	if len(lps) != len(seqs) || len(ents) != len(seqs) {
		return fmt.Errorf("rescoring: %d log-prob rows and %d entropy rows for %d sequences", len(lps), len(ents), len(seqs))
	}
	for i, s := range seqs {
		if len(lps[i]) != s.Len() || len(ents[i]) != s.Len() {
			return fmt.Errorf("rescoring: sequence %d: %d log-probs and %d entropies for %d tokens", i, len(lps[i]), len(ents[i]), s.Len())
		}
		s.LogProbs, s.Entropies = lps[i], ents[i]
		if embs != nil {
			s.Embedding = embs[i]
		}
	}
	return nil
}

// syncWeights gives the servers of a ServerGenerator the trainer's policy
// and adds perf/sync_s (summed over the step's syncs) and
// rollout/servers_live to m. Other generators have nothing to sync.
func (t *Trainer) syncWeights(m map[string]float64) error {
	sg, ok := t.Gen.(ServerGenerator)
	if !ok || t.Cfg.Rollout.WeightSync.Every == 0 {
		return nil
	}
	start := time.Now()
	if err := sg.SyncWeights(); err != nil {
		return fmt.Errorf("weight sync: %w", err)
	}
	m["perf/sync_s"] += time.Since(start).Seconds()
	m["rollout/servers_live"] = float64(sg.LiveServers())
	t.synced = true
	return nil
}

// Step runs one training step and adds its metrics to m.
func (t *Trainer) Step(step int, m map[string]float64) error {
	stepStart := time.Now()
	c := t.Cfg
	info := t.info(step)
	if !t.synced {
		// Once before the first generation of this Run, so the servers
		// hold the trainer's policy from the start, and after a resume.
		if err := t.syncWeights(m); err != nil {
			return err
		}
	}
	r, genTime, err := t.Collect(step, m)
	if err != nil {
		return err
	}
	if sg, ok := t.Gen.(ServerGenerator); ok {
		m["rollout/servers_live"] = float64(sg.LiveServers())
	}
	if t.needs.ValueHeads > 0 {
		if err := inParts(r, t.scoringPart(len(r.Seqs)), t.Backend.ScoreValues); err != nil {
			return err
		}
	}
	klCoef := c.Train.KLCoef // the actor loss's KL weight
	if c.Train.KLMode == "reward" && c.Train.KLCoef > 0 {
		klCoef = 0
		if err := t.referenceLogProbs(r); err != nil {
			return err
		}
	}
	if err := checkRolloutFinite(r); err != nil {
		return err
	}
	if err := t.Shape(info, r, m); err != nil {
		return err
	}
	if err := checkShapedFinite(r); err != nil {
		return err
	}
	lossTerms := LossTerms{EntropyCoef: c.Train.EntropyCoef}
	for i, s := range t.Strategies {
		if h, ok := s.(LossHook); ok {
			lt, err := h.LossTerms(info)
			if err != nil {
				return fmt.Errorf("strategies[%d] (%s): loss terms: %w", i, s.Name(), err)
			}
			if err := CheckLossTerms(lt); err != nil {
				return fmt.Errorf("strategies[%d] (%s): loss terms: %w", i, s.Name(), err)
			}
			lossTerms.EntropyCoef += lt.EntropyCoef
		}
	}
	tokenEntCoef, err := t.ApplyTokenLoss(info, r, m)
	if err != nil {
		return err
	}
	lossTerms.EntropyCoef += tokenEntCoef
	if t.Gen != nil {
		if err := applyTIS(r, c.Rollout.TISCap, m); err != nil {
			return err
		}
	}
	if t.DumpRollouts != "" {
		if err := WriteRolloutFile(filepath.Join(t.DumpRollouts, fmt.Sprintf("rollout-%06d.json", step)), r); err != nil {
			return err
		}
	}
	updStart := time.Now()
	// Critic warm-up: the first train.critic_warmup steps leave the actor
	// as it is and only fit the critic (actor/updated 0).
	if step >= c.Train.CriticWarmup {
		if c.Train.PolicyLoss == LossGMPO {
			for i := range r.Seqs {
				if r.Seqs[i].PGWeight != nil || r.Seqs[i].AbsKLCoef != nil {
					return fmt.Errorf("train.policy_loss gmpo is a sequence-level loss: the per-token weights of a token-loss strategy " +
						"(clip_cov, kl_cov, forking_tokens, a plugin's token loss) or of rollout.tis_cap cannot apply to it")
				}
			}
		}
		am, err := t.Backend.UpdateActor(r, ActorUpdate{Epochs: c.Train.PPOEpochs, Minibatches: c.Train.Minibatches, MicroBatchSize: c.Train.MicroBatchSize,
			ClipLow: c.Train.ClipLow, ClipHigh: c.Train.ClipHigh, ClipRatioC: c.Train.ClipRatioC,
			LossAggMode: c.Train.LossAggMode, RatioLevel: c.Train.RatioLevel, MaxResponseTokens: c.Rollout.MaxResponseTokens,
			EntropyCoef: lossTerms.EntropyCoef, KLCoef: klCoef, KLEstimator: c.Train.KLEstimator, PolicyLoss: c.Train.PolicyLoss,
			Temperature: c.Rollout.Temperature, Seed: Mix(c.Seed, seedActor, uint64(step))})
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
	} else {
		m["actor/updated"] = 0
	}
	m["actor/entropy_coef"] = lossTerms.EntropyCoef
	if t.needs.ValueHeads > 0 {
		for i, s := range t.Strategies {
			if h, ok := s.(HeadMasker); ok {
				masks, err := h.HeadMasks(info, r)
				if err != nil {
					return fmt.Errorf("strategies[%d] (%s): head masks: %w", i, s.Name(), err)
				}
				if err := CheckHeadMasks(r.SeqLens(), masks, r.ValueHeads); err != nil {
					return fmt.Errorf("strategies[%d] (%s): head masks: %w", i, s.Name(), err)
				}
				for j := range r.Seqs {
					r.Seqs[j].HeadMask = masks[j]
				}
			}
		}
		cm, err := t.Backend.UpdateCritic(r, CriticUpdate{Epochs: c.Train.PPOEpochs, Minibatches: c.Train.Minibatches, MicroBatchSize: c.Train.MicroBatchSize,
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
	}
	for i, s := range t.Strategies {
		if o, ok := s.(Observer); ok {
			om, err := o.Observe(info, r)
			if err != nil {
				return fmt.Errorf("strategies[%d] (%s): observe: %w", i, s.Name(), err)
			}
			if err := CheckObserve(om); err != nil {
				return fmt.Errorf("strategies[%d] (%s): observe: %w", i, s.Name(), err)
			}
			for k, v := range om {
				m[k] = v
			}
		}
	}
	RolloutMetrics(r, m)
	m["perf/gen_s"] = genTime.Seconds()
	if _, ok := m["perf/gen_tokens_per_s"]; !ok { // set by Collect under dynamic sampling
		m["perf/gen_tokens_per_s"] = float64(r.NumTokens()) / genTime.Seconds()
	}
	m["perf/update_s"] = time.Since(updStart).Seconds()
	if every := c.Rollout.WeightSync.Every; every > 0 && (step+1)%every == 0 && step+1 < c.Train.Steps {
		if err := t.syncWeights(m); err != nil {
			return err
		}
	}
	m["perf/step_s"] = time.Since(stepStart).Seconds()
	return nil
}

// applyTIS multiplies each token's PGWeight (the strategies' combined
// weight, nil = 1) by its truncated importance-sampling weight (TISWeights)
// when capC > 0, and adds the mismatch metrics to m either way.
func applyTIS(r *Rollout, capC float64, m map[string]float64) error {
	w, err := TISWeights(r, capC, m)
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
func (t *Trainer) referenceLogProbs(r *Rollout) error {
	rs, ok := t.Backend.(ReferenceScorer)
	if !ok {
		return fmt.Errorf("config: train.kl_mode: reward: the backend (%s) scores no reference log-probs (core.ReferenceScorer)", t.Backend.Engine())
	}
	lo := 0 // index in r.Seqs of the part's first sequence
	return inParts(r, t.scoringPart(len(r.Seqs)), func(sub *Rollout) error {
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

// Shape applies the reward hooks, the trainer's reward penalties
// (RewardPenalties: overlong punishment, KL in the reward), the algorithm's
// advantages, the advantage hooks and the algorithm's finalisation to r, in
// config order, and adds explore/<name>/bonus_mean metrics. It is the whole
// of `cde-run shape`.
func (t *Trainer) Shape(info StepInfo, r *Rollout, m map[string]float64) error {
	for i := range r.Seqs {
		r.Seqs[i].RewardBonus = 0
		r.Seqs[i].RewardPenalty = 0
	}
	for i, s := range t.Strategies {
		h, ok := s.(RewardHook)
		if !ok {
			continue
		}
		bonus, err := h.RewardBonus(info, r)
		if err != nil {
			return fmt.Errorf("strategies[%d] (%s): reward bonus: %w", i, s.Name(), err)
		}
		if err := CheckRewardBonus(len(r.Seqs), bonus); err != nil {
			return fmt.Errorf("strategies[%d] (%s): reward bonus: %w", i, s.Name(), err)
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
	for i := range r.Seqs {
		r.Seqs[i].AdvantageBonus = make([]float64, r.Seqs[i].Len())
	}
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
func (t *Trainer) addAdvantageBonuses(info StepInfo, r *Rollout, m map[string]float64, after bool) error {
	for i, s := range t.Strategies {
		h, ok := s.(AdvantageHook)
		if !ok || afterFinalize(s) != after {
			continue
		}
		bonus, err := h.AdvantageBonus(info, r)
		if err != nil {
			return fmt.Errorf("strategies[%d] (%s): advantage bonus: %w", i, s.Name(), err)
		}
		if err := CheckAdvantageBonus(r.SeqLens(), bonus); err != nil {
			return fmt.Errorf("strategies[%d] (%s): advantage bonus: %w", i, s.Name(), err)
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
func (t *Trainer) ApplyTokenLoss(info StepInfo, r *Rollout, m map[string]float64) (float64, error) {
	for i := range r.Seqs {
		r.Seqs[i].PGWeight, r.Seqs[i].AbsKLCoef = nil, nil
	}
	entCoef := 0.0
	for i, s := range t.Strategies {
		h, ok := s.(TokenLossHook)
		if !ok {
			continue
		}
		tl, err := h.TokenLoss(info, r)
		if err != nil {
			return 0, fmt.Errorf("strategies[%d] (%s): token loss: %w", i, s.Name(), err)
		}
		if err := CheckTokenLoss(r.SeqLens(), tl); err != nil {
			return 0, fmt.Errorf("strategies[%d] (%s): token loss: %w", i, s.Name(), err)
		}
		prefix := "explore/" + s.Name() + "/"
		if tl.PGWeight != nil {
			sum := 0.0
			for j, row := range tl.PGWeight {
				w := r.Seqs[j].PGWeight
				if w == nil {
					w = make([]float64, len(row))
					for k := range w {
						w[k] = 1
					}
				}
				for k, x := range row {
					w[k] *= x
					sum += x
				}
				r.Seqs[j].PGWeight = w
			}
			m[prefix+"pg_weight_mean"] = sum / float64(max(r.NumTokens(), 1))
		}
		if tl.AbsKLCoef != nil {
			sum := 0.0
			for j, row := range tl.AbsKLCoef {
				c := r.Seqs[j].AbsKLCoef
				if c == nil {
					c = make([]float64, len(row))
				}
				for k, x := range row {
					c[k] += x
					sum += x
				}
				r.Seqs[j].AbsKLCoef = c
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
func SeqPerplexity(s *Sequence) float64 {
	if len(s.LogProbs) == 0 {
		return math.NaN()
	}
	nll := 0.0
	for _, lp := range s.LogProbs {
		nll -= lp
	}
	return math.Exp(nll / float64(len(s.LogProbs)))
}

// RolloutMetrics adds the batch's reward, length, entropy, perplexity and
// calibration metrics: calib/ppl_correct and calib/ppl_incorrect are mean
// response perplexities by verdict; calib/auroc is the probability that a
// correct response has lower perplexity than an incorrect one.
func RolloutMetrics(r *Rollout, m map[string]float64) {
	n := float64(len(r.Seqs))
	var reward, shaped, acc, length, trunc, ent, ppl float64
	var entN int
	var pplC, pplI []float64
	var scores []float64
	var pos []bool
	for i := range r.Seqs {
		s := &r.Seqs[i]
		reward += s.Reward
		shaped += s.ShapedReward
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
	m["reward/shaped_mean"] = shaped / n
	m["reward/acc"] = acc / n
	m["response/length_mean"] = length / n
	m["response/truncated_frac"] = trunc / n
	m["actor/ppl"] = ppl / n
	if entN > 0 {
		m["rollout/entropy"] = ent / float64(entN)
	}
	if len(pplC) > 0 {
		m["calib/ppl_correct"] = Mean(pplC)
	}
	if len(pplI) > 0 {
		m["calib/ppl_incorrect"] = Mean(pplI)
	}
	if a := AUROC(scores, pos); !math.IsNaN(a) {
		m["calib/auroc"] = a
	}
	if r.ValueHeads > 0 {
		if std, ok := HeadStd(r); ok {
			m["critic/head_std"] = std
		}
		if ev, ok := ExplainedVariance(r); ok {
			m["critic/explained_variance"] = ev
		}
	}
}

// EvalSets returns the task's eval sets named by eval.sets (all when
// empty), in the task's order; an unknown name is an error naming the key.
func (t *Trainer) EvalSets() ([]EvalSet, error) {
	all := t.Task.EvalSets()
	var names []string
	byName := map[string]bool{}
	for _, s := range all {
		names = append(names, s.Name)
		byName[s.Name] = true
	}
	for _, n := range slices.Sorted(maps.Keys(t.Cfg.Eval.SetK)) {
		if !byName[n] {
			return nil, fmt.Errorf("config: eval.set_k.%s: unknown eval set %q (the task has: %s)", n, n, strings.Join(names, ", "))
		}
	}
	if len(t.Cfg.Eval.Sets) == 0 {
		return all, nil
	}
	want := map[string]bool{}
	for i, n := range t.Cfg.Eval.Sets {
		if !byName[n] {
			return nil, fmt.Errorf("config: eval.sets[%d]: unknown eval set %q (the task has: %s)", i, n, strings.Join(names, ", "))
		}
		want[n] = true
	}
	var out []EvalSet
	for _, s := range all {
		if want[s.Name] {
			out = append(out, s)
		}
	}
	return out, nil
}

// Evaluate samples k responses per held-out problem of every eval set (k
// = eval.set_k's for the set, else eval.k) and adds val/<set>/avg@k and,
// for every j of the curve CurveKs(k) (1, 2, 4, ..., k), val/<set>/pass@j,
// val/<set>/pass^j (PassHatK) and, when the task's verifier names answers
// (AnswerKeyer), val/<set>/maj@j (MajAtK over the first j samples) and
// val/<set>/distinct@k, the mean over problems of its distinct correct
// solutions (SolutionKeyer, else answer keys) to m. Over sets it adds val/mean/avg@<eval.k>, the mean of every set's
// avg@k (each an estimate of pass@1, as the paper's Avg column averages
// MATH's Avg@1 with the others' Avg@16), and val/mean/pass@j (pass^j,
// maj@j), the mean over the sets evaluated with k >= j. With eval.details and a run
// directory it writes each set's per-problem correct counts
// (WriteEvalDetail).
func (t *Trainer) Evaluate(step int, m map[string]float64) error {
	c := t.Cfg
	curves := map[int][]float64{} // j -> pass@j of the sets that have it
	hats := map[int][]float64{}   // j -> pass^j, likewise
	majs := map[int][]float64{}   // j -> maj@j of the sets whose verifier names answers
	var distincts []float64       // distinct@k of the sets evaluated with eval.k
	var avgs []float64
	sets, err := t.EvalSets()
	if err != nil {
		return err
	}
	for si, set := range sets {
		problems := set.Problems
		if c.Eval.MaxProblems > 0 && len(problems) > c.Eval.MaxProblems {
			problems = problems[:c.Eval.MaxProblems]
		}
		if len(problems) == 0 {
			continue
		}
		k := c.Eval.KAt(set.Name, t.finalEval)
		ks := CurveKs(k)
		r, err := t.evalRollout(step, si, problems, k)
		if err != nil {
			return fmt.Errorf("eval %s: %w", set.Name, err)
		}
		per := make([][]bool, len(problems))
		_, hasKeys := t.Task.Verifier().(AnswerKeyer) // rollout set AnswerKey
		solver, hasSolutions := t.Task.Verifier().(SolutionKeyer)
		var keys, sols [][]string
		if hasKeys || hasSolutions {
			keys, sols = make([][]string, len(problems)), make([][]string, len(problems))
		}
		for _, s := range r.Seqs {
			per[s.Group] = append(per[s.Group], s.Correct)
			if hasKeys {
				keys[s.Group] = append(keys[s.Group], s.AnswerKey)
			}
			switch {
			case hasSolutions:
				sols[s.Group] = append(sols[s.Group], solver.SolutionKey(problems[s.Group], s.Text))
			case hasKeys:
				sols[s.Group] = keys[s.Group]
			}
		}
		var distinct []int
		if sols != nil {
			distinct = make([]int, len(per))
			sum := 0
			for i := range per {
				distinct[i] = DistinctCorrect(sols[i], per[i])
				sum += distinct[i]
			}
			dm := float64(sum) / float64(len(per))
			m[fmt.Sprintf("val/%s/distinct@%d", set.Name, k)] = dm
			if k == c.Eval.MeanK(t.finalEval) {
				distincts = append(distincts, dm)
			}
		}
		avg, pass, err := EvalSummary(per, k)
		if err != nil {
			return fmt.Errorf("eval %s: %w", set.Name, err)
		}
		counts := make([]int, len(per))
		ids := make([]string, len(per))
		for i, samples := range per {
			for _, ok := range samples {
				if ok {
					counts[i]++
				}
			}
			ids[i] = problems[i].ID
		}
		curve, err := PassAtKCurve(k, counts, ks)
		if err != nil {
			return fmt.Errorf("eval %s: %w", set.Name, err)
		}
		for j, kj := range ks {
			if kj != k {
				m[fmt.Sprintf("val/%s/pass@%d", set.Name, kj)] = curve[j]
			}
			curves[kj] = append(curves[kj], curve[j])
			hat := 0.0
			for _, c := range counts {
				p, err := PassHatK(k, c, kj)
				if err != nil {
					return fmt.Errorf("eval %s: %w", set.Name, err)
				}
				hat += p
			}
			hat /= float64(len(counts))
			m[fmt.Sprintf("val/%s/pass^%d", set.Name, kj)] = hat
			hats[kj] = append(hats[kj], hat)
			if hasKeys {
				maj := 0.0
				for i := range per {
					if MajAtK(keys[i], per[i], kj) {
						maj++
					}
				}
				maj /= float64(len(per))
				m[fmt.Sprintf("val/%s/maj@%d", set.Name, kj)] = maj
				majs[kj] = append(majs[kj], maj)
			}
		}
		m[fmt.Sprintf("val/%s/avg@%d", set.Name, k)] = avg
		m[fmt.Sprintf("val/%s/pass@%d", set.Name, k)] = pass
		avgs = append(avgs, avg)
		if c.Eval.Details && t.RunDir != "" {
			// Details serve the bench's statistics; failing to write them
			// (a set name that is no file name) does not stop training.
			d := EvalDetail{Step: step, Set: set.Name, N: k, Problems: ids, Correct: counts}
			if hasKeys {
				d.recordSamples(keys, per)
			}
			d.Distinct = distinct
			if err := WriteEvalDetail(t.RunDir, d); err != nil {
				t.Log.Warn().Err(err).Str("set", set.Name).Msg("eval details not written")
			}
		}
	}
	if len(avgs) > 0 {
		for kj, vals := range curves {
			m[fmt.Sprintf("val/mean/pass@%d", kj)] = Mean(vals)
		}
		for kj, vals := range hats {
			m[fmt.Sprintf("val/mean/pass^%d", kj)] = Mean(vals)
		}
		for kj, vals := range majs {
			m[fmt.Sprintf("val/mean/maj@%d", kj)] = Mean(vals)
		}
		if len(distincts) > 0 {
			m[fmt.Sprintf("val/mean/distinct@%d", c.Eval.MeanK(t.finalEval))] = Mean(distincts)
		}
		k := c.Eval.MeanK(t.finalEval)
		m[fmt.Sprintf("val/mean/avg@%d", k)] = Mean(avgs)
		ev := t.Log.Info().Int("step", step).Float64("avg@k", Mean(avgs)).Int("k", k)
		if p, ok := m[fmt.Sprintf("val/mean/pass@%d", k)]; ok {
			ev = ev.Float64("pass@k", p)
		}
		ev.Msg("eval")
	}
	return nil
}

// EvaluateFinal is Evaluate as the evaluation after the last step runs it
// (eval.final_k applies): a bench's base row, which stands for every arm's
// step 0, is compared with the arms' final evaluations.
func (t *Trainer) EvaluateFinal(step int, m map[string]float64) error {
	t.finalEval = true
	defer func() { t.finalEval = false }()
	return t.Evaluate(step, m)
}

// evalRollout samples k responses to each problem of eval set number si,
// in chunks of whole problems of at most eval.max_rows responses. The
// first chunk draws with the set's seed as an unchunked evaluation does,
// chunk c > 0 with that seed mixed with c; groups are numbered over the
// whole set.
func (t *Trainer) evalRollout(step, si int, problems []Problem, k int) (*Rollout, error) {
	c := t.Cfg
	seed := Mix(c.Seed, seedEval, uint64(step), uint64(si))
	chunk := c.Eval.EvalChunk(k)
	var all *Rollout
	for lo := 0; lo < len(problems); lo += chunk {
		hi := min(lo+chunk, len(problems))
		s := seed
		if lo > 0 {
			s = Mix(seed, uint64(lo/chunk))
		}
		r, _, err := t.rollout(step, problems[lo:hi], k, c.Eval.Temperature, s, Needs{}, nil)
		if err != nil {
			return nil, err
		}
		if all == nil {
			all = r
			continue
		}
		for i := range r.Seqs {
			r.Seqs[i].Group += lo
		}
		all.Seqs = append(all.Seqs, r.Seqs...)
	}
	if all == nil {
		all = &Rollout{}
	}
	return all, nil
}

// openMetrics opens RUN/metrics.jsonl for appending, first dropping any
// line of a step >= start (written after the checkpoint being resumed), so
// no step appears twice.
func (t *Trainer) openMetrics(start int) error {
	path := filepath.Join(t.RunDir, "metrics.jsonl")
	var keep []string
	if data, err := os.ReadFile(path); err == nil {
		sc := bufio.NewScanner(strings.NewReader(string(data)))
		sc.Buffer(make([]byte, 1<<20), 1<<26)
		for sc.Scan() {
			var row struct{ Step *int }
			if json.Unmarshal(sc.Bytes(), &row) != nil || row.Step == nil {
				continue // a torn last line from a crash
			}
			if *row.Step < start {
				keep = append(keep, sc.Text())
			}
		}
	}
	content := ""
	if len(keep) > 0 {
		content = strings.Join(keep, "\n") + "\n"
	}
	if err := WriteFileAtomic(path, []byte(content)); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	t.metrics = f
	return nil
}

func (t *Trainer) writeMetrics(step int, m map[string]float64) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, `{"step":%d`, step)
	for _, k := range keys {
		v := m[k]
		if math.IsNaN(v) || math.IsInf(v, 0) {
			fmt.Fprintf(&b, `,%q:null`, k)
			continue
		}
		fmt.Fprintf(&b, `,%q:%s`, k, jsonFloat(v))
	}
	b.WriteString("}\n")
	_, err := t.metrics.WriteString(b.String())
	return err
}

func jsonFloat(v float64) string {
	out, _ := json.Marshal(v)
	return string(out)
}

// WriteFileAtomic writes data to path through a synced temporary file and a
// rename, so a crash leaves either the old file or the new one.
func WriteFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
