package multihead

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/core/strategytest"
	"github.com/cde-rl/cde/trainer"

	_ "github.com/cde-rl/cde/algos/grpo"
	_ "github.com/cde-rl/cde/algos/ppo"
)

func algo(t *testing.T, name string, m map[string]any) core.Algorithm {
	t.Helper()
	a, err := core.NewAlgorithm(name, core.NewParams("algorithm", m))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func build(t *testing.T, m map[string]any) *Strategy {
	t.Helper()
	s, err := core.NewStrategy(Name, core.NewParams("strategies[0]", m), algo(t, "ppo", nil))
	if err != nil {
		t.Fatal(err)
	}
	return s.(*Strategy)
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

func checkRow(t *testing.T, what string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
	for i := range want {
		if !near(got[i], want[i]) {
			t.Fatalf("%s[%d]: got %v, want %v (all: %v)", what, i, got[i], want[i], got)
		}
	}
}

// handSeq is a response of T = 3 tokens with K = 2 heads:
//
//	Values[0] = [0.2, 0.4]   mean 0.3, population std 0.1
//	Values[1] = [1.0, 0.0]   mean 0.5, population std 0.5
//	Values[2] = [0.3, 0.7]   mean 0.5, population std 0.2
func handSeq() core.Sequence {
	return core.Sequence{
		Group:    0,
		Response: []int32{5, 6, 7},
		Reward:   1,
		Values:   []float64{0.2, 0.4, 1.0, 0.0, 0.3, 0.7},
	}
}

func TestDefaults(t *testing.T) {
	s := build(t, nil)
	if s.Heads != 4 || s.Zeta != 1 || s.Kappa != 3 || s.Alpha != 0.5 {
		t.Fatalf("defaults: %+v", s)
	}
	if got, want := s.Needs(), (core.Needs{ValueHeads: 4, HeadMasks: true}); got != want {
		t.Fatalf("needs %+v, want %+v", got, want)
	}
	if s.Name() != "multihead" {
		t.Fatal(s.Name())
	}
}

// Advantages set by hand, kappa = 3, alpha = 0.5, w = 1:
//
//	t=0: A = 0.6.  B = std(Values[1]) = 0.5.  |A|/kappa = 0.2  <  alpha*B = 0.25
//	     -> bonus 0.2 (the |A|/kappa branch)
//	t=1: A = -3.   B = std(Values[2]) = 0.2.  |A|/kappa = 1.0  >  alpha*B = 0.1
//	     -> bonus 0.1 (the alpha*std branch; negative advantage, |A| used, bonus >= 0)
//	t=2: last token, next state terminal: B = 0 -> bonus 0 (even with |A| = 2)
func TestBonusByHand(t *testing.T) {
	s := build(t, map[string]any{"heads": 2})
	seq := handSeq()
	seq.Advantages = []float64{0.6, -3, 2}
	r := &core.Rollout{Step: 0, TotalSteps: 10, Algorithm: "ppo", ValueHeads: 2, Seqs: []core.Sequence{seq}}
	b, err := s.AdvantageBonus(core.StepInfo{Step: 0, TotalSteps: 10}, r)
	if err != nil {
		t.Fatal(err)
	}
	checkRow(t, "bonus", b[0], []float64{0.2, 0.1, 0})
	// The rollout is not modified.
	checkRow(t, "advantages", r.Seqs[0].Advantages, []float64{0.6, -3, 2})
}

// The same rollout at any step: the bonus is the strategy's own, [0.2, 0.1,
// 0] (the entry's weight schedule is the trainer's to apply; a weight key
// given to the strategy itself is refused, TestConfigErrors).
func TestWeightIsTheTrainers(t *testing.T) {
	s := build(t, map[string]any{"heads": 2})
	seq := handSeq()
	seq.Advantages = []float64{0.6, -3, 2}
	r := &core.Rollout{ValueHeads: 2, Seqs: []core.Sequence{seq}}
	for _, step := range []int{0, 5, 10} {
		b, err := s.AdvantageBonus(core.StepInfo{Step: step, TotalSteps: 10}, r)
		if err != nil {
			t.Fatal(err)
		}
		checkRow(t, "bonus", b[0], []float64{0.2, 0.1, 0})
	}
	m, err := s.Observe(core.StepInfo{Step: 5, TotalSteps: 10}, r)
	if err != nil {
		t.Fatal(err)
	}
	// critic/head_std = mean of the per-token stds (0.1 + 0.5 + 0.2) / 3 = 0.8/3.
	if !near(m["critic/head_std"], 0.8/3) {
		t.Fatalf("critic/head_std %v, want %v", m["critic/head_std"], 0.8/3)
	}
}

// End to end through the real PPO advantages (gamma = lambda = 1, no
// whitening) and the trainer's Shape, reward 1:
//
//	Vbar = [0.3, 0.5, 0.5], Vbar[3] = 0
//	t=2: delta = 1 + 0 - 0.5 = 0.5          A2 = 0.5
//	t=1: delta = 0 + 0.5 - 0.5 = 0          A1 = 0 + 0.5 = 0.5
//	t=0: delta = 0 + 0.5 - 0.3 = 0.2        A0 = 0.2 + 0.5 = 0.7
//	bonus t=0: min(0.7/3 = 0.2333.., 0.5*0.5 = 0.25) = 0.7/3
//	bonus t=1: min(0.5/3 = 0.1666.., 0.5*0.2 = 0.1)  = 0.1
//	bonus t=2: 0
//	A^ = [0.7 + 0.7/3, 0.6, 0.5]
func TestThroughPPOShape(t *testing.T) {
	ppo := algo(t, "ppo", map[string]any{"whiten": false})
	st, err := core.NewStrategy(Name, core.NewParams("strategies[0]", map[string]any{"heads": 2}), ppo)
	if err != nil {
		t.Fatal(err)
	}
	tr := &trainer.Trainer{Algo: ppo, Strategies: []core.Strategy{st}}
	r := &core.Rollout{TotalSteps: 10, Algorithm: "ppo", ValueHeads: 2, Seqs: []core.Sequence{handSeq()}}
	m := map[string]float64{}
	if err := tr.Shape(core.StepInfo{TotalSteps: 10, Algorithm: "ppo"}, r, m); err != nil {
		t.Fatal(err)
	}
	checkRow(t, "bonus", r.Seqs[0].AdvantageBonus, []float64{0.7 / 3, 0.1, 0})
	checkRow(t, "advantages", r.Seqs[0].Advantages, []float64{0.7 + 0.7/3, 0.6, 0.5})
	checkRow(t, "returns", r.Seqs[0].Returns, []float64{1, 1, 1})
}

func TestBonusErrors(t *testing.T) {
	s := build(t, map[string]any{"heads": 2})
	good := handSeq()
	good.Advantages = []float64{1, 1, 1}
	few := handSeq()
	few.Advantages = []float64{1, 1, 1}
	few.Values = []float64{1, 1, 1}
	short := handSeq()
	short.Advantages = []float64{1, 1, 1}
	short.Values = short.Values[:4]
	for name, bad := range map[string]core.Sequence{"few heads": few, "short values": short} {
		r := &core.Rollout{Seqs: []core.Sequence{good, bad}}
		if _, err := s.AdvantageBonus(core.StepInfo{}, r); err == nil || !strings.Contains(err.Error(), "sequence 1") {
			t.Errorf("%s: got %v, want an error naming sequence 1", name, err)
		}
		if _, err := s.HeadMasks(core.StepInfo{}, r); err == nil || !strings.Contains(err.Error(), "sequence 1") {
			t.Errorf("%s masks: got %v, want an error naming sequence 1", name, err)
		}
	}
}

// maskRollout has |D| = 7 + 0 + 13 = 20 valid tokens and K = 4 heads.
func maskRollout() *core.Rollout {
	r := &core.Rollout{ValueHeads: 4}
	for _, T := range []int{7, 0, 13} {
		seq := core.Sequence{Response: make([]int32, T), Values: make([]float64, 4*T)}
		r.Seqs = append(r.Seqs, seq)
	}
	return r
}

// headSets returns, per head, the set of (seq, t) pairs in its subset, as a
// 0/1 vector over the flattened batch, checking every entry is 0 or 1.
func headSets(t *testing.T, r *core.Rollout, masks [][]float64, k int) [][]float64 {
	t.Helper()
	if len(masks) != len(r.Seqs) {
		t.Fatalf("%d mask rows for %d sequences", len(masks), len(r.Seqs))
	}
	sets := make([][]float64, k)
	for i := range r.Seqs {
		if len(masks[i]) != r.Seqs[i].Len()*k {
			t.Fatalf("sequence %d: %d mask entries for %d tokens x %d heads", i, len(masks[i]), r.Seqs[i].Len(), k)
		}
		for tt := range r.Seqs[i].Len() {
			for j, v := range masks[i][tt*k : (tt+1)*k] {
				if v != 0 && v != 1 {
					t.Fatalf("mask entry %v", v)
				}
				sets[j] = append(sets[j], v)
			}
		}
	}
	return sets
}

// zeta = 0.5, |D| = 20: every head gets round(0.5 * 20) = 10 ones (a subset
// of the 20 distinct pairs, so no duplicates by construction).
func TestHeadMasksHalf(t *testing.T) {
	s := build(t, map[string]any{"zeta": 0.5})
	r := maskRollout()
	info := core.StepInfo{Step: 3, TotalSteps: 10, Seed: 42}
	masks, err := s.HeadMasks(info, r)
	if err != nil {
		t.Fatal(err)
	}
	sets := headSets(t, r, masks, 4)
	for j, set := range sets {
		n := 0.0
		for _, v := range set {
			n += v
		}
		if n != 10 {
			t.Errorf("head %d: %v ones, want 10", j, n)
		}
	}
	// Different heads draw different subsets (each pair of heads coincides
	// with probability 1/C(20,10) ~ 5e-6; the seed is fixed).
	for a := range sets {
		for b := a + 1; b < len(sets); b++ {
			if reflect.DeepEqual(sets[a], sets[b]) {
				t.Errorf("heads %d and %d drew the same subset", a, b)
			}
		}
	}
	// Same seed and step: identical. Another step or seed: different.
	again, err := s.HeadMasks(info, r)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(masks, again) {
		t.Error("same seed and step gave different masks")
	}
	next, _ := s.HeadMasks(core.StepInfo{Step: 4, TotalSteps: 10, Seed: 42}, r)
	if reflect.DeepEqual(masks, next) {
		t.Error("steps 3 and 4 gave the same masks")
	}
	other, _ := s.HeadMasks(core.StepInfo{Step: 3, TotalSteps: 10, Seed: 43}, r)
	if reflect.DeepEqual(masks, other) {
		t.Error("seeds 42 and 43 gave the same masks")
	}
	// The rollout is not modified.
	for i := range r.Seqs {
		if r.Seqs[i].HeadMask != nil {
			t.Fatal("HeadMasks set Sequence.HeadMask")
		}
	}
}

// Over many steps every pair is drawn with frequency ~ zeta (uniform
// subsets): 2000 steps x 4 heads = 8000 draws per pair, mean 0.5, sd
// sqrt(0.25/8000) ~ 0.0056; allow 0.03 (> 5 sd).
func TestHeadMasksUniform(t *testing.T) {
	s := build(t, map[string]any{"zeta": 0.5})
	r := maskRollout()
	freq := make([]float64, r.NumTokens())
	const steps = 2000
	for step := range steps {
		masks, err := s.HeadMasks(core.StepInfo{Step: step, Seed: 7}, r)
		if err != nil {
			t.Fatal(err)
		}
		for _, set := range headSets(t, r, masks, 4) {
			for d, v := range set {
				freq[d] += v
			}
		}
	}
	for d := range freq {
		if f := freq[d] / (steps * 4); math.Abs(f-0.5) > 0.03 {
			t.Errorf("pair %d drawn with frequency %v, want ~0.5", d, f)
		}
	}
}

func TestHeadMasksAllOnes(t *testing.T) {
	s := build(t, nil) // zeta = 1
	r := maskRollout()
	masks, err := s.HeadMasks(core.StepInfo{Step: 1, Seed: 9}, r)
	if err != nil {
		t.Fatal(err)
	}
	for j, set := range headSets(t, r, masks, 4) {
		for d, v := range set {
			if v != 1 {
				t.Fatalf("head %d pair %d: %v, want 1", j, d, v)
			}
		}
	}
}

// A critic with more heads than asked for (K = 4 asked, 6 in the rollout):
// masks cover all 6 heads.
func TestHeadMasksWiderCritic(t *testing.T) {
	s := build(t, map[string]any{"zeta": 0.5})
	r := maskRollout()
	r.ValueHeads = 6
	for i := range r.Seqs {
		r.Seqs[i].Values = make([]float64, 6*r.Seqs[i].Len())
	}
	masks, err := s.HeadMasks(core.StepInfo{}, r)
	if err != nil {
		t.Fatal(err)
	}
	headSets(t, r, masks, 6)
}

func TestSubsetSize(t *testing.T) {
	for _, c := range []struct {
		zeta float64
		n    int
		want int
	}{
		{0.5, 20, 10},
		{0.5, 3, 2},   // 1.5 rounds half away from zero
		{0.3, 25, 8},  // 7.5 -> 8
		{0.01, 10, 1}, // 0.1 -> 0, at least 1
		{1, 17, 17},
		{0.999, 1, 1},
	} {
		if got := SubsetSize(c.zeta, c.n); got != c.want {
			t.Errorf("SubsetSize(%v, %d) = %d, want %d", c.zeta, c.n, got, c.want)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	ppo := algo(t, "ppo", nil)
	grpo := algo(t, "grpo", nil)
	for _, c := range []struct {
		m    map[string]any
		algo core.Algorithm
		want string
	}{
		{map[string]any{"zeta": 0}, ppo, "strategies[0].zeta"},
		{map[string]any{"zeta": 1.5}, ppo, "strategies[0].zeta"},
		{map[string]any{"zeta": -0.5}, ppo, "strategies[0].zeta"},
		{map[string]any{"kappa": 0}, ppo, "strategies[0].kappa"},
		{map[string]any{"kappa": -1}, ppo, "strategies[0].kappa"},
		{map[string]any{"alpha": 0}, ppo, "strategies[0].alpha"},
		{map[string]any{"alpha": -0.5}, ppo, "strategies[0].alpha"},
		{map[string]any{"heads": 1}, ppo, "strategies[0].heads"},
		{map[string]any{"heads": 0}, ppo, "strategies[0].heads"},
		{map[string]any{"heads": 2.5}, ppo, "strategies[0].heads"},
		{map[string]any{"heads": 65}, ppo, "strategies[0].heads"},
		{map[string]any{"kappa": "big"}, ppo, "strategies[0].kappa"},
		{map[string]any{"weight": map[string]any{"w0": 2}}, ppo, "strategies[0].weight: unknown key"},
		{map[string]any{"head": 4}, ppo, "strategies[0].head: unknown key"},
		{nil, grpo, "config: strategies[0].name: multihead needs a critic algorithm (algorithm.name: ppo), got grpo"},
		{nil, nil, "strategies[0].name: multihead needs a critic algorithm"},
	} {
		_, err := core.NewStrategy(Name, core.NewParams("strategies[0]", c.m), c.algo)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want an error containing %q", c.m, err, c.want)
		}
	}
}

// TestConformance runs the core/strategytest kit with the defaults (K = 4,
// zeta = 1) and with zeta = 0.5.
func TestConformance(t *testing.T) {
	for name, m := range map[string]map[string]any{
		"defaults": nil,
		"zeta0.5":  {"heads": 3, "zeta": 0.5},
	} {
		t.Run(name, func(t *testing.T) {
			ppo := algo(t, "ppo", nil)
			heads := 4
			if m != nil {
				heads = m["heads"].(int)
			}
			strategytest.Run(t, func() core.Strategy {
				s, err := core.NewStrategy(Name, core.NewParams("strategies[0]", m), ppo)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}, strategytest.Options{Algorithm: "ppo", ValueHeads: heads, Seed: 11})
		})
	}
}

// whitenByHand is (x - mean) / sqrt(sample variance + 1e-8), spelled out.
func whitenByHand(xs []float64) []float64 {
	m := 0.0
	for _, x := range xs {
		m += x / float64(len(xs))
	}
	v := 0.0
	for _, x := range xs {
		v += (x - m) * (x - m) / float64(len(xs)-1)
	}
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = (x - m) / math.Sqrt(v+1e-8)
	}
	return out
}

// The two placements through PPO with whitening, from the raw GAE
// advantages of TestThroughPPOShape, A = [0.7, 0.5, 0.5]:
//
//	before_whitening: whiten(A + bonus(A)) = whiten([0.7 + 0.7/3, 0.6, 0.5])
//	after_whitening:  Aw = whiten(A) = [1.1547, -0.5774, -0.5774];
//	                  bonus(Aw) = [min(1.1547/3, 0.25), min(0.5774/3, 0.1), 0]
//	                            = [0.25, 0.1, 0];  A^ = Aw + [0.25, 0.1, 0]
func TestPlacement(t *testing.T) {
	for _, c := range []struct {
		placement  string
		bonus, adv []float64
	}{
		{"before_whitening", []float64{0.7 / 3, 0.1, 0}, whitenByHand([]float64{0.7 + 0.7/3, 0.6, 0.5})},
		{"after_whitening", []float64{0.25, 0.1, 0}, func() []float64 {
			w := whitenByHand([]float64{0.7, 0.5, 0.5})
			return []float64{w[0] + 0.25, w[1] + 0.1, w[2]}
		}()},
	} {
		ppo := algo(t, "ppo", nil) // whiten: true
		st, err := core.NewStrategy(Name, core.NewParams("strategies[0]", map[string]any{"heads": 2, "placement": c.placement}), ppo)
		if err != nil {
			t.Fatal(err)
		}
		tr := &trainer.Trainer{Algo: ppo, Strategies: []core.Strategy{st}}
		r := &core.Rollout{TotalSteps: 10, Algorithm: "ppo", ValueHeads: 2, Seqs: []core.Sequence{handSeq()}}
		if err := tr.Shape(core.StepInfo{TotalSteps: 10, Algorithm: "ppo"}, r, map[string]float64{}); err != nil {
			t.Fatal(err)
		}
		for i := range c.adv {
			if math.Abs(r.Seqs[0].Advantages[i]-c.adv[i]) > 1e-9 || math.Abs(r.Seqs[0].AdvantageBonus[i]-c.bonus[i]) > 1e-12 {
				t.Fatalf("%s: advantages %v bonus %v, want %v and %v", c.placement, r.Seqs[0].Advantages, r.Seqs[0].AdvantageBonus, c.adv, c.bonus)
			}
		}
	}
	if _, err := core.NewStrategy(Name, core.NewParams("strategies[0]", map[string]any{"placement": "middle"}), algo(t, "ppo", nil)); err == nil ||
		!strings.Contains(err.Error(), `strategies[0].placement: unknown value "middle"`) {
		t.Errorf("bad placement: %v", err)
	}
}
