// Package strategytest is a conformance kit for core.Strategy
// implementations, in the spirit of testing/slogtest: any strategy (an
// in-tree one, or a plugin served over gRPC and wrapped by its host) calls
// Run from its tests and gets the contract of core/strategy.go checked on
// random but valid rollouts.
//
// The checks, each also exported as a function returning an error so that
// other harnesses can drive them:
//
//   - CheckNeeds: Name is non-empty and stable; Needs is well formed
//     (a known pooling, ValueHeads >= 0).
//   - CheckHooks: on rollouts carrying every signal (and, in each, an
//     empty response of 0 tokens), every hook succeeds,
//     returns finite outputs of the right shape (one reward bonus per
//     sequence; one advantage-bonus row of T entries per sequence; head
//     masks T x K; token-loss weights nil or T_i non-negative finite
//     entries per sequence) and leaves the rollout unmodified; loss terms
//     and the token loss's entropy coefficient are finite.
//   - CheckUndeclared: the hooks also succeed when the optional signals the
//     strategy did not declare in Needs (Entropies, Values, Embedding,
//     HeadMask) are nil, and, unless Needs.Correct, give the same outputs
//     when every Sequence.Correct is negated: a strategy reads only what
//     it asked for.
//   - CheckDeterminism: two fresh instances fed the same rollouts and
//     StepInfo (same Seed) return identical outputs, step after step.
//   - CheckState (Stateful strategies): after a few steps, SaveState is
//     repeatable, LoadState into a fresh instance reproduces the same state
//     bytes, and the original and the restored instance give identical
//     outputs on the next step.
//
// Instances implementing core.Closer are closed after each check.
package strategytest

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime/debug"
	"slices"
	"testing"

	"github.com/cde-rl/cde/core"
)

// Options shape the rollouts the kit generates. Zero fields take the
// defaults given on each field.
type Options struct {
	// Algorithm is the algorithm name passed in StepInfo and Rollout
	// ("grpo" by default; any registered name, every in-tree one is); it
	// selects how Advantages are filled (see RandomRollout).
	Algorithm string
	// AlgorithmParams are the algorithm's keys, as the `algorithm:`
	// mapping less name (nil: its defaults). grpo_passk needs {k: 1} here,
	// since the kit's groups may hold a single response.
	AlgorithmParams map[string]any
	// ValueHeads is K, the number of critic value heads in the rollouts
	// (default 4; Run raises it to the strategy's Needs.ValueHeads).
	ValueHeads int
	// EmbeddingDim is len(Sequence.Embedding) (default 8).
	EmbeddingDim int
	// Groups is the number of prompts per rollout (default 3) and GroupSize
	// the largest number of responses per prompt (default 4; each group
	// draws its size from 1..GroupSize).
	Groups    int
	GroupSize int
	// MaxLen is the longest response in tokens (default 12; lengths are
	// drawn from 1..MaxLen, except that the first response of the last
	// group is empty, 0 tokens, in every rollout). It is also
	// StepInfo.MaxResponseTokens, as rollout.max_response_tokens is in a
	// run: a truncated response has exactly MaxLen tokens.
	MaxLen int
	// Steps is the number of steps each check runs (default 3) and
	// TotalSteps the training length passed in StepInfo (default 10).
	Steps      int
	TotalSteps int
	// Seed is StepInfo.Seed and seeds the rollout generator.
	Seed uint64
}

func (o Options) withDefaults() Options {
	if o.Algorithm == "" {
		o.Algorithm = "grpo"
	}
	if o.ValueHeads <= 0 {
		o.ValueHeads = 4
	}
	if o.EmbeddingDim <= 0 {
		o.EmbeddingDim = 8
	}
	if o.Groups <= 0 {
		o.Groups = 3
	}
	if o.GroupSize <= 0 {
		o.GroupSize = 4
	}
	if o.MaxLen <= 0 {
		o.MaxLen = 12
	}
	if o.Steps <= 0 {
		o.Steps = 3
	}
	if o.TotalSteps <= 0 {
		o.TotalSteps = 10
	}
	return o
}

