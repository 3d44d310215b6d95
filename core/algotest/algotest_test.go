package algotest

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
)

// centred is a hand-written estimator that keeps the contract: A_i =
// r~_i - mean of its group (0 for a group of one) on every token, the
// return r~_i, an error on a non-finite reward, and, when whiten is set, a
// Finalize that subtracts the batch's token mean. bug breaks it in one
// way, named by the property that must catch it.
type centred struct {
	whiten bool
	bug    string
	calls  int
}

func (c *centred) Name() string {
	if c.bug == "empty name" {
		return ""
	}
	return "centred"
}

func (c *centred) NeedsCritic() bool { return false }

func (c *centred) Advantages(r *core.Rollout) error {
	c.calls++
	for i := range r.Seqs {
		if x := r.Seqs[i].ShapedReward; (math.IsNaN(x) || math.IsInf(x, 0)) && c.bug != "passes non-finite rewards" {
			return fmt.Errorf("centred: sequence %d: shaped reward %v is not finite", i, x)
		}
	}
	// rw is what the estimator centres: r~, or what a bug reads instead.
	rw := func(s *core.Sequence) float64 {
		switch {
		case c.bug == "reads Reward":
			return s.Reward
		case c.bug == "reads Correct undeclared" && s.Correct:
			return s.ShapedReward + 1
		}
		return s.ShapedReward
	}
	adv := make([]float64, len(r.Seqs))
	for _, idx := range r.Groups() {
		sum := 0.0
		for _, i := range idx {
			sum += rw(&r.Seqs[i])
		}
		den := float64(len(idx))
		if c.bug == "divides by G-1" {
			den = float64(len(idx) - 1) // 0 for a group of one: Inf or NaN
		}
		if c.bug == "refuses groups of one" && len(idx) == 1 {
			return errors.New("centred: a group of one")
		}
		for _, i := range idx {
			adv[i] = rw(&r.Seqs[i]) - sum/den
			if c.bug == "divides by G-1" && len(idx) == 1 {
				adv[i] = r.Seqs[i].ShapedReward / den
			}
		}
	}
	for i := range r.Seqs {
		s := &r.Seqs[i]
		T := s.Len()
		if c.bug == "one short" && T > 0 {
			T--
		}
		if c.bug == "skips truncated" && s.Truncated {
			T = 0
		}
		s.Advantages = make([]float64, T)
		s.Returns = make([]float64, T)
		for t := range T {
			s.Advantages[t] = adv[i]
			s.Returns[t] = s.ShapedReward
			if c.bug == "drifts" {
				s.Advantages[t] += 1e-3 * float64(c.calls)
			}
			if c.bug == "depends on position" {
				s.Advantages[t] += 0.1 * float64(i)
			}
		}
		if c.bug == "aliases returns" {
			copy(s.Advantages, s.Returns)
			s.Returns = s.Advantages
		}
		if c.bug == "rewrites rewards" {
			s.ShapedReward = adv[i]
		}
	}
	if c.bug == "panics on an empty response" {
		for i := range r.Seqs {
			_ = r.Seqs[i].Response[0]
		}
	}
	return nil
}

func (c *centred) Finalize(r *core.Rollout) error {
	if c.bug == "finalize writes returns" {
		for i := range r.Seqs {
			for t := range r.Seqs[i].Returns {
				r.Seqs[i].Returns[t] = 0
			}
		}
	}
	if !c.whiten {
		return nil
	}
	sum, n := 0.0, 0
	for i := range r.Seqs {
		for _, a := range r.Seqs[i].Advantages {
			sum += a
			n++
		}
	}
	if n == 0 {
		return nil
	}
	for i := range r.Seqs {
		for t := range r.Seqs[i].Advantages {
			r.Seqs[i].Advantages[t] -= sum / float64(n)
		}
	}
	return nil
}

func newCentred(whiten bool, bug string) Factory {
	return func() (core.Algorithm, error) { return &centred{whiten: whiten, bug: bug}, nil }
}

