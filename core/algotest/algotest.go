// Package algotest is a conformance kit for core.Algorithm implementations
// (advantage estimators), as core/strategytest is for strategies and in
// the spirit of testing/slogtest: an algorithm's test calls Run (or Check,
// which returns an error listing every property that failed) and gets the
// contract the trainer relies on checked on rollouts the kit builds by
// hand.
//
// The trainer (trainer/shaping.go, Trainer.Shape) calls an algorithm so:
// it sets every sequence's ShapedReward, calls Advantages(r), sets each
// AdvantageBonus to T zeros, adds the strategies' advantage bonuses to
// Advantages in place (Advantages[t] += b), calls Finalize(r), and then
// stops the run on any non-finite advantage or return. The properties,
// each also exported as a function returning an error:
//
//   - Name (CheckName): Name is non-empty and the same on every call and
//     every instance, and so are NeedsCritic and, for a core.AlgorithmNeeds,
//     Needs, whose MinGroup is >= 0 and, above 1, names its MinGroupKey.
//   - Lengths (CheckLengths): on mixed batches (groups of several
//     responses of 0 to MaxLen tokens, empty and truncated ones among
//     them, one group whose shaped rewards are all equal), Advantages and
//     then Finalize (after an advantage bonus, as the trainer adds one)
//     succeed and leave one finite advantage and one finite return per
//     token of every sequence.
//   - GroupsOfOne (CheckGroupsOfOne): a batch whose every group holds a
//     single response gets well-formed advantages as in Lengths; only an
//     algorithm whose Needs().MinGroup is above 1 may refuse it, with an
//     error (never a panic).
//   - Truncated (CheckTruncated): truncated responses (MaxLen tokens,
//     Truncated set; one group of them only) get one finite advantage and
//     return per token, as in Lengths.
//   - NonFinite (CheckNonFinite): a NaN, +Inf or -Inf reward (Reward and
//     ShapedReward), and for a critic algorithm a non-finite value, is
//     either refused with an error or gives finite advantages and returns
//     of the right lengths; never a panic, never a non-finite output.
//   - Determinism (CheckDeterminism): the same batch twice through one
//     instance, and once through a second fresh instance, gives
//     bit-identical advantages and returns, after Advantages and after
//     Finalize (an algorithm carries no state from one step to the next;
//     a checkpoint does not save any).
//   - Input (CheckInput): Advantages writes only Advantages and Returns,
//     and Finalize only Advantages; every other field of the batch
//     (rewards, verdicts, log-probs, values, AdvantageBonus, ...) is left
//     as it was.
//   - Aliasing (CheckAliasing): after Advantages, adding a distinct bonus
//     to every advantage in place (as the trainer does) changes exactly
//     those advantages: no return, no other sequence's advantage and no
//     input field shares their memory.
//   - Shaped (CheckShaped): the advantages and returns are those of the
//     shaped rewards r~ (ShapedReward), not of the verifier's Reward: the
//     same batch with every Reward moved to the other level (the
//     difference taken up by RewardPenalty, so ShapedReward is unchanged)
//     and, unless Needs().Correct, every Correct negated with it gives
//     bit-identical outputs, after Advantages and after Finalize.
//   - Order (CheckOrder): the batch with its sequences in reverse order
//     gives the same advantages and returns, reversed (up to the rounding
//     of sums taken in another order, 1e-9 relative).
//
// The kit's rollouts: rewards at the task's two levels (IncorrectReward,
// CorrectReward; Correct set for the higher one) plus a shaping bonus in
// [0, 0.25), never 0 on all of a group (ShapedReward = Reward +
// RewardBonus, so an algorithm reading Reward sees other numbers); log-probs <= 0 and
// entropies >= 0 on every token; for an algorithm whose NeedsCritic is
// true, ValueHeads = K and Values of T rows of K finite numbers, otherwise
// ValueHeads = 0 and Values nil (an algorithm without a critic must not
// read them); Advantages, Returns and AdvantageBonus nil, as the trainer
// hands them over. Groups are contiguous, with Group ids 10 apart, and
// hold at least max(2, Needs().MinGroup) responses except in GroupsOfOne.
// An instance implementing core.RewardLevelsUser gets UseRewardLevels with
// the two levels before its first step, as a run calls it.
package algotest