// Run runs every check as a subtest of t. newStrategy must return a fresh,
// independent instance on every call, configured identically.
func Run(t *testing.T, newStrategy func() core.Strategy, opts Options) {
	t.Helper()
	for _, c := range Checks() {
		t.Run(c.Name, func(t *testing.T) {
			if err := c.Func(newStrategy, opts); err != nil {
				t.Error(err)
			}
		})
	}
}

// Check is one named conformance check.
type Check struct {
	Name string
	Func func(newStrategy func() core.Strategy, opts Options) error
}

// Checks lists the checks Run performs, in order.
func Checks() []Check {
	return []Check{
		{"Needs", CheckNeeds},
		{"Hooks", CheckHooks},
		{"Undeclared", CheckUndeclared},
		{"Determinism", CheckDeterminism},
		{"State", CheckState},
	}
}

// All runs every check and joins their errors (nil when all pass).
func All(newStrategy func() core.Strategy, opts Options) error {
	var errs []error
	for _, c := range Checks() {
		if err := c.Func(newStrategy, opts); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.Name, err))
		}
	}
	return errors.Join(errs...)
}

// RandomRollout returns a valid rollout with every signal present:
// opts.Groups prompts of 1..opts.GroupSize responses, each of 1..opts.MaxLen
// tokens except the last group's first response, which is empty (0
// tokens, every per-token slice of it empty); rewards ±1 (Correct when
// +1); log-probs <= 0; entropies >= 0; values T x K; embeddings of opts.EmbeddingDim (about a third of them
// repeat an earlier sequence's embedding exactly, so count-based strategies
// see collisions); 0/1 head masks T x K; a small RewardBonus with
// ShapedReward = Reward + RewardBonus; Advantages and Returns as the
// algorithm would fill them, before any Finalize (the raw advantages
// advantage hooks see), and zero AdvantageBonus. The kit depends on the
// contract alone: an algorithm registered in the program (cde-run links
// every in-tree one; a test links what it imports) is built from the
// registry (core.NewAlgorithm with opts.AlgorithmParams) and its
// Advantages run, except that a critic algorithm gets GAE with gamma =
// lambda = 1 on the mean head value (the advantage R - V[t], the return R);
// a name not registered gets the kit's stand-in: that GAE for "ppo", else
// GRPO's group normalisation, (r - mean_g) / (sample std_g + 1e-6), 0 for a
// group of one. An algorithm that fails on the rollout panics, naming it.
// Step is 0 and TotalSteps opts.TotalSteps.
func RandomRollout(rng *rand.Rand, opts Options) *core.Rollout {
	o := opts.withDefaults()
	K := o.ValueHeads
	r := &core.Rollout{Step: 0, TotalSteps: o.TotalSteps, Algorithm: o.Algorithm, ValueHeads: K}
	for g := range o.Groups {
		size := 1 + rng.IntN(o.GroupSize)
		prompt := make([]int32, 2+rng.IntN(5))
		for i := range prompt {
			prompt[i] = int32(3 + rng.IntN(60))
		}
		for j := range size {
			T := 1 + rng.IntN(o.MaxLen)
			if g == o.Groups-1 && j == 0 {
				// An empty response (a server may return one), in every
				// rollout: a strategy dividing by a length meets 0/0 here.
				// When the group holds only this one, the group is empty.
				T = 0
			}
			s := core.Sequence{Group: g, ProblemID: fmt.Sprintf("p%d", g), Prompt: append([]int32(nil), prompt...)}
			s.Response = make([]int32, T)
			s.LogProbs = make([]float64, T)
			s.Entropies = make([]float64, T)
			s.Values = make([]float64, T*K)
			s.HeadMask = make([]float64, T*K)
			for t := range T {
				s.Response[t] = int32(3 + rng.IntN(60))
				s.LogProbs[t] = -rng.ExpFloat64()
				s.Entropies[t] = rng.ExpFloat64()
				for k := range K {
					s.Values[t*K+k] = rng.NormFloat64() * 0.5
					s.HeadMask[t*K+k] = float64(rng.IntN(2))
				}
			}
			s.Truncated = T == o.MaxLen
			s.Text = fmt.Sprintf("response of %d tokens", T)
			if n := len(r.Seqs); n > 0 && rng.IntN(3) == 0 {
				s.Embedding = append([]float64(nil), r.Seqs[rng.IntN(n)].Embedding...)
			} else {
				s.Embedding = make([]float64, o.EmbeddingDim)
				for j := range s.Embedding {
					s.Embedding[j] = rng.NormFloat64()
				}
			}
			s.Correct = rng.IntN(2) == 0
			s.Reward = -1
			if s.Correct {
				s.Reward = 1
			}
			s.RewardBonus = 0.1 * rng.Float64()
			s.ShapedReward = s.Reward + s.RewardBonus
			// Answers for outcome-based strategies, repeating within and
			// across groups, one in three missing (no draw from rng, so
			// the other fields are as they always were).
			s.AnswerKey = []string{"", "7", "9"}[(len(r.Seqs)+g)%3]
			r.Seqs = append(r.Seqs, s)
		}
	}
	fillAdvantages(r, o.AlgorithmParams)
	// The batch as the trainer hands it over: one column per signal.
	r.Pack()
	return r
}

