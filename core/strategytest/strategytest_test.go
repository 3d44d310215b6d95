package strategytest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
)

// meanLogProb is a well-behaved strategy: reward bonus = 0.1 * mean
// log-prob, an advantage bonus of 0.01 per token, an entropy coefficient,
// per-token loss weights (PGWeight 0.5 below log-prob -1, else 1), an
// observed metric, and a step counter as state.
type meanLogProb struct{ steps int }

func (s *meanLogProb) Name() string      { return "meanlp" }
func (s *meanLogProb) Needs() core.Needs { return core.Needs{LogProbs: true} }
func (s *meanLogProb) RewardBonus(info core.StepInfo, r *core.Rollout) ([]float64, error) {
	s.steps++
	out := make([]float64, len(r.Seqs))
	for i, q := range r.Seqs {
		for _, lp := range q.LogProbs {
			out[i] += 0.1 * lp / float64(len(q.LogProbs))
		}
		out[i] += float64(s.steps)
	}
	return out, nil
}
func (s *meanLogProb) AdvantageBonus(info core.StepInfo, r *core.Rollout) ([][]float64, error) {
	out := make([][]float64, len(r.Seqs))
	for i := range r.Seqs {
		out[i] = make([]float64, r.Seqs[i].Len())
		for t := range out[i] {
			out[i][t] = 0.01
		}
	}
	return out, nil
}
func (s *meanLogProb) LossTerms(info core.StepInfo) (core.LossTerms, error) {
	return core.LossTerms{EntropyCoef: 0.001}, nil
}
func (s *meanLogProb) TokenLoss(info core.StepInfo, r *core.Rollout) (core.TokenLoss, error) {
	w := make([][]float64, len(r.Seqs))
	for i, q := range r.Seqs {
		w[i] = make([]float64, q.Len())
		for t, lp := range q.LogProbs {
			w[i][t] = 1
			if lp < -1 {
				w[i][t] = 0.5
			}
		}
	}
	return core.TokenLoss{PGWeight: w, EntropyCoef: 0.002}, nil
}
func (s *meanLogProb) Observe(info core.StepInfo, r *core.Rollout) (map[string]float64, error) {
	return map[string]float64{"explore/meanlp/steps": float64(s.steps)}, nil
}
func (s *meanLogProb) SaveState() ([]byte, error) {
	return binary.AppendUvarint(nil, uint64(s.steps)), nil
}
func (s *meanLogProb) LoadState(b []byte) error {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return errors.New("bad state")
	}
	s.steps = int(v)
	return nil
}

// masker declares K = 2 heads and head masks, and draws masks from the run seed.
type masker struct{}

func (masker) Name() string      { return "masker" }
func (masker) Needs() core.Needs { return core.Needs{ValueHeads: 2, HeadMasks: true} }
func (masker) HeadMasks(info core.StepInfo, r *core.Rollout) ([][]float64, error) {
	rng := rand.New(rand.NewPCG(info.Seed, uint64(info.Step)))
	_, out := r.TokenRows(r.ValueHeads)
	for i := range out {
		for j := range out[i] {
			out[i][j] = float64(rng.IntN(2))
		}
	}
	return out, nil
}

// lengthBonus pays a correct response len/max_response_tokens (a
// length-normalised bonus, reading the run's limit from StepInfo) and
// declares that it reads the verdicts.
type lengthBonus struct{}

func (lengthBonus) Name() string      { return "length_bonus" }
func (lengthBonus) Needs() core.Needs { return core.Needs{Correct: true} }
func (lengthBonus) RewardBonus(info core.StepInfo, r *core.Rollout) ([]float64, error) {
	if info.MaxResponseTokens <= 0 {
		return nil, errors.New("StepInfo.MaxResponseTokens is not set")
	}
	out := make([]float64, len(r.Seqs))
	for i := range r.Seqs {
		s := &r.Seqs[i]
		if s.Len() > info.MaxResponseTokens || s.Truncated != (s.Len() == info.MaxResponseTokens) {
			return nil, fmt.Errorf("sequence %d: %d tokens, truncated %v, max_response_tokens %d", i, s.Len(), s.Truncated, info.MaxResponseTokens)
		}
		if s.Correct {
			out[i] = float64(s.Len()) / float64(info.MaxResponseTokens)
		}
	}
	return out, nil
}

