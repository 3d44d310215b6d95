package trainer

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/cde-rl/cde/core"
)

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
// It adds train/generated_responses to m (every response generated: the
// batch's size without dynamic sampling, every batch drawn with it), and
// with dynamic sampling train/dropped_groups, train/extra_batches,
// train/kept_groups and perf/gen_tokens_per_s over every batch drawn.
func (t *Trainer) Collect(step int, m map[string]float64) (*core.Rollout, time.Duration, error) {
	r, _, genTime, err := t.collect(step, m)
	return r, genTime, err
}

// collect is Collect, and also returns, under dynamic sampling, every
// response generated in the step: the batches drawn, kept groups and
// dropped ones, in draw order, with their own group numbers and without
// their pooled states (Embedding), for the rollout metrics over all of
// them (rolloutMetrics). Without dynamic sampling generated is nil: the
// batch is all that was generated.
func (t *Trainer) collect(step int, m map[string]float64) (r *core.Rollout, generated []core.Sequence, genTime time.Duration, err error) {
	c := t.Cfg
	draw := func(extra int) (*core.Rollout, time.Duration, error) {
		labels := []uint64{uint64(step)}
		if extra > 0 {
			labels = append(labels, uint64(extra))
		}
		rng := rand.New(rand.NewPCG(Mix(c.Seed, append([]uint64{seedProblems}, labels...)...), 0))
		problems := t.Task.SampleTrain(rng, c.Train.PromptsPerStep)
		return t.rollout(step, problems, c.Rollout.N, c.Rollout.Temperature, Mix(c.Seed, append([]uint64{seedGenerate}, labels...)...), t.needs, t.Gen, c.Rollout.MaxRows, true)
	}
	first, genTime, err := draw(0)
	if err != nil {
		return nil, nil, 0, err
	}
	if !c.Train.DynamicSampling.Enabled {
		m["train/generated_responses"] = float64(len(first.Seqs))
		return first, nil, genTime, nil
	}
	out := &core.Rollout{Step: first.Step, TotalSteps: first.TotalSteps, Algorithm: first.Algorithm, ValueHeads: first.ValueHeads}
	var groupLens []int
	r = first
	dropped, extra := 0, 0
	genTokens := first.NumTokens()
	for {
		for _, s := range r.Seqs {
			s.Embedding = nil // a copy: the kept batch keeps its own
			generated = append(generated, s)
		}
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
			return nil, nil, 0, err
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
	m["train/generated_responses"] = float64(len(generated))
	m["train/dropped_groups"] = float64(dropped)
	m["train/extra_batches"] = float64(extra)
	m["train/kept_groups"] = float64(len(groupLens))
	// Generation speed counts every batch drawn, kept or not.
	m["perf/gen_tokens_per_s"] = float64(genTokens) / genTime.Seconds()
	if n == 0 {
		return first, generated, genTime, nil
	}
	return out, generated, genTime, nil
}

// rollout samples n responses to each problem with gen (nil: the Backend,
// in-process) and verifies them. A batch from another generator is
// rescored with the Backend (see Trainer.Gen); the rescoring is not in the
// returned generation time.
//
// maxRows > 0 generates in-process at most maxRows rows at a time
// (rollout.max_rows, GenerateRequest.Slots): the same responses as one
// call of every row, since each response's noise is its own.
//
// train marks a training batch: with rollout.dtype bfloat16 its responses
// are rescored in float32 like a remote generator's (the sampler's
// log-probs kept as RolloutLogProbs); an evaluation's are not.
func (t *Trainer) rollout(step int, problems []core.Problem, n int, temp float64, seed uint64, needs core.Needs, gen core.Generator, maxRows int, train bool) (*core.Rollout, time.Duration, error) {
	tok := t.Task.Tokenizer()
	ver := t.Task.Verifier()
	keyer, hasKeys := ver.(core.AnswerKeyer)
	solver, hasSolutions := ver.(core.SolutionKeyer)
	var prompts [][]int32
	r := &core.Rollout{Step: step, TotalSteps: t.Cfg.Train.Steps, ValueHeads: needs.ValueHeads}
	if t.Algo != nil {
		r.Algorithm = t.Algo.Name()
	}
	for gi, p := range problems {
		enc := core.EncodePrompt(tok, p.Prompt)
		for range n {
			prompts = append(prompts, enc)
			r.Seqs = append(r.Seqs, core.Sequence{Group: gi, ProblemID: p.ID, Prompt: enc})
		}
	}
	remote := gen != nil
	// rescored: the float32 policy recomputes the log-probs, entropies
	// and pooled states of a sampler that is not it (servers, bfloat16).
	rescored := remote || train && t.Cfg != nil && t.Cfg.Rollout.BF16()
	pooling := needs.Pooling
	if !remote {
		gen = t.Backend
	}
	if rescored {
		pooling = "" // rescore pools them
	}
	start := time.Now()
	req := core.GenerateRequest{Prompts: prompts, Temperature: temp,
		MaxTokens: t.Cfg.Rollout.MaxResponseTokens, Seed: seed, Pooling: pooling, StopTokens: t.StopTokens}
	if !remote && maxRows > 0 {
		req.Slots = maxRows
	}
	gens, err := gen.Generate(req)
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
		if rescored {
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
	if rescored {
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
func inParts(r *core.Rollout, part int, f func(sub *core.Rollout) error) error {
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
// loss) after remote or bfloat16 generation, in parts of scoringPart
// sequences.
func (t *Trainer) rescore(r *core.Rollout, temp float64, pooling string) error {
	return inParts(r, t.scoringPart(len(r.Seqs)), func(sub *core.Rollout) error {
		return t.rescorePart(sub.Seqs, temp, pooling)
	})
}

func (t *Trainer) rescorePart(part []core.Sequence, temp float64, pooling string) error {
	seqs := make([]*core.Sequence, len(part))
	for i := range part {
		seqs[i] = &part[i]
	}
	var lps, ents, embs [][]float64
	var err error
	if pooling != "" {
		er, ok := t.Backend.(core.EmbeddingRescorer)
		if !ok {
			return fmt.Errorf("config: rollout.servers: pooling %s: the backend (%s) cannot recompute pooled states (core.EmbeddingRescorer)", pooling, t.Backend.Engine())
		}
		lps, ents, embs, err = er.RescoreWithEmbeddings(seqs, temp, pooling)
		if err == nil && len(embs) != len(seqs) {
			err = fmt.Errorf("%d embeddings for %d sequences", len(embs), len(seqs))
		}
	} else {
		rs, ok := t.Backend.(core.Rescorer)
		if !ok {
			return fmt.Errorf("config: rollout.servers: the backend (%s) cannot recompute log-probs (core.Rescorer), which remote generation needs", t.Backend.Engine())
		}
		lps, ents, err = rs.ScoreLogProbs(seqs, temp)
	}
	if err != nil {
		return fmt.Errorf("rescoring the sampled responses in float32: %w", err)
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
	sg, ok := t.Gen.(core.ServerGenerator)
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