// fillAdvantages sets Advantages and Returns for r.Algorithm, with the
// algorithm's params (see RandomRollout), and a zero AdvantageBonus.
func fillAdvantages(r *core.Rollout, params map[string]any) {
	registered := slices.Contains(core.Algorithms(), r.Algorithm)
	var algo core.Algorithm
	if registered {
		var err error
		if algo, err = core.NewAlgorithm(r.Algorithm, core.NewParams("algorithm", params)); err != nil {
			panic("strategytest: Options.Algorithm: " + err.Error())
		}
	}
	switch {
	case registered && algo.NeedsCritic() || !registered && r.Algorithm == "ppo":
		for i := range r.Seqs {
			s := &r.Seqs[i]
			s.Advantages, s.Returns = gae1(s.ShapedReward, s.Values, s.Len(), s.Heads())
		}
	case registered:
		if err := algo.Advantages(r); err != nil {
			panic(fmt.Sprintf("strategytest: %s advantages of the kit's rollout: %v (Options.AlgorithmParams?)", r.Algorithm, err))
		}
	default:
		groupNormalised(r)
	}
	for i := range r.Seqs {
		r.Seqs[i].AdvantageBonus = make([]float64, r.Seqs[i].Len())
	}
}

// StripUndeclared removes, in place, the optional signals that needs does
// not ask for, as a backend computing only what is asked would: Entropies
// (unless needs.Entropies), Embedding (unless needs.Pooling is set), Values
// and ValueHeads (unless needs.ValueHeads > 0) and HeadMask (unless
// needs.HeadMasks). LogProbs stay: the trainer always computes them.
func StripUndeclared(r *core.Rollout, needs core.Needs) {
	if needs.ValueHeads == 0 {
		r.ValueHeads = 0
	}
	for i := range r.Seqs {
		s := &r.Seqs[i]
		if !needs.Entropies {
			s.Entropies = nil
		}
		if needs.Pooling == "" {
			s.Embedding = nil
		}
		if needs.ValueHeads == 0 {
			s.Values = nil
		}
		if !needs.HeadMasks {
			s.HeadMask = nil
		}
	}
}