func TestGoodStrategiesPass(t *testing.T) {
	Run(t, func() core.Strategy { return &meanLogProb{} }, Options{Seed: 7})
	Run(t, func() core.Strategy { return masker{} }, Options{Algorithm: "ppo", ValueHeads: 1, Seed: 3})
	Run(t, func() core.Strategy { return lengthBonus{} }, Options{Seed: 2})
	Run(t, func() core.Strategy { return lengthBonus{} }, Options{Seed: 2, MaxLen: 3})
}

// broken wraps meanLogProb and breaks one thing.
type broken struct {
	meanLogProb
	fault  string
	shared *int // state shared across instances (nondeterminism)
}

func (b *broken) RewardBonus(info core.StepInfo, r *core.Rollout) ([]float64, error) {
	out, err := b.meanLogProb.RewardBonus(info, r)
	switch b.fault {
	case "short":
		out = out[:len(out)-1]
	case "nan":
		out[0] = math.NaN()
	case "mutate":
		r.Seqs[0].LogProbs[0] = 0.5
	case "undeclared":
		out[0] += r.Seqs[0].Entropies[0] // panics when Entropies is nil
	case "per-token":
		// The mean log-prob, 0/0 = NaN for an empty response.
		for i, q := range r.Seqs {
			sum := 0.0
			for _, lp := range q.LogProbs {
				sum += lp
			}
			out[i] = sum / float64(q.Len())
		}
	case "correct":
		// Reads the verdict without declaring Needs.Correct.
		for i, q := range r.Seqs {
			if q.Correct {
				out[i] += 0.5
			}
		}
	case "error":
		return nil, errors.New("boom")
	case "shared":
		*b.shared++
		out[0] += float64(*b.shared)
	}
	return out, err
}

func (b *broken) AdvantageBonus(info core.StepInfo, r *core.Rollout) ([][]float64, error) {
	out, err := b.meanLogProb.AdvantageBonus(info, r)
	if b.fault == "row" {
		out[len(out)-1] = append(out[len(out)-1], 0)
	}
	return out, err
}

func (b *broken) LossTerms(info core.StepInfo) (core.LossTerms, error) {
	if b.fault == "loss" {
		return core.LossTerms{EntropyCoef: math.Inf(1)}, nil
	}
	return b.meanLogProb.LossTerms(info)
}

func (b *broken) TokenLoss(info core.StepInfo, r *core.Rollout) (core.TokenLoss, error) {
	tl, err := b.meanLogProb.TokenLoss(info, r)
	switch b.fault {
	case "token-negative":
		tl.PGWeight[0][0] = -0.5
	case "token-rows":
		tl.AbsKLCoef = [][]float64{{1}}
	case "token-mutate":
		r.Seqs[0].Advantages[0] = 9
	case "token-shared":
		*b.shared++
		tl.PGWeight[0][0] = float64(*b.shared)
	}
	return tl, err
}

func (b *broken) SaveState() ([]byte, error) {
	if b.fault == "forget" {
		return binary.AppendUvarint(nil, 0), nil
	}
	return b.meanLogProb.SaveState()
}

func (b *broken) Needs() core.Needs {
	if b.fault == "pooling" {
		return core.Needs{Pooling: "max"}
	}
	return b.meanLogProb.Needs()
}

