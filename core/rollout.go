// Package core is cde's contract: the data that flows through one RLVR
// training step (the Rollout), the small interfaces that algorithms,
// exploration strategies, tasks and model backends implement, their name
// registries (strategies, algorithms, policy losses), weight schedules,
// Params, and the Check* validators of hook outputs. It is what a strategy,
// algorithm or plugin author imports, and imports the standard library
// only, as database/sql/driver is what a driver imports. The machinery
// that runs a training loop over it (the Trainer, config loading,
// checkpoints, run directories) is package trainer.
package core

// Sequence is one sampled response to one prompt, and everything the step
// computes about it. Per-token slices have one entry per valid response token
// (T = len(Response), EOS included when it was emitted).
type Sequence struct {
	// Group indexes the prompt within the step: the G responses of a prompt
	// share a Group (GRPO normalises within it).
	Group int
	// ProblemID identifies the task problem the prompt came from.
	ProblemID string
	// Prompt and Response are token ids; Text is the decoded response.
	Prompt   []int32
	Response []int32
	Text     string
	// Truncated is true when the response hit max_response_tokens without EOS.
	Truncated bool

	// Reward is the verifier's reward r (+1 correct, -1 incorrect by default);
	// Correct is the verifier's verdict.
	Reward  float64
	Correct bool
	// AnswerKey is the response's final answer as the verifier normalises
	// it (AnswerKeyer), "" when it has none or the verifier names none.
	AnswerKey string
	// SolutionKey names a correct response's solution (SolutionKeyer;
	// countdown: the canonical expression), "" for an incorrect one or when
	// the verifier names none. rare_correct clusters by it.
	SolutionKey string

	// LogProbs[t] = log pi_old(o_t | q, o_<t), under the sampling temperature.
	LogProbs []float64
	// Entropies[t] = entropy of the sampling distribution at token t.
	Entropies []float64
	// Values holds the critic's K head values per token, flat with the head
	// axis last: Values[t*K+k] = head k's value of the state in which token
	// t is chosen (ValueRow(t) is token t's K values; K = Heads()).
	Values []float64
	// Embedding is the pooled last-layer hidden state (see Needs.Pooling).
	Embedding []float64
	// RefLogProbs[t] = log pi_ref(o_t | q, o_<t) under the frozen reference
	// policy, at the sampling temperature; set only when train.kl_mode is
	// reward (nil otherwise).
	RefLogProbs []float64
	// RolloutLogProbs[t] is the log-prob the generation server reported for
	// token t (rollout.servers), at the sampling temperature, which LogProbs
	// (recomputed by the trainer) may differ from; NaN where the server gave
	// none (a stop token it stripped and the client put back). nil with
	// in-process generation.
	RolloutLogProbs []float64
	// HeadMask, flat like Values: HeadMask[t*K+k] = 1 when the (state,
	// return) pair of token t is in head k's bootstrap subset for this
	// update (MaskRow(t) is token t's K weights); nil means every head sees
	// every pair.
	HeadMask []float64

	// RewardBonus is the sum of the strategies' reward bonuses;
	// RewardPenalty the trainer's own reward terms (DAPO's overlong
	// punishment and the KL penalty of train.kl_mode: reward, see
	// RewardPenalties); ShapedReward = Reward + RewardBonus + RewardPenalty
	// (r~ in the paper).
	RewardBonus   float64
	RewardPenalty float64
	ShapedReward  float64

	// Advantages are the per-token advantages the actor uses (after bonuses
	// and, for PPO, whitening); AdvantageBonus the per-token sum of bonuses
	// added before whitening; Returns the critic's regression targets.
	Advantages     []float64
	AdvantageBonus []float64
	Returns        []float64

	// PGWeight and AbsKLCoef are the per-token actor-loss weights of the
	// strategies' TokenLossHooks (see TokenLoss), combined: nil means 1
	// (PGWeight) and 0 (AbsKLCoef) everywhere.
	PGWeight  []float64
	AbsKLCoef []float64
}

// Len is the number of valid response tokens T.
func (s *Sequence) Len() int { return len(s.Response) }

// Rollout is one step's batch. Every stage of a step reads it and adds to it.
type Rollout struct {
	// Step counts from 0; TotalSteps is train.steps (schedules use Step/TotalSteps).
	Step       int
	TotalSteps int
	// Algorithm is the name of the algorithm computing advantages.
	Algorithm string
	// ValueHeads is K, the number of critic value heads (0 without a critic).
	ValueHeads int
	Seqs       []Sequence
	// Alloc makes the blocks of the batch's per-token columns (NewColumn,
	// TokenRows; see columns.go); nil is the Go heap.
	Alloc Allocator
	// blocks are the columns NewColumn made for the sequences' fields:
	// Column reports a field's windows as one block only within one of
	// them (windows of separate allocations that happen to lie end to end
	// are not one block).
	blocks [][]float64
	// File is what a rollout file said beyond these fields (ReadRollout
	// sets it; nil for a batch the trainer sampled). Only `cde-run shape`
	// reads it.
	File *RolloutFileExtras
}

// Groups returns the indices of Seqs by Group, in order of first appearance.
func (r *Rollout) Groups() [][]int {
	index := map[int]int{}
	var groups [][]int
	for i, s := range r.Seqs {
		g, ok := index[s.Group]
		if !ok {
			g = len(groups)
			index[s.Group] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

// NumTokens is the total number of valid response tokens in the batch.
func (r *Rollout) NumTokens() int {
	n := 0
	for i := range r.Seqs {
		n += r.Seqs[i].Len()
	}
	return n
}

// Fraction is f = Step / TotalSteps, the schedules' clock.
func (r *Rollout) Fraction() float64 {
	if r.TotalSteps <= 0 {
		return 0
	}
	return float64(r.Step) / float64(r.TotalSteps)
}