// Clone deep-copies a rollout, keeping nil slices nil.
func Clone(r *core.Rollout) *core.Rollout {
	c := *r
	c.Seqs = nil
	if r.Seqs != nil {
		c.Seqs = make([]core.Sequence, len(r.Seqs))
	}
	for i := range r.Seqs {
		s := r.Seqs[i]
		s.Prompt = clone1(s.Prompt)
		s.Response = clone1(s.Response)
		s.LogProbs = clone1(s.LogProbs)
		s.Entropies = clone1(s.Entropies)
		s.Values = clone1(s.Values)
		s.Embedding = clone1(s.Embedding)
		s.HeadMask = clone1(s.HeadMask)
		s.Advantages = clone1(s.Advantages)
		s.AdvantageBonus = clone1(s.AdvantageBonus)
		s.Returns = clone1(s.Returns)
		s.PGWeight = clone1(s.PGWeight)
		s.AbsKLCoef = clone1(s.AbsKLCoef)
		c.Seqs[i] = s
	}
	return &c
}

func clone1[T any](s []T) []T {
	if s == nil {
		return nil
	}
	return append(make([]T, 0, len(s)), s...)
}

// StepOutputs are everything a strategy's hooks returned for one step; a
// nil field means the strategy does not implement that hook (or, for
// HeadMasks, that the rollout had no critic).
type StepOutputs struct {
	RewardBonus    []float64
	AdvantageBonus [][]float64
	LossTerms      *core.LossTerms
	TokenLoss      *core.TokenLoss
	HeadMasks      [][]float64
	Metrics        map[string]float64
}

// RunStep calls the hooks s implements on r, in the trainer's order
// (reward bonus, advantage bonus, loss terms, token loss, head masks when
// r.ValueHeads > 0, observe), and checks each result: no error or panic,
// the documented shapes, finite numbers, and r left unmodified.
func RunStep(s core.Strategy, info core.StepInfo, r *core.Rollout) (StepOutputs, error) {
	var out StepOutputs
	before := Clone(r)
	unchanged := func(hook string) error {
		if !reflect.DeepEqual(before, r) {
			return fmt.Errorf("%s modified the rollout: %s", hook, firstDiff(before, r))
		}
		return nil
	}
	h := core.HooksOf(s)
	if err := h.Check(); err != nil {
		return out, err
	}
	if h.RewardBonus != nil {
		err := guard(func() (err error) { out.RewardBonus, err = h.RewardBonus(info, r); return })
		if err != nil {
			return out, fmt.Errorf("RewardBonus: %w", err)
		}
		if err := unchanged("RewardBonus"); err != nil {
			return out, err
		}
		if err := core.CheckRewardBonus(len(r.Seqs), out.RewardBonus); err != nil {
			return out, fmt.Errorf("RewardBonus: %w", err)
		}
	}
	if h.AdvantageBonus != nil {
		err := guard(func() (err error) { out.AdvantageBonus, err = h.AdvantageBonus(info, r); return })
		if err != nil {
			return out, fmt.Errorf("AdvantageBonus: %w", err)
		}
		if err := unchanged("AdvantageBonus"); err != nil {
			return out, err
		}
		if err := core.CheckAdvantageBonus(r.SeqLens(), out.AdvantageBonus); err != nil {
			return out, fmt.Errorf("AdvantageBonus: %w", err)
		}
	}
	if h.LossTerms != nil {
		var lt core.LossTerms
		err := guard(func() (err error) { lt, err = h.LossTerms(info); return })
		if err != nil {
			return out, fmt.Errorf("LossTerms: %w", err)
		}
		if err := core.CheckLossTerms(lt); err != nil {
			return out, fmt.Errorf("LossTerms: %w", err)
		}
		out.LossTerms = &lt
	}
	if h.TokenLoss != nil {
		var tl core.TokenLoss
		err := guard(func() (err error) { tl, err = h.TokenLoss(info, r); return })
		if err != nil {
			return out, fmt.Errorf("TokenLoss: %w", err)
		}
		if err := unchanged("TokenLoss"); err != nil {
			return out, err
		}
		if err := core.CheckTokenLoss(r.SeqLens(), tl); err != nil {
			return out, fmt.Errorf("TokenLoss: %w", err)
		}
		out.TokenLoss = &tl
	}
	if h.HeadMasks != nil && r.ValueHeads > 0 {
		err := guard(func() (err error) { out.HeadMasks, err = h.HeadMasks(info, r); return })
		if err != nil {
			return out, fmt.Errorf("HeadMasks: %w", err)
		}
		if err := unchanged("HeadMasks"); err != nil {
			return out, err
		}
		if err := core.CheckHeadMasks(r.SeqLens(), out.HeadMasks, r.ValueHeads); err != nil {
			return out, fmt.Errorf("HeadMasks: %w", err)
		}
	}
	if h.Observe != nil {
		err := guard(func() (err error) { out.Metrics, err = h.Observe(info, r); return })
		if err != nil {
			return out, fmt.Errorf("Observe: %w", err)
		}
		if err := unchanged("Observe"); err != nil {
			return out, err
		}
		if err := core.CheckObserve(out.Metrics); err != nil {
			return out, fmt.Errorf("Observe: %w", err)
		}
	}
	return out, nil
}