// The reference keeps the contract, whitened or not, with the default
// options and with rewards 0/1 on long responses.
func TestReferencePasses(t *testing.T) {
	for _, whiten := range []bool{false, true} {
		for _, opts := range []Options{{}, {IncorrectReward: 0, CorrectReward: 1, MaxLen: 40, Trials: 3, Seed: 9}} {
			if err := Check(newCentred(whiten, ""), opts); err != nil {
				t.Errorf("whiten %v, %+v: %v", whiten, opts, err)
			}
		}
	}
}

// Each broken estimator fails the property named for it, with a message
// that says what went wrong.
func TestCatchesBrokenAlgorithms(t *testing.T) {
	cases := []struct {
		bug, property, says string
	}{
		{"empty name", "Name", "Name() is empty"},
		{"one short", "Lengths", "advantages and"},
		{"divides by G-1", "GroupsOfOne", "not finite"},
		{"refuses groups of one", "GroupsOfOne", "refused, though Needs().MinGroup = 0"},
		{"skips truncated", "Truncated", "truncated): 0 advantages"},
		{"passes non-finite rewards", "NonFinite", "not finite"},
		{"panics on an empty response", "Lengths", "panic: runtime error: index out of range"},
		{"drifts", "Determinism", "the same instance gives other numbers the second time"},
		{"rewrites rewards", "Input", "Advantages changed Seqs["},
		{"finalize writes returns", "Input", "Finalize changed Seqs["},
		{"aliases returns", "Aliasing", "Returns shares memory with Advantages"},
		{"depends on position", "Order", "with the sequences reversed"},
		{"reads Reward", "Shaped", "the outputs change with every Reward moved to the other level and Correct negated, ShapedReward unchanged"},
		{"reads Correct undeclared", "Shaped", "Correct only when it declares Needs().Correct"},
	}
	for _, c := range cases {
		t.Run(c.bug, func(t *testing.T) {
			err := Check(newCentred(false, c.bug), Options{})
			if err == nil {
				t.Fatalf("Check passed an estimator that %s", c.bug)
			}
			if got := section(err, c.property); !strings.Contains(got, c.says) {
				t.Fatalf("want a %q failure saying %q, got:\n%v", c.property, c.says, err)
			}
		})
	}
}

// A factory that fails, panics or returns nil fails every property, by
// name, without panicking the test.
func TestBrokenFactory(t *testing.T) {
	for name, f := range map[string]Factory{
		"error": func() (core.Algorithm, error) { return nil, errors.New("no such thing") },
		"panic": func() (core.Algorithm, error) { panic("boom") },
		"nil":   func() (core.Algorithm, error) { return (*centred)(nil), nil },
	} {
		err := Check(f, Options{})
		if err == nil {
			t.Fatalf("%s: Check passed", name)
		}
		for _, p := range Properties() {
			if !strings.Contains(err.Error(), p.Name+": ") {
				t.Errorf("%s: no %s failure in %v", name, p.Name, err)
			}
		}
	}
}

// minGroup3 declares MinGroup 3 and refuses smaller groups, as grpo_passk does
// for k = 3: GroupsOfOne accepts the refusal, and the other batches hold
// groups of at least 3.
type minGroup3 struct{ centred }

func (m *minGroup3) Needs() core.Needs { return core.Needs{MinGroup: 3, MinGroupKey: "algorithm.k"} }

func (m *minGroup3) Advantages(r *core.Rollout) error {
	for _, idx := range r.Groups() {
		if len(idx) < 3 {
			return fmt.Errorf("minGroup3: a group of %d", len(idx))
		}
	}
	return m.centred.Advantages(r)
}

func TestMinGroupAllowsRefusal(t *testing.T) {
	if err := Check(func() (core.Algorithm, error) { return &minGroup3{}, nil }, Options{}); err != nil {
		t.Fatal(err)
	}
	// Without a key to name, Needs is malformed.
	noKey := func() (core.Algorithm, error) { return &noKeyNeeds{}, nil }
	if err := CheckName(noKey, Options{}); err == nil || !strings.Contains(err.Error(), "no MinGroupKey") {
		t.Fatalf("MinGroup without a key: %v", err)
	}
}