func TestBrokenStrategiesAreCaught(t *testing.T) {
	tests := []struct {
		fault, check, want string
	}{
		{"short", "Hooks", "bonuses for"},
		{"nan", "Hooks", "non-finite"},
		{"mutate", "Hooks", "modified the rollout: Seqs[0].LogProbs"},
		{"undeclared", "Undeclared", "panic"},
		{"per-token", "Hooks", "non-finite"},
		{"correct", "Undeclared", "the outputs change when every Sequence.Correct is negated, but Needs().Correct is false"},
		{"error", "Hooks", "boom"},
		{"row", "Hooks", "sequence"},
		{"loss", "Hooks", "LossTerms: non-finite entropy coefficient"},
		{"shared", "Determinism", "disagree"},
		{"token-negative", "Hooks", "TokenLoss: PGWeight: sequence 0 token 0: -0.5 is not a finite weight >= 0"},
		{"token-rows", "Hooks", "TokenLoss: AbsKLCoef: 1 rows for"},
		{"token-mutate", "Hooks", "TokenLoss modified the rollout: Seqs[0].Advantages"},
		{"token-shared", "Determinism", "TokenLoss.PGWeight[0]"},
		{"forget", "State", "original and restored instances disagree"},
		{"pooling", "Needs", "Pooling"},
	}
	for _, tc := range tests {
		t.Run(tc.fault, func(t *testing.T) {
			shared := new(int)
			newS := func() core.Strategy { return &broken{fault: tc.fault, shared: shared} }
			var found bool
			for _, c := range Checks() {
				if c.Name != tc.check {
					continue
				}
				found = true
				err := c.Func(newS, Options{Seed: 1})
				if err == nil {
					t.Fatalf("check %s passed a strategy with fault %q", tc.check, tc.fault)
				}
				if !strings.Contains(err.Error(), tc.want) {
					t.Errorf("check %s: error %q does not mention %q", tc.check, err, tc.want)
				}
			}
			if !found {
				t.Fatalf("no check %s", tc.check)
			}
			if All(newS, Options{Seed: 1}) == nil {
				t.Errorf("All passed a strategy with fault %q", tc.fault)
			}
		})
	}
}

func TestRandomRolloutIsValid(t *testing.T) {
	for _, algo := range []string{"grpo", "ppo"} {
		rng := rand.New(rand.NewPCG(1, 2))
		o := Options{Algorithm: algo, ValueHeads: 3, EmbeddingDim: 5, Groups: 4, GroupSize: 5, MaxLen: 12}
		for range 20 {
			r := RandomRollout(rng, o)
			if r.ValueHeads != 3 || r.Algorithm != algo || len(r.Groups()) != 4 {
				t.Fatalf("header %+v", r)
			}
			last := r.Groups()[3]
			if r.Seqs[last[0]].Len() != 0 {
				t.Fatalf("the last group's first response has %d tokens, want an empty one", r.Seqs[last[0]].Len())
			}
			for i, s := range r.Seqs {
				T := s.Len()
				if empty := i == last[0]; empty != (T == 0) || T > 12 || len(s.LogProbs) != T || len(s.Entropies) != T || len(s.Values) != 3*T ||
					len(s.HeadMask) != 3*T || len(s.Advantages) != T || len(s.Returns) != T || len(s.AdvantageBonus) != T {
					t.Fatalf("seq %d: inconsistent lengths (T = %d)", i, T)
				}
				if s.Reward != 1 && s.Reward != -1 || s.Correct != (s.Reward == 1) || s.ShapedReward != s.Reward+s.RewardBonus {
					t.Fatalf("seq %d: rewards %+v", i, s)
				}
				if len(s.Embedding) != 5 {
					t.Fatalf("seq %d: embedding dim %d", i, len(s.Embedding))
				}
				for t2 := range T {
					if s.LogProbs[t2] > 0 || s.Entropies[t2] < 0 || len(s.ValueRow(t2)) != 3 || len(s.MaskRow(t2)) != 3 {
						t.Fatalf("seq %d token %d: bad signals", i, t2)
					}
					if algo == "ppo" {
						// gamma = lambda = 1: A_t + Vbar[t] = r~.
						vbar := (s.Values[3*t2] + s.Values[3*t2+1] + s.Values[3*t2+2]) / 3
						if math.Abs(s.Advantages[t2]+vbar-s.ShapedReward) > 1e-12 {
							t.Fatalf("seq %d token %d: GAE advantage %v", i, t2, s.Advantages[t2])
						}
					}
				}
			}
		}
	}
	// GRPO: a group with rewards r~ = {1.5, -0.5}: mean 0.5, sample std
	// sqrt((1+1)/1) = sqrt(2), A = ±1/(sqrt(2)+1e-6).
	r := &core.Rollout{Algorithm: "grpo", Seqs: []core.Sequence{
		{Group: 0, ShapedReward: 1.5, Response: make([]int32, 2)},
		{Group: 0, ShapedReward: -0.5, Response: make([]int32, 1)},
		{Group: 1, ShapedReward: 1, Response: make([]int32, 1)},
	}}
	fillAdvantages(r, nil)
	a := 1 / (math.Sqrt(2) + 1e-6)
	if math.Abs(r.Seqs[0].Advantages[1]-a) > 1e-12 || math.Abs(r.Seqs[1].Advantages[0]+a) > 1e-12 || r.Seqs[2].Advantages[0] != 0 {
		t.Errorf("grpo advantages %v %v %v", r.Seqs[0].Advantages, r.Seqs[1].Advantages, r.Seqs[2].Advantages)
	}
}