// CheckNeeds checks that Name is non-empty and stable across calls and
// instances, and that Needs is well formed and stable.
func CheckNeeds(newStrategy func() core.Strategy, opts Options) error {
	a, b, err := two(newStrategy)
	if err != nil {
		return err
	}
	defer closeAll(a, b)
	if a.Name() == "" {
		return errors.New("Name() is empty")
	}
	if a.Name() != a.Name() || a.Name() != b.Name() {
		return fmt.Errorf("Name() is not stable: %q, %q", a.Name(), b.Name())
	}
	n := a.Needs()
	switch n.Pooling {
	case "", "last", "second_last", "mean":
	default:
		return fmt.Errorf("Needs().Pooling = %q: want \"\", last, second_last or mean", n.Pooling)
	}
	if n.ValueHeads < 0 {
		return fmt.Errorf("Needs().ValueHeads = %d: must be >= 0", n.ValueHeads)
	}
	if a.Needs() != n || b.Needs() != n {
		return fmt.Errorf("Needs() is not stable: %+v, %+v, %+v", n, a.Needs(), b.Needs())
	}
	return nil
}

// CheckHooks runs opts.Steps steps on one instance with rollouts carrying
// every signal and checks each step with RunStep.
func CheckHooks(newStrategy func() core.Strategy, opts Options) error {
	s, err := fresh(newStrategy)
	if err != nil {
		return err
	}
	defer closeAll(s)
	o := resolve(s, opts)
	rng := rollouts(o)
	for step := range o.Steps {
		info, r := next(rng, o, step)
		if _, err := RunStep(s, info, r); err != nil {
			return fmt.Errorf("step %d (all signals present): %w", step, err)
		}
	}
	return nil
}

// CheckUndeclared is CheckHooks on rollouts from which StripUndeclared
// removed the signals the strategy did not declare. A strategy whose
// Needs().Correct is false must also not read Sequence.Correct (a rollout
// file need not carry the verdicts, and then they are all false): a second
// fresh instance fed the same rollouts with every Correct negated must
// return bit-identical outputs, step after step.
func CheckUndeclared(newStrategy func() core.Strategy, opts Options) error {
	a, b, err := two(newStrategy)
	if err != nil {
		return err
	}
	defer closeAll(a, b)
	o := resolve(a, opts)
	needs := a.Needs()
	rng := rollouts(o)
	for step := range o.Steps {
		info, r := next(rng, o, step)
		StripUndeclared(r, needs)
		out, err := RunStep(a, info, Clone(r))
		if err != nil {
			return fmt.Errorf("step %d (only declared signals %+v present): %w", step, needs, err)
		}
		if needs.Correct {
			continue
		}
		for i := range r.Seqs {
			r.Seqs[i].Correct = !r.Seqs[i].Correct
		}
		flipped, err := RunStep(b, info, r)
		if err != nil {
			return fmt.Errorf("step %d, every Sequence.Correct negated: %w", step, err)
		}
		if err := compare(out, flipped); err != nil {
			return fmt.Errorf("step %d: the outputs change when every Sequence.Correct is negated, but Needs().Correct is false (declare Needs.Correct): %w", step, err)
		}
	}
	return nil
}