type noKeyNeeds struct{ minGroup3 }

// verdicts centres the verdicts, 1 for a correct response and 0 for a
// wrong one, within each group (as grpo_passk reads Correct alone), and
// declares Needs().Correct: Shaped keeps Correct for it and passes it.
type verdicts struct{ centred }

func (v *verdicts) Needs() core.Needs { return core.Needs{Correct: true} }

func (v *verdicts) Advantages(r *core.Rollout) error {
	adv := make([]float64, len(r.Seqs))
	for _, idx := range r.Groups() {
		mean := 0.0
		for _, i := range idx {
			if r.Seqs[i].Correct {
				mean += 1 / float64(len(idx))
			}
		}
		for _, i := range idx {
			if adv[i] = -mean; r.Seqs[i].Correct {
				adv[i] += 1
			}
		}
	}
	for i := range r.Seqs {
		s := &r.Seqs[i]
		s.Advantages, s.Returns = make([]float64, s.Len()), make([]float64, s.Len())
		for t := range s.Advantages {
			s.Advantages[t], s.Returns[t] = adv[i], adv[i]
		}
	}
	return nil
}

// An algorithm that declares Needs().Correct may read the verdicts (the
// centred estimator reading them undeclared fails Shaped, in
// TestCatchesBrokenAlgorithms).
func TestDeclaredCorrectPasses(t *testing.T) {
	if err := Check(func() (core.Algorithm, error) { return &verdicts{}, nil }, Options{}); err != nil {
		t.Fatal(err)
	}
}

func (n *noKeyNeeds) Needs() core.Needs { return core.Needs{MinGroup: 3} }

// levels records the reward levels it is given and the rewards it sees.
type levels struct {
	centred
	inc, cor float64
	seen     map[float64]bool
}

func (l *levels) UseRewardLevels(inc, cor float64) error {
	l.inc, l.cor = inc, cor
	return nil
}

func (l *levels) Advantages(r *core.Rollout) error {
	for _, s := range r.Seqs {
		l.seen[s.Reward] = true
	}
	return l.centred.Advantages(r)
}

// The kit hands a RewardLevelsUser the configured levels, and its batches
// carry rewards at exactly those levels (with Correct on the higher one).
func TestRewardLevels(t *testing.T) {
	for _, c := range []struct{ opts Options }{{Options{}}, {Options{IncorrectReward: 0, CorrectReward: 1}}, {Options{IncorrectReward: -2, CorrectReward: 3}}} {
		var got *levels
		f := func() (core.Algorithm, error) { got = &levels{seen: map[float64]bool{}}; return got, nil }
		if err := CheckLengths(f, c.opts); err != nil {
			t.Fatal(err)
		}
		want := [2]float64{c.opts.IncorrectReward, c.opts.CorrectReward}
		if want == [2]float64{} {
			want = [2]float64{-1, 1}
		}
		if got.inc != want[0] || got.cor != want[1] {
			t.Errorf("%+v: UseRewardLevels(%v, %v), want (%v, %v)", c.opts, got.inc, got.cor, want[0], want[1])
		}
		var seen []float64
		for v := range got.seen {
			seen = append(seen, v)
		}
		slices.Sort(seen)
		if !slices.Equal(seen, want[:]) {
			t.Errorf("%+v: rewards seen %v, want %v", c.opts, seen, want)
		}
	}
}

// critic reads the values (as ppo does: refusing a missing or non-finite
// one) and gives A_t = r~ - mean_k V[t][k], the return r~.
type critic struct {
	heads int
	// passesValues: a non-finite value goes through to the advantages
	// (a non-finite reward is still refused).
	passesValues bool
}

func (c *critic) Name() string      { return "critic" }
func (c *critic) NeedsCritic() bool { return true }
func (c *critic) Finalize(*core.Rollout) error {
	return nil
}