func TestStripAndClone(t *testing.T) {
	r := RandomRollout(rand.New(rand.NewPCG(5, 5)), Options{})
	c := Clone(r)
	StripUndeclared(c, core.Needs{Entropies: true})
	if c.ValueHeads != 0 || c.Seqs[0].Values != nil || c.Seqs[0].Embedding != nil || c.Seqs[0].HeadMask != nil || c.Seqs[0].Entropies == nil {
		t.Errorf("strip: %+v", c.Seqs[0])
	}
	if r.ValueHeads == 0 || r.Seqs[0].Values == nil || r.Seqs[0].Embedding == nil {
		t.Errorf("Clone shares memory with the original")
	}
}

// fillAdvantages uses the algorithms' own estimators; hand-worked:
//   - grpo, one group with shaped rewards [1, -1]: mean 0, sample std
//     sqrt(((1)^2 + (-1)^2) / 1) = sqrt(2), A = ±1 / (sqrt(2) + 1e-6) on
//     every token, Returns = Advantages; a group of one gets 0.
//   - ppo (GAE, gamma = lambda = 1), reward 1, values [[0.2, 0.4], [0.6, 0]]:
//     Vbar = [0.3, 0.3]; A_1 = 1 - 0.3 = 0.7; delta_0 = 0 + 0.3 - 0.3 = 0,
//     A_0 = 0 + 0.7 = 0.7; returns = A + Vbar = [1, 1].
func TestFillAdvantagesUsesAlgos(t *testing.T) {
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-12 }
	a := 1 / (math.Sqrt(2) + 1e-6)
	g := &core.Rollout{Algorithm: "grpo", Seqs: []core.Sequence{
		{Group: 0, Response: []int32{5, 6}, ShapedReward: 1},
		{Group: 0, Response: []int32{7}, ShapedReward: -1},
		{Group: 1, Response: []int32{8}, ShapedReward: 1},
	}}
	fillAdvantages(g, nil)
	want := [][]float64{{a, a}, {-a}, {0}}
	for i, s := range g.Seqs {
		for k := range want[i] {
			if !near(s.Advantages[k], want[i][k]) || !near(s.Returns[k], want[i][k]) || s.AdvantageBonus[k] != 0 {
				t.Fatalf("grpo seq %d: A %v R %v bonus %v, want A = R = %v", i, s.Advantages, s.Returns, s.AdvantageBonus, want[i])
			}
		}
	}
	p := &core.Rollout{Algorithm: "ppo", ValueHeads: 2, Seqs: []core.Sequence{
		{Response: []int32{5, 6}, ShapedReward: 1, Values: []float64{0.2, 0.4, 0.6, 0}},
	}}
	fillAdvantages(p, nil)
	s := p.Seqs[0]
	if !near(s.Advantages[0], 0.7) || !near(s.Advantages[1], 0.7) || !near(s.Returns[0], 1) || !near(s.Returns[1], 1) || len(s.AdvantageBonus) != 2 {
		t.Fatalf("ppo: A %v R %v bonus %v, want A [0.7 0.7], R [1 1]", s.Advantages, s.Returns, s.AdvantageBonus)
	}
}