// CheckDeterminism runs two fresh instances through the same opts.Steps
// steps and requires identical outputs at every step.
func CheckDeterminism(newStrategy func() core.Strategy, opts Options) error {
	a, b, err := two(newStrategy)
	if err != nil {
		return err
	}
	defer closeAll(a, b)
	o := resolve(a, opts)
	rng := rollouts(o)
	for step := range o.Steps {
		info, r := next(rng, o, step)
		outA, err := RunStep(a, info, Clone(r))
		if err != nil {
			return fmt.Errorf("step %d, first instance: %w", step, err)
		}
		outB, err := RunStep(b, info, Clone(r))
		if err != nil {
			return fmt.Errorf("step %d, second instance: %w", step, err)
		}
		if err := compare(outA, outB); err != nil {
			return fmt.Errorf("step %d: two fresh instances disagree: %w", step, err)
		}
	}
	return nil
}

// CheckState, for a core.Stateful strategy, round-trips the state of a
// fresh instance, runs opts.Steps steps, then checks that SaveState is
// repeatable, that a fresh instance loaded with the state saves the same
// bytes, and that both instances give identical outputs on the next step.
// It passes trivially for strategies that are not Stateful.
func CheckState(newStrategy func() core.Strategy, opts Options) error {
	a, err := fresh(newStrategy)
	if err != nil {
		return err
	}
	defer closeAll(a)
	sa := core.HooksOf(a)
	if sa.SaveState == nil {
		return nil
	}
	o := resolve(a, opts)
	// The state of an unused instance must round-trip too (a checkpoint
	// can be written before the first step).
	empty, err := sa.SaveState()
	if err != nil {
		return fmt.Errorf("SaveState before any step: %w", err)
	}
	e, err := fresh(newStrategy)
	if err != nil {
		return err
	}
	defer closeAll(e)
	if err := core.HooksOf(e).LoadState(empty); err != nil {
		return fmt.Errorf("LoadState of an unused instance's state: %w", err)
	}

	rng := rollouts(o)
	for step := range o.Steps {
		info, r := next(rng, o, step)
		if _, err := RunStep(a, info, r); err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
	}
	state, err := sa.SaveState()
	if err != nil {
		return fmt.Errorf("SaveState after %d steps: %w", o.Steps, err)
	}
	again, err := sa.SaveState()
	if err != nil {
		return fmt.Errorf("second SaveState: %w", err)
	}
	if !bytes.Equal(state, again) {
		return fmt.Errorf("SaveState is not repeatable: %d bytes, then %d different bytes", len(state), len(again))
	}
	b, err := fresh(newStrategy)
	if err != nil {
		return err
	}
	defer closeAll(b)
	sb := core.HooksOf(b)
	if sb.LoadState == nil {
		return errors.New("second instance has no state hooks")
	}
	if err := sb.LoadState(clone1(state)); err != nil {
		return fmt.Errorf("LoadState: %w", err)
	}
	restored, err := sb.SaveState()
	if err != nil {
		return fmt.Errorf("SaveState after LoadState: %w", err)
	}
	if !bytes.Equal(state, restored) {
		return fmt.Errorf("SaveState after LoadState differs from the state loaded (%d vs %d bytes)", len(restored), len(state))
	}
	info, r := next(rng, o, o.Steps)
	outA, err := RunStep(a, info, Clone(r))
	if err != nil {
		return fmt.Errorf("step %d, original instance: %w", o.Steps, err)
	}
	outB, err := RunStep(b, info, Clone(r))
	if err != nil {
		return fmt.Errorf("step %d, restored instance: %w", o.Steps, err)
	}
	if err := compare(outA, outB); err != nil {
		return fmt.Errorf("step %d: original and restored instances disagree: %w", o.Steps, err)
	}
	return nil
}