func (c *critic) Advantages(r *core.Rollout) error {
	c.heads = r.ValueHeads
	for i := range r.Seqs {
		s := &r.Seqs[i]
		if len(s.Values) != s.Len()*r.ValueHeads {
			return fmt.Errorf("critic: sequence %d: %d values for %d tokens x %d heads", i, len(s.Values), s.Len(), r.ValueHeads)
		}
		if math.IsNaN(s.ShapedReward) || math.IsInf(s.ShapedReward, 0) {
			return fmt.Errorf("critic: sequence %d: shaped reward %v", i, s.ShapedReward)
		}
		s.Advantages, s.Returns = make([]float64, s.Len()), make([]float64, s.Len())
		for t := range s.Len() {
			row := s.ValueRow(t)
			v := 0.0
			for _, x := range row {
				v += x
			}
			v /= float64(len(row))
			s.Advantages[t], s.Returns[t] = s.ShapedReward-v, s.ShapedReward
			if (math.IsNaN(s.Advantages[t]) || math.IsInf(s.Advantages[t], 0)) && !c.passesValues {
				return fmt.Errorf("critic: sequence %d token %d: not finite", i, t)
			}
		}
	}
	return nil
}

// A critic algorithm gets K heads of values (3 here); the reference
// without a critic gets none.
func TestCriticGetsValues(t *testing.T) {
	c := &critic{}
	if err := Check(func() (core.Algorithm, error) { return c, nil }, Options{ValueHeads: 3}); err != nil {
		t.Fatal(err)
	}
	if c.heads != 3 {
		t.Fatalf("ValueHeads = %d, want 3", c.heads)
	}
	// Refusing a non-finite reward does not hide a non-finite value.
	leaky := func() (core.Algorithm, error) { return &critic{passesValues: true}, nil }
	if err := CheckNonFinite(leaky, Options{}); err == nil || !strings.Contains(err.Error(), "value at token") || !strings.Contains(err.Error(), "not finite") {
		t.Fatalf("a critic passing non-finite values through: %v", err)
	}
	var sawValues bool
	spy := &valueSpy{saw: &sawValues}
	if err := CheckLengths(func() (core.Algorithm, error) { return spy, nil }, Options{}); err != nil {
		t.Fatal(err)
	}
	if sawValues {
		t.Fatal("an algorithm without a critic was given values")
	}
}

type valueSpy struct {
	centred
	saw *bool
}

func (v *valueSpy) Advantages(r *core.Rollout) error {
	for _, s := range r.Seqs {
		if s.Values != nil || r.ValueHeads != 0 {
			*v.saw = true
		}
	}
	return v.centred.Advantages(r)
}

// The helpers compare bit for bit and name the field that changed.
func TestHelpers(t *testing.T) {
	a := &core.Rollout{Seqs: []core.Sequence{{Reward: math.NaN(), LogProbs: []float64{-0.5, -1.25}}}}
	b := clone(a)
	if d := firstDiff(a, b); d != "" {
		t.Fatalf("a clone differs in %s", d)
	}
	b.Seqs[0].LogProbs[1] = -1.5
	if d := firstDiff(a, b); d != "Seqs[0].LogProbs" {
		t.Fatalf("firstDiff = %q, want Seqs[0].LogProbs", d)
	}
	if d := firstDiff(a, b, "LogProbs"); d != "" {
		t.Fatalf("an allowed field reported: %q", d)
	}
	// In float64, 0.1 + 0.2 is 0.30000000000000004, not 0.3: not the
	// same, but near. (Variables: Go adds constants exactly.)
	x, y := 0.1, 0.2
	if same(x+y, 0.3) || !near(x+y, 0.3) || near(1, 1.001) {
		t.Fatal("same/near")
	}
	if !same(math.NaN(), math.NaN()) {
		t.Fatal("a NaN is the same as itself, bit for bit")
	}
}

// section is the part of Check's error reporting property: its line and
// the lines after it up to the next property's ("" when it did not fail).
func section(err error, property string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(err.Error(), "\n") {
		for _, p := range Properties() {
			if strings.HasPrefix(line, p.Name+": ") {
				in = p.Name == property
			}
		}
		if in {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}