// fillAdvantages uses the algorithm the program registered, with GAE
// (gamma = lambda = 1) for a critic one, and the kit's stand-ins for a
// name not registered: GAE for "ppo", else GRPO's group normalisation. On
// the group of rewards 1, -1, 0.5 (a two-token first response), by hand:
//   - kit_double (registered here, A = 2 r~): 2, -2, 1;
//   - kit_critic (registered, a critic): head means 1, 0, 0.5 give
//     A = r~ - V = 0, -1, 0 and returns 1, -1, 0.5;
//   - "ppo", not linked into this test: the same GAE;
//   - "nope": mean 1/6, deviations 5/6, -7/6, 1/3, sample variance
//     (25 + 49 + 4)/36/2 = 13/12, so A = deviation / (sqrt(13/12) + 1e-6).
func TestFillAdvantages(t *testing.T) {
	core.RegisterAlgorithm("kit_double", func(p *core.Params) (core.Algorithm, error) { return kitAlgo{}, p.Err() })
	core.RegisterAlgorithm("kit_critic", func(p *core.Params) (core.Algorithm, error) { return kitAlgo{critic: true}, p.Err() })
	sd := math.Sqrt(13.0/12) + 1e-6
	cases := []struct {
		name string
		want []float64
		ret  []float64 // nil: not checked
	}{
		{"kit_double", []float64{2, -2, 1}, nil},
		{"kit_critic", []float64{0, -1, 0}, []float64{1, -1, 0.5}},
		{"ppo", []float64{0, -1, 0}, []float64{1, -1, 0.5}},
		{"nope", []float64{5.0 / 6 / sd, -7.0 / 6 / sd, 1.0 / 3 / sd}, nil},
	}
	for _, c := range cases {
		r := &core.Rollout{Algorithm: c.name, Seqs: []core.Sequence{
			{Group: 0, Response: []int32{5, 6}, ShapedReward: 1, Values: []float64{0.5, 1.5, 1, 1}},
			{Group: 0, Response: []int32{7}, ShapedReward: -1, Values: []float64{-1, 1}},
			{Group: 0, Response: []int32{8}, ShapedReward: 0.5, Values: []float64{0.5, 0.5}},
		}}
		fillAdvantages(r, nil)
		for i, s := range r.Seqs {
			for k := range s.Advantages {
				if math.Abs(s.Advantages[k]-c.want[i]) > 1e-12 || s.AdvantageBonus[k] != 0 {
					t.Errorf("%s: sequence %d token %d: A %v bonus %v, want %v", c.name, i, k, s.Advantages[k], s.AdvantageBonus[k], c.want[i])
				}
				if c.ret != nil && s.Returns[k] != c.ret[i] {
					t.Errorf("%s: sequence %d token %d: return %v, want %v", c.name, i, k, s.Returns[k], c.ret[i])
				}
			}
		}
	}
}

// kitAlgo doubles the shaped reward, or is a critic algorithm.
type kitAlgo struct{ critic bool }

func (kitAlgo) Name() string        { return "kit" }
func (a kitAlgo) NeedsCritic() bool { return a.critic }
func (kitAlgo) Advantages(r *core.Rollout) error {
	for i := range r.Seqs {
		s := &r.Seqs[i]
		s.Advantages = make([]float64, s.Len())
		for t := range s.Advantages {
			s.Advantages[t] = 2 * s.ShapedReward
		}
	}
	return nil
}
func (kitAlgo) Finalize(r *core.Rollout) error { return nil }