// resolve fills defaults and raises K to what the strategy asks for.
func resolve(s core.Strategy, opts Options) Options {
	o := opts.withDefaults()
	o.ValueHeads = max(o.ValueHeads, s.Needs().ValueHeads)
	return o
}

func rollouts(o Options) *rand.Rand {
	return rand.New(rand.NewPCG(o.Seed, 0x5eed57a7e9))
}

// next draws the rollout of step and its StepInfo.
func next(rng *rand.Rand, o Options, step int) (core.StepInfo, *core.Rollout) {
	r := RandomRollout(rng, o)
	r.Step = step
	info := core.StepInfo{Step: step, TotalSteps: o.TotalSteps, Algorithm: o.Algorithm, Seed: o.Seed, MaxResponseTokens: o.MaxLen}
	return info, r
}

func fresh(newStrategy func() core.Strategy) (s core.Strategy, err error) {
	err = guard(func() error { s = newStrategy(); return nil })
	if err != nil {
		return nil, fmt.Errorf("newStrategy: %w", err)
	}
	if s == nil {
		return nil, errors.New("newStrategy returned nil")
	}
	return s, nil
}

func two(newStrategy func() core.Strategy) (core.Strategy, core.Strategy, error) {
	a, err := fresh(newStrategy)
	if err != nil {
		return nil, nil, err
	}
	b, err := fresh(newStrategy)
	if err != nil {
		closeAll(a)
		return nil, nil, err
	}
	return a, b, nil
}

func closeAll(ss ...core.Strategy) { _ = core.CloseAll(ss) }

// guard runs f, turning a panic into an error carrying the stack.
func guard(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return f()
}

// compare requires bit-identical outputs and names the first difference.
func compare(a, b StepOutputs) error {
	if err := eq1("RewardBonus", a.RewardBonus, b.RewardBonus); err != nil {
		return err
	}
	if len(a.AdvantageBonus) != len(b.AdvantageBonus) {
		return fmt.Errorf("AdvantageBonus: %d vs %d rows", len(a.AdvantageBonus), len(b.AdvantageBonus))
	}
	for i := range a.AdvantageBonus {
		if err := eq1(fmt.Sprintf("AdvantageBonus[%d]", i), a.AdvantageBonus[i], b.AdvantageBonus[i]); err != nil {
			return err
		}
	}
	if (a.LossTerms == nil) != (b.LossTerms == nil) || a.LossTerms != nil && !same(a.LossTerms.EntropyCoef, b.LossTerms.EntropyCoef) {
		return fmt.Errorf("LossTerms: %+v vs %+v", a.LossTerms, b.LossTerms)
	}
	if (a.TokenLoss == nil) != (b.TokenLoss == nil) {
		return fmt.Errorf("TokenLoss: present %v vs %v", a.TokenLoss != nil, b.TokenLoss != nil)
	}
	if a.TokenLoss != nil {
		if !same(a.TokenLoss.EntropyCoef, b.TokenLoss.EntropyCoef) {
			return fmt.Errorf("TokenLoss.EntropyCoef: %v vs %v", a.TokenLoss.EntropyCoef, b.TokenLoss.EntropyCoef)
		}
		for _, f := range []struct {
			name string
			a, b [][]float64
		}{{"PGWeight", a.TokenLoss.PGWeight, b.TokenLoss.PGWeight}, {"AbsKLCoef", a.TokenLoss.AbsKLCoef, b.TokenLoss.AbsKLCoef}} {
			if (f.a == nil) != (f.b == nil) || len(f.a) != len(f.b) {
				return fmt.Errorf("TokenLoss.%s: %d vs %d rows (nil %v vs %v)", f.name, len(f.a), len(f.b), f.a == nil, f.b == nil)
			}
			for i := range f.a {
				if err := eq1(fmt.Sprintf("TokenLoss.%s[%d]", f.name, i), f.a[i], f.b[i]); err != nil {
					return err
				}
			}
		}
	}
	if len(a.HeadMasks) != len(b.HeadMasks) {
		return fmt.Errorf("HeadMasks: %d vs %d sequences", len(a.HeadMasks), len(b.HeadMasks))
	}
	for i := range a.HeadMasks {
		if err := eq1(fmt.Sprintf("HeadMasks[%d]", i), a.HeadMasks[i], b.HeadMasks[i]); err != nil {
			return err
		}
	}
	ka, kb := slices.Sorted(maps.Keys(a.Metrics)), slices.Sorted(maps.Keys(b.Metrics))
	if !reflect.DeepEqual(ka, kb) {
		return fmt.Errorf("Observe metric names: %v vs %v", ka, kb)
	}
	for _, k := range ka {
		if !same(a.Metrics[k], b.Metrics[k]) {
			return fmt.Errorf("Observe metric %s: %v vs %v", k, a.Metrics[k], b.Metrics[k])
		}
	}
	return nil
}