import (
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

// Factory returns a fresh algorithm, configured the same way on every call.
// For a single instance, return it every time: the checks that want two
// instances then use it twice.
type Factory func() (core.Algorithm, error)

// Registered returns a Factory building the registered algorithm name from
// params, the `algorithm:` mapping less name (nil: its defaults), with
// core.NewAlgorithm; it also requires Name() to be name.
func Registered(name string, params map[string]any) Factory {
	return func() (core.Algorithm, error) {
		a, err := core.NewAlgorithm(name, core.NewParams("algorithm", maps.Clone(params)))
		if err != nil {
			return nil, err
		}
		if a.Name() != name {
			return nil, fmt.Errorf("algorithm registered as %q has Name() = %q", name, a.Name())
		}
		return a, nil
	}
}

// Options shape the kit's rollouts. Zero fields take the defaults given.
type Options struct {
	// IncorrectReward and CorrectReward are the task's two reward levels:
	// the verifier's reward of a wrong and of a right response, and what
	// UseRewardLevels gets. Both zero means -1 and +1, cde's defaults;
	// CorrectReward must be above IncorrectReward.
	IncorrectReward, CorrectReward float64
	// ValueHeads is K, the critic's heads, for an algorithm whose
	// NeedsCritic is true (default 2).
	ValueHeads int
	// MaxLen is the longest response in tokens (default 6); a response of
	// MaxLen tokens is a truncated one.
	MaxLen int
	// Trials is the number of random batches a check draws (default 6).
	Trials int
	// Seed seeds the batches.
	Seed uint64
}

func (o Options) withDefaults() Options {
	if o.IncorrectReward == 0 && o.CorrectReward == 0 {
		o.IncorrectReward, o.CorrectReward = -1, 1
	}
	if o.ValueHeads <= 0 {
		o.ValueHeads = 2
	}
	if o.MaxLen <= 0 {
		o.MaxLen = 6
	}
	if o.Trials <= 0 {
		o.Trials = 6
	}
	return o
}

// Property is one named conformance check.
type Property struct {
	Name string
	Func func(newAlgorithm Factory, opts Options) error
}

// Properties lists the checks Check and Run perform, in order.
func Properties() []Property {
	return []Property{
		{"Name", CheckName},
		{"Lengths", CheckLengths},
		{"GroupsOfOne", CheckGroupsOfOne},
		{"Truncated", CheckTruncated},
		{"NonFinite", CheckNonFinite},
		{"Determinism", CheckDeterminism},
		{"Input", CheckInput},
		{"Aliasing", CheckAliasing},
		{"Shaped", CheckShaped},
		{"Order", CheckOrder},
	}
}

// Check runs every property and returns nil when all hold, else an error
// joining one "Property: reason" error per failed property.
func Check(newAlgorithm Factory, opts Options) error {
	var errs []error
	for _, p := range Properties() {
		if err := p.Func(newAlgorithm, opts); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Run runs every property as a subtest of t.
func Run(t *testing.T, newAlgorithm Factory, opts Options) {
	t.Helper()
	for _, p := range Properties() {
		t.Run(p.Name, func(t *testing.T) {
			if err := p.Func(newAlgorithm, opts); err != nil {
				t.Error(err)
			}
		})
	}
}

// CheckName checks Name, NeedsCritic and Needs (see the package doc).
func CheckName(newAlgorithm Factory, opts Options) error {
	o := opts.withDefaults()
	a, err := fresh(newAlgorithm, o)
	if err != nil {
		return err
	}
	b, err := fresh(newAlgorithm, o)
	if err != nil {
		return err
	}
	if a.Name() == "" {
		return errors.New("Name() is empty")
	}
	if a.Name() != a.Name() || a.Name() != b.Name() {
		return fmt.Errorf("Name() is not stable: %q, %q", a.Name(), b.Name())
	}
	if a.NeedsCritic() != a.NeedsCritic() || a.NeedsCritic() != b.NeedsCritic() {
		return errors.New("NeedsCritic() is not stable")
	}
	na, aok := a.(core.AlgorithmNeeds)
	nb, bok := b.(core.AlgorithmNeeds)
	if aok != bok {
		return errors.New("one instance implements core.AlgorithmNeeds and the other does not")
	}
	if aok {
		n := na.Needs()
		if na.Needs() != n || nb.Needs() != n {
			return fmt.Errorf("Needs() is not stable: %+v, %+v, %+v", n, na.Needs(), nb.Needs())
		}
		if n.MinGroup < 0 {
			return fmt.Errorf("Needs().MinGroup = %d: must be >= 0", n.MinGroup)
		}
		if n.MinGroup > 1 && n.MinGroupKey == "" {
			return fmt.Errorf("Needs().MinGroup = %d with no MinGroupKey: the error on a smaller rollout.n must name the key that set it", n.MinGroup)
		}
	}
	return nil
}

// CheckLengths checks one finite advantage and return per token on mixed
// batches, after Advantages and after Finalize.
func CheckLengths(newAlgorithm Factory, opts Options) error {
	o := opts.withDefaults()
	a, err := fresh(newAlgorithm, o)
	if err != nil {
		return err
	}
	g := newGen(a, o, 1)
	for trial := range o.Trials {
		r := g.mixed()
		if _, err := step(a, r, bonusOf); err != nil {
			return fmt.Errorf("batch %d (%s): %w", trial, describe(r), err)
		}
	}
	return nil
}

// CheckGroupsOfOne checks a batch of single-response groups.
func CheckGroupsOfOne(newAlgorithm Factory, opts Options) error {
	o := opts.withDefaults()
	a, err := fresh(newAlgorithm, o)
	if err != nil {
		return err
	}
	g := newGen(a, o, 2)
	for trial := range o.Trials {
		r := g.singles()
		_, err := step(a, r, bonusOf)
		var refused *refusal
		switch {
		case err == nil:
		case errors.As(err, &refused) && g.minGroup > 1:
			// Documented: groups must hold at least MinGroup responses.
		case errors.As(err, &refused):
			return fmt.Errorf("batch %d (%s): refused, though Needs().MinGroup = %d allows groups of one: %w", trial, describe(r), g.minGroup, err)
		default:
			return fmt.Errorf("batch %d (%s): %w", trial, describe(r), err)
		}
	}
	return nil
}

// CheckTruncated checks batches holding truncated responses.
func CheckTruncated(newAlgorithm Factory, opts Options) error {
	o := opts.withDefaults()
	a, err := fresh(newAlgorithm, o)
	if err != nil {
		return err
	}
	g := newGen(a, o, 3)
	for trial := range o.Trials {
		r := g.truncated()
		if _, err := step(a, r, bonusOf); err != nil {
			return fmt.Errorf("batch %d (%s): %w", trial, describe(r), err)
		}
	}
	return nil
}

// CheckNonFinite checks non-finite rewards (and values, with a critic):
// an error, or finite outputs of the right lengths.
func CheckNonFinite(newAlgorithm Factory, opts Options) error {
	o := opts.withDefaults()
	a, err := fresh(newAlgorithm, o)
	if err != nil {
		return err
	}
	g := newGen(a, o, 4)
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		for trial := range o.Trials {
			// A non-finite reward; with a critic, in another batch, a
			// non-finite value (so that refusing one cannot hide the other).
			for _, value := range []bool{false, true} {
				if value && !g.critic {
					continue
				}
				r := g.mixed()
				i := trial % len(r.Seqs)
				for k := 0; value && r.Seqs[i].Len() == 0 && k < len(r.Seqs); k++ {
					i = (i + 1) % len(r.Seqs) // a response with tokens, to hold the value
				}
				s := &r.Seqs[i]
				if value && s.Len() == 0 {
					continue
				}
				what := fmt.Sprintf("sequence %d's reward %v", i, v)
				if value {
					s.Values[(s.Len()-1)*s.Heads()] = v
					what = fmt.Sprintf("sequence %d's value at token %d head 0 %v", i, s.Len()-1, v)
				} else {
					s.Reward, s.RewardBonus, s.ShapedReward, s.Correct = v, 0, v, false
				}
				var refused *refusal
				if _, err := step(a, r, bonusOf); err != nil && !errors.As(err, &refused) {
					return fmt.Errorf("batch %d with %s: %w", trial, what, err)
				}
			}
		}
	}
	return nil
}

// CheckDeterminism checks bit-identical outputs for the same batch, twice
// through one instance and once through another.
func CheckDeterminism(newAlgorithm Factory, opts Options) error {
	o := opts.withDefaults()
	a, err := fresh(newAlgorithm, o)
	if err != nil {
		return err
	}
	b, err := fresh(newAlgorithm, o)
	if err != nil {
		return err
	}
	g := newGen(a, o, 5)
	for trial := range o.Trials {
		r := g.mixed()
		first, err := step(a, clone(r), bonusOf)
		if err != nil {
			return fmt.Errorf("batch %d: %w", trial, err)
		}
		again, err := step(a, clone(r), bonusOf)
		if err != nil {
			return fmt.Errorf("batch %d, again through the same instance: %w", trial, err)
		}
		if err := sameOutputs(first, again); err != nil {
			return fmt.Errorf("batch %d: the same instance gives other numbers the second time: %w", trial, err)
		}
		other, err := step(b, clone(r), bonusOf)
		if err != nil {
			return fmt.Errorf("batch %d, through a second instance: %w", trial, err)
		}
		if err := sameOutputs(first, other); err != nil {
			return fmt.Errorf("batch %d: two fresh instances disagree: %w", trial, err)
		}
	}
	return nil
}

// CheckInput checks that Advantages writes only Advantages and Returns,
// and Finalize only Advantages.
func CheckInput(newAlgorithm Factory, opts Options) error {
	o := opts.withDefaults()
	a, err := fresh(newAlgorithm, o)
	if err != nil {
		return err
	}
	g := newGen(a, o, 6)
	for trial := range o.Trials {
		r := g.mixed()
		before := clone(r)
		if err := guard(func() error { return a.Advantages(r) }); err != nil {
			return fmt.Errorf("batch %d: Advantages: %w", trial, err)
		}
		if d := firstDiff(before, r, "Advantages", "Returns"); d != "" {
			return fmt.Errorf("batch %d: Advantages changed %s (it may write only Advantages and Returns)", trial, d)
		}
		if err := wellFormed(r); err != nil {
			return fmt.Errorf("batch %d: after Advantages: %w", trial, err)
		}
		addBonus(r, bonusOf)
		mid := clone(r)
		if err := guard(func() error { return a.Finalize(r) }); err != nil {
			return fmt.Errorf("batch %d: Finalize: %w", trial, err)
		}
		if d := firstDiff(mid, r, "Advantages"); d != "" {
			return fmt.Errorf("batch %d: Finalize changed %s (it may write only Advantages)", trial, d)
		}
	}
	return nil
}

// CheckAliasing checks that the advantages Advantages sets share memory
// with nothing else.
func CheckAliasing(newAlgorithm Factory, opts Options) error {
	o := opts.withDefaults()
	a, err := fresh(newAlgorithm, o)
	if err != nil {
		return err
	}
	g := newGen(a, o, 7)
	for trial := range o.Trials {
		r := g.mixed()
		if err := guard(func() error { return a.Advantages(r) }); err != nil {
			return fmt.Errorf("batch %d: Advantages: %w", trial, err)
		}
		if err := wellFormed(r); err != nil {
			return fmt.Errorf("batch %d: after Advantages: %w", trial, err)
		}
		before := clone(r)
		for i := range r.Seqs {
			for t := range r.Seqs[i].Advantages {
				r.Seqs[i].Advantages[t] += distinctBonus(i, t)
			}
		}
		for i := range r.Seqs {
			s, was := &r.Seqs[i], &before.Seqs[i]
			for t := range s.Advantages {
				if want := was.Advantages[t] + distinctBonus(i, t); !same(s.Advantages[t], want) {
					return fmt.Errorf("batch %d: sequence %d token %d: the advantage is %v after adding %v to %v: it shares memory with another sequence's advantages",
						trial, i, t, s.Advantages[t], distinctBonus(i, t), was.Advantages[t])
				}
			}
			if !slices.Equal(bits(s.Returns), bits(was.Returns)) {
				return fmt.Errorf("batch %d: sequence %d: adding a bonus to the advantages changed the returns: Returns shares memory with Advantages", trial, i)
			}
		}
		if d := firstDiff(before, r, "Advantages"); d != "" {
			return fmt.Errorf("batch %d: adding a bonus to the advantages changed %s: they share memory", trial, d)
		}
	}
	return nil
}

// CheckShaped checks that the outputs follow ShapedReward alone: moving
// every Reward to the other level (and, for an algorithm that does not
// declare Needs().Correct, negating Correct with it), with RewardPenalty
// taking up the difference so that ShapedReward stays bit for bit, must
// not change them. Run on two fresh instances, as CheckDeterminism.
func CheckShaped(newAlgorithm Factory, opts Options) error {
	o := opts.withDefaults()
	a, err := fresh(newAlgorithm, o)
	if err != nil {
		return err
	}
	b, err := fresh(newAlgorithm, o)
	if err != nil {
		return err
	}
	g := newGen(a, o, 9)
	needsCorrect := false
	if n, ok := a.(core.AlgorithmNeeds); ok {
		needsCorrect = n.Needs().Correct
	}
	what := "Reward moved to the other level and Correct negated"
	hint := "an algorithm reads the shaped reward r~, Sequence.ShapedReward, not Reward, and Correct only when it declares Needs().Correct"
	if needsCorrect {
		what = "Reward moved to the other level (Correct kept: Needs().Correct)"
		hint = "an algorithm reads the shaped reward r~, Sequence.ShapedReward, not Reward"
	}
	for trial := range o.Trials {
		r := g.mixed()
		moved := clone(r)
		for i := range moved.Seqs {
			s := &moved.Seqs[i]
			other := o.CorrectReward
			if s.Reward == o.CorrectReward {
				other = o.IncorrectReward
			}
			s.Reward = other
			s.RewardPenalty = s.ShapedReward - s.RewardBonus - s.Reward
			if !needsCorrect {
				s.Correct = !s.Correct
			}
		}
		first, err := step(a, r, bonusOf)
		if err != nil {
			return fmt.Errorf("batch %d: %w", trial, err)
		}
		second, err := step(b, moved, bonusOf)
		if err != nil {
			return fmt.Errorf("batch %d, every %s: %w", trial, what, err)
		}
		if err := sameOutputs(first, second); err != nil {
			return fmt.Errorf("batch %d: the outputs change with every %s, ShapedReward unchanged (%s): %w", trial, what, hint, err)
		}
	}
	return nil
}

// CheckOrder checks that reversing the sequences reverses the results.
func CheckOrder(newAlgorithm Factory, opts Options) error {
	o := opts.withDefaults()
	a, err := fresh(newAlgorithm, o)
	if err != nil {
		return err
	}
	g := newGen(a, o, 8)
	for trial := range o.Trials {
		r := g.mixed()
		rev := clone(r)
		slices.Reverse(rev.Seqs)
		if _, err := step(a, r, nil); err != nil {
			return fmt.Errorf("batch %d: %w", trial, err)
		}
		if _, err := step(a, rev, nil); err != nil {
			return fmt.Errorf("batch %d, sequences reversed: %w", trial, err)
		}
		n := len(r.Seqs)
		for i := range r.Seqs {
			got, want := &rev.Seqs[n-1-i], &r.Seqs[i]
			for t := range want.Advantages {
				if !near(got.Advantages[t], want.Advantages[t]) || !near(got.Returns[t], want.Returns[t]) {
					return fmt.Errorf("batch %d: sequence %d token %d: advantage %v and return %v in order, %v and %v with the sequences reversed",
						trial, i, t, want.Advantages[t], want.Returns[t], got.Advantages[t], got.Returns[t])
				}
			}
		}
	}
	return nil
}

// refusal is an error the algorithm returned (as opposed to a panic or a
// malformed output, which the kit reports in other errors).
type refusal struct {
	stage string
	err   error
}

func (e *refusal) Error() string { return e.stage + " returned an error: " + e.err.Error() }
func (e *refusal) Unwrap() error { return e.err }

// outputs are a step's advantages and returns after Advantages and after
// Finalize.
type outputs struct {
	adv, ret, finalAdv, finalRet [][]float64
}

// step runs a on r as Trainer.Shape does: Advantages, zero AdvantageBonus,
// the bonus bonus(i, t) added to both (none when bonus is nil), Finalize;
// each stage's output must have one finite entry per token. An error the
// algorithm returns is a *refusal; a panic or a malformed output is not.
func step(a core.Algorithm, r *core.Rollout, bonus func(i, t int) float64) (outputs, error) {
	var out outputs
	var err error
	if perr := guard(func() error { err = a.Advantages(r); return nil }); perr != nil {
		return out, fmt.Errorf("Advantages: %w", perr)
	}
	if err != nil {
		return out, &refusal{"Advantages", err}
	}
	if err := wellFormed(r); err != nil {
		return out, fmt.Errorf("after Advantages: %w", err)
	}
	out.adv, out.ret = rows(r)
	addBonus(r, bonus)
	if perr := guard(func() error { err = a.Finalize(r); return nil }); perr != nil {
		return out, fmt.Errorf("Finalize: %w", perr)
	}
	if err != nil {
		return out, &refusal{"Finalize", err}
	}
	if err := wellFormed(r); err != nil {
		return out, fmt.Errorf("after Finalize: %w", err)
	}
	out.finalAdv, out.finalRet = rows(r)
	return out, nil
}

// addBonus sets every AdvantageBonus to T zeros and, with bonus, adds
// bonus(i, t) to Advantages and AdvantageBonus, as the trainer adds the
// strategies' advantage bonuses.
func addBonus(r *core.Rollout, bonus func(i, t int) float64) {
	for i := range r.Seqs {
		s := &r.Seqs[i]
		s.AdvantageBonus = make([]float64, s.Len())
		if bonus == nil {
			continue
		}
		for t := range s.AdvantageBonus {
			b := bonus(i, t)
			s.Advantages[t] += b
			s.AdvantageBonus[t] += b
		}
	}
}

// bonusOf is the kit's advantage bonus: small, varied, finite.
func bonusOf(i, t int) float64 { return 0.01 * float64((7*i+3*t)%5) }

// distinctBonus differs for every (i, t) of the kit's batches.
func distinctBonus(i, t int) float64 { return float64(1 + 1024*i + t) }

// wellFormed requires one finite advantage and return per token.
func wellFormed(r *core.Rollout) error {
	for i := range r.Seqs {
		s := &r.Seqs[i]
		T := s.Len()
		if len(s.Advantages) != T || len(s.Returns) != T {
			return fmt.Errorf("sequence %d (%d tokens%s): %d advantages and %d returns, want one per token", i, T, truncNote(s), len(s.Advantages), len(s.Returns))
		}
		for t := range T {
			if x, y := s.Advantages[t], s.Returns[t]; !finite(x) || !finite(y) {
				return fmt.Errorf("sequence %d (%d tokens%s) token %d: advantage %v, return %v: not finite", i, T, truncNote(s), t, x, y)
			}
		}
	}
	return nil
}

func truncNote(s *core.Sequence) string {
	if s.Truncated {
		return ", truncated"
	}
	return ""
}

func rows(r *core.Rollout) (adv, ret [][]float64) {
	for i := range r.Seqs {
		adv = append(adv, slices.Clone(r.Seqs[i].Advantages))
		ret = append(ret, slices.Clone(r.Seqs[i].Returns))
	}
	return adv, ret
}

func sameOutputs(a, b outputs) error {
	for _, f := range []struct {
		name string
		x, y [][]float64
	}{{"advantage after Advantages", a.adv, b.adv}, {"return after Advantages", a.ret, b.ret},
		{"advantage after Finalize", a.finalAdv, b.finalAdv}, {"return after Finalize", a.finalRet, b.finalRet}} {
		for i := range f.x {
			for t := range f.x[i] {
				if !same(f.x[i][t], f.y[i][t]) {
					return fmt.Errorf("sequence %d token %d: %s %v, then %v", i, t, f.name, f.x[i][t], f.y[i][t])
				}
			}
		}
	}
	return nil
}

// fresh builds an instance and gives it the reward levels, as a run does.
func fresh(newAlgorithm Factory, o Options) (a core.Algorithm, err error) {
	if perr := guard(func() error { a, err = newAlgorithm(); return nil }); perr != nil {
		return nil, fmt.Errorf("the factory: %w", perr)
	}
	if err != nil {
		return nil, fmt.Errorf("the factory: %w", err)
	}
	if a == nil || reflect.ValueOf(a).Kind() == reflect.Pointer && reflect.ValueOf(a).IsNil() {
		return nil, errors.New("the factory returned a nil algorithm")
	}
	if !(o.CorrectReward > o.IncorrectReward) {
		return nil, fmt.Errorf("algotest.Options: CorrectReward %v must be above IncorrectReward %v", o.CorrectReward, o.IncorrectReward)
	}
	if u, ok := a.(core.RewardLevelsUser); ok {
		if err := u.UseRewardLevels(o.IncorrectReward, o.CorrectReward); err != nil {
			return nil, fmt.Errorf("UseRewardLevels(%v, %v): %w", o.IncorrectReward, o.CorrectReward, err)
		}
	}
	return a, nil
}

// gen draws the kit's batches for one algorithm.
type gen struct {
	rng      *rand.Rand
	o        Options
	critic   bool
	minGroup int
}

func newGen(a core.Algorithm, o Options, check uint64) *gen {
	g := &gen{rng: rand.New(rand.NewPCG(o.Seed, 0xa1607e57+check)), o: o, critic: a.NeedsCritic()}
	if n, ok := a.(core.AlgorithmNeeds); ok {
		g.minGroup = n.Needs().MinGroup
	}
	return g
}

// seq draws one response of T tokens to the prompt of group.
func (g *gen) seq(group, T int, truncated bool) core.Sequence {
	s := core.Sequence{Group: 10 * group, ProblemID: fmt.Sprintf("p%d", group), Prompt: []int32{int32(3 + group), 5, 8},
		Response: make([]int32, T), Truncated: truncated}
	s.Text = fmt.Sprintf("response of %d tokens", T)
	s.Correct = g.rng.IntN(2) == 0
	s.Reward = g.o.IncorrectReward
	if s.Correct {
		s.Reward = g.o.CorrectReward
	}
	s.RewardBonus = 0.25 * g.rng.Float64()
	s.ShapedReward = s.Reward + s.RewardBonus
	s.LogProbs = make([]float64, T)
	s.Entropies = make([]float64, T)
	for t := range T {
		s.Response[t] = int32(3 + g.rng.IntN(60))
		s.LogProbs[t] = -3 * g.rng.Float64()
		s.Entropies[t] = 2 * g.rng.Float64()
	}
	if g.critic {
		s.Values = make([]float64, T*g.o.ValueHeads)
		for j := range s.Values {
			s.Values[j] = g.rng.NormFloat64()
		}
	}
	return s
}

func (g *gen) rollout() *core.Rollout {
	r := &core.Rollout{Step: 1, TotalSteps: 10}
	if g.critic {
		r.ValueHeads = g.o.ValueHeads
	}
	return r
}

// size draws a group size the algorithm accepts.
func (g *gen) size() int { return max(2, g.minGroup) + g.rng.IntN(3) }

// mixed: three groups; responses of 0..MaxLen tokens (MaxLen: truncated);
// the first group's responses all correct with the same bonus 0.125, so
// equal shaped rewards, each other than its Reward.
func (g *gen) mixed() *core.Rollout {
	r := g.rollout()
	for grp := range 3 {
		for range g.size() {
			T := g.rng.IntN(g.o.MaxLen + 1)
			s := g.seq(grp, T, T == g.o.MaxLen)
			if grp == 0 {
				s.Correct, s.Reward, s.RewardBonus, s.ShapedReward = true, g.o.CorrectReward, 0.125, g.o.CorrectReward+0.125
			}
			r.Seqs = append(r.Seqs, s)
		}
	}
	return r
}

// singles: four groups of one response each, of 1..MaxLen tokens, one of
// them empty in every other batch.
func (g *gen) singles() *core.Rollout {
	r := g.rollout()
	empty := g.rng.IntN(2) == 0
	for grp := range 4 {
		T := 1 + g.rng.IntN(g.o.MaxLen)
		if empty && grp == 3 {
			T = 0
		}
		r.Seqs = append(r.Seqs, g.seq(grp, T, T == g.o.MaxLen))
	}
	return r
}

// truncated: a group of truncated responses only, then two groups where
// they alternate with shorter finished ones.
func (g *gen) truncated() *core.Rollout {
	r := g.rollout()
	for grp := range 3 {
		for j := range g.size() {
			if grp == 0 || j%2 == 0 {
				r.Seqs = append(r.Seqs, g.seq(grp, g.o.MaxLen, true))
			} else {
				r.Seqs = append(r.Seqs, g.seq(grp, g.rng.IntN(g.o.MaxLen), false))
			}
		}
	}
	return r
}

// describe summarises a batch for an error: its groups' sizes.
func describe(r *core.Rollout) string {
	var sizes []int
	for _, idx := range r.Groups() {
		sizes = append(sizes, len(idx))
	}
	return fmt.Sprintf("%d sequences in groups of %v", len(r.Seqs), sizes)
}

// clone deep-copies a rollout, keeping nil slices nil.
func clone(r *core.Rollout) *core.Rollout {
	c := *r
	c.Seqs = nil
	if r.Seqs != nil {
		c.Seqs = make([]core.Sequence, len(r.Seqs))
	}
	for i := range r.Seqs {
		s := r.Seqs[i]
		s.Prompt = slices.Clone(s.Prompt)
		s.Response = slices.Clone(s.Response)
		s.LogProbs = slices.Clone(s.LogProbs)
		s.Entropies = slices.Clone(s.Entropies)
		s.Values = slices.Clone(s.Values)
		s.Embedding = slices.Clone(s.Embedding)
		s.RefLogProbs = slices.Clone(s.RefLogProbs)
		s.RolloutLogProbs = slices.Clone(s.RolloutLogProbs)
		s.HeadMask = slices.Clone(s.HeadMask)
		s.Advantages = slices.Clone(s.Advantages)
		s.AdvantageBonus = slices.Clone(s.AdvantageBonus)
		s.Returns = slices.Clone(s.Returns)
		s.PGWeight = slices.Clone(s.PGWeight)
		s.AbsKLCoef = slices.Clone(s.AbsKLCoef)
		c.Seqs[i] = s
	}
	return &c
}

// firstDiff names the first field, other than those allowed, in which two
// batches differ ("" when none): a header field or Seqs[i].Field. Floats
// compare bit for bit, so a NaN equals itself.
func firstDiff(a, b *core.Rollout, allowed ...string) string {
	if a.Step != b.Step || a.TotalSteps != b.TotalSteps || a.Algorithm != b.Algorithm || a.ValueHeads != b.ValueHeads || a.File != b.File {
		return "a rollout header field"
	}
	if len(a.Seqs) != len(b.Seqs) {
		return fmt.Sprintf("the number of sequences (%d to %d)", len(a.Seqs), len(b.Seqs))
	}
	typ := reflect.TypeFor[core.Sequence]()
	for i := range a.Seqs {
		va, vb := reflect.ValueOf(a.Seqs[i]), reflect.ValueOf(b.Seqs[i])
		for f := range typ.NumField() {
			name := typ.Field(f).Name
			if slices.Contains(allowed, name) {
				continue
			}
			if !equalBits(va.Field(f), vb.Field(f)) {
				return fmt.Sprintf("Seqs[%d].%s", i, name)
			}
		}
	}
	return ""
}

// equalBits is reflect.DeepEqual with floats compared bit for bit.
func equalBits(a, b reflect.Value) bool {
	switch a.Kind() {
	case reflect.Float64:
		return same(a.Float(), b.Float())
	case reflect.Slice:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !equalBits(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(a.Interface(), b.Interface())
	}
}

func bits(x []float64) []uint64 {
	out := make([]uint64, len(x))
	for i, v := range x {
		out[i] = math.Float64bits(v)
	}
	return out
}

func same(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) || a == b }

func near(a, b float64) bool {
	return same(a, b) || math.Abs(a-b) <= 1e-9*max(1, math.Abs(a), math.Abs(b))
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// guard runs f, turning a panic into an error carrying the stack.
func guard(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return f()
}