func eq1(what string, a, b []float64) error {
	if len(a) != len(b) {
		return fmt.Errorf("%s: lengths %d vs %d", what, len(a), len(b))
	}
	for i := range a {
		if !same(a[i], b[i]) {
			return fmt.Errorf("%s[%d]: %v vs %v", what, i, a[i], b[i])
		}
	}
	return nil
}

func same(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) || a == b }

// firstDiff describes where two rollouts first differ.
func firstDiff(a, b *core.Rollout) string {
	if a.Step != b.Step || a.TotalSteps != b.TotalSteps || a.Algorithm != b.Algorithm || a.ValueHeads != b.ValueHeads {
		return "rollout header fields"
	}
	if len(a.Seqs) != len(b.Seqs) {
		return fmt.Sprintf("len(Seqs) %d -> %d", len(a.Seqs), len(b.Seqs))
	}
	va, vb := reflect.ValueOf(a.Seqs), reflect.ValueOf(b.Seqs)
	typ := reflect.TypeOf(core.Sequence{})
	for i := range a.Seqs {
		for f := range typ.NumField() {
			if !reflect.DeepEqual(va.Index(i).Field(f).Interface(), vb.Index(i).Field(f).Interface()) {
				return fmt.Sprintf("Seqs[%d].%s", i, typ.Field(f).Name)
			}
		}
	}
	return "unknown field"
}

// gae1 is GAE with gamma = lambda = 1 on the mean head value, the reward
// at the last token: the advantage at t is R - mean_k V[t][k] and the
// return R at every token.
func gae1(reward float64, values []float64, T, k int) (adv, ret []float64) {
	adv, ret = make([]float64, T), make([]float64, T)
	for t := range T {
		mean := 0.0
		if k > 0 && len(values) == T*k {
			for _, x := range values[t*k : (t+1)*k] {
				mean += x
			}
			mean /= float64(k)
		}
		adv[t], ret[t] = reward-mean, reward
	}
	return adv, ret
}

// groupNormalised is the kit's stand-in estimator: GRPO's (r~ - mean_g) /
// (sample std_g + 1e-6), 0 in a group of one, on every token (Returns
// equal to the Advantages, as grpo sets them).
func groupNormalised(r *core.Rollout) {
	groups := map[int][]float64{}
	for _, s := range r.Seqs {
		groups[s.Group] = append(groups[s.Group], s.ShapedReward)
	}
	for i := range r.Seqs {
		s := &r.Seqs[i]
		g := groups[s.Group]
		a := 0.0
		if len(g) > 1 {
			mean, ss := 0.0, 0.0
			for _, x := range g {
				mean += x
			}
			mean /= float64(len(g))
			for _, x := range g {
				ss += (x - mean) * (x - mean)
			}
			a = (s.ShapedReward - mean) / (math.Sqrt(ss/float64(len(g)-1)) + 1e-6)
		}
		s.Advantages, s.Returns = make([]float64, s.Len()), make([]float64, s.Len())
		for t := range s.Advantages {
			s.Advantages[t], s.Returns[t] = a, a // as grpo: Returns = Advantages
		}
	}
}
