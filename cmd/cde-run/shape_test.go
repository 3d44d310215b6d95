package main

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A random batch in the rollout-file format (docs/rollout-format.md).
type refSeq struct {
	Group     int         `json:"group"`
	Reward    float64     `json:"reward"`
	LogProbs  []float64   `json:"logprobs"`
	Entropies []float64   `json:"entropies"`
	Values    [][]float64 `json:"values"`
	Embedding []float64   `json:"embedding"`
}

type refBatch struct {
	Step       int      `json:"step"`
	TotalSteps int      `json:"total_steps"`
	Sequences  []refSeq `json:"sequences"`
}

type shapeOut struct {
	Sequences []struct {
		RewardBonus    float64   `json:"reward_bonus"`
		ShapedReward   float64   `json:"shaped_reward"`
		Advantages     []float64 `json:"advantages"`
		AdvantageBonus []float64 `json:"advantage_bonus"`
		Returns        []float64 `json:"returns"`
	} `json:"sequences"`
	Metrics map[string]float64 `json:"metrics"`
}

func randomBatch(rng *rand.Rand, k int, sameEmbedding bool) refBatch {
	b := refBatch{Step: 3 + rng.IntN(5), TotalSteps: 10}
	for g := range 4 {
		for range 1 + rng.IntN(4) {
			T := 1 + rng.IntN(6)
			s := refSeq{Group: g, Reward: []float64{1, -1}[rng.IntN(2)]}
			for range T {
				s.LogProbs = append(s.LogProbs, -rng.Float64()*3)
				s.Entropies = append(s.Entropies, rng.Float64())
				v := make([]float64, k)
				for j := range v {
					v[j] = rng.NormFloat64()
				}
				s.Values = append(s.Values, v)
			}
			s.Embedding = []float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
			if sameEmbedding {
				s.Embedding = []float64{0.5, -1, 2}
			}
			b.Sequences = append(b.Sequences, s)
		}
	}
	return b
}

// The reference: docs/algorithms.md's formulas spelled out as plain loops,
// written apart from the code under test.

func refWeight(step, total int) float64 { return 1 } // the configs below use constant w0 = 1

func refPPL(s refSeq, kappa, alpha float64) float64 {
	nll := 0.0
	for _, lp := range s.LogProbs {
		nll -= lp
	}
	nll /= float64(len(s.LogProbs))
	return math.Min(math.Abs(s.Reward)/kappa, alpha*nll)
}

func refGRPO(b refBatch, shaped []float64) [][]float64 {
	out := make([][]float64, len(b.Sequences))
	for i, s := range b.Sequences {
		var members []float64
		for j, o := range b.Sequences {
			if o.Group == s.Group {
				members = append(members, shaped[j])
			}
		}
		a := 0.0
		if len(members) > 1 {
			mean := 0.0
			for _, m := range members {
				mean += m
			}
			mean /= float64(len(members))
			v := 0.0
			for _, m := range members {
				v += (m - mean) * (m - mean)
			}
			std := math.Sqrt(v / float64(len(members)-1))
			a = (shaped[i] - mean) / (std + 1e-6)
		}
		for range s.LogProbs {
			out[i] = append(out[i], a)
		}
	}
	return out
}

func headMean(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m += x
	}
	return m / float64(len(v))
}

func refGAE(s refSeq, shaped float64) (adv, ret []float64) {
	T := len(s.LogProbs)
	adv = make([]float64, T)
	ret = make([]float64, T)
	next := 0.0
	for t := T - 1; t >= 0; t-- {
		vNext := 0.0
		if t+1 < T {
			vNext = headMean(s.Values[t+1])
		}
		r := 0.0
		if t == T-1 {
			r = shaped
		}
		delta := r + vNext - headMean(s.Values[t])
		adv[t] = delta + next
		next = adv[t]
		ret[t] = adv[t] + headMean(s.Values[t])
	}
	return
}

func refMultihead(s refSeq, adv []float64, kappa, alpha float64) []float64 {
	out := make([]float64, len(adv))
	for t := range adv {
		std := 0.0
		if t+1 < len(adv) {
			v := s.Values[t+1]
			m := headMean(v)
			for _, x := range v {
				std += (x - m) * (x - m)
			}
			std = math.Sqrt(std / float64(len(v)))
		}
		out[t] = math.Min(math.Abs(adv[t])/kappa, alpha*std)
	}
	return out
}

func refWhiten(advs [][]float64) {
	var all []float64
	for _, a := range advs {
		all = append(all, a...)
	}
	mean := 0.0
	for _, x := range all {
		mean += x
	}
	mean /= float64(len(all))
	v := 0.0
	for _, x := range all {
		v += (x - mean) * (x - mean)
	}
	v /= float64(len(all) - 1)
	for _, a := range advs {
		for t := range a {
			a[t] = (a[t] - mean) / math.Sqrt(v+1e-8)
		}
	}
}

type shapeCase struct {
	name, yaml string
	ppl, mh    bool
	simhash    bool
	algo       string
}

func TestShapeAgreesWithReference(t *testing.T) {
	cases := []shapeCase{
		{name: "grpo", algo: "grpo", yaml: "algorithm: {name: grpo}\n"},
		{name: "grpo+ppl", algo: "grpo", ppl: true, yaml: "algorithm: {name: grpo}\nstrategies: [{name: ppl, kappa: 3, alpha: 1}]\n"},
		{name: "ppo", algo: "ppo", yaml: "algorithm: {name: ppo}\ntrain: {value_heads: 3}\n"},
		{name: "ppo+ppl", algo: "ppo", ppl: true, yaml: "algorithm: {name: ppo}\ntrain: {value_heads: 3}\nstrategies: [{name: ppl}]\n"},
		{name: "ppo+multihead", algo: "ppo", mh: true, yaml: "algorithm: {name: ppo}\nstrategies: [{name: multihead, heads: 3, kappa: 3, alpha: 0.5}]\n"},
		{name: "ppo+ppl+multihead", algo: "ppo", ppl: true, mh: true, yaml: "algorithm: {name: ppo}\nstrategies: [{name: ppl}, {name: multihead, heads: 3}]\n"},
		{name: "grpo+entropy", algo: "grpo", yaml: "algorithm: {name: grpo}\nstrategies: [{name: entropy, coef: 0.01}]\n"},
		{name: "grpo+simhash", algo: "grpo", simhash: true, yaml: "algorithm: {name: grpo}\nstrategies: [{name: simhash, bits: 8, beta: 0.5}]\n"},
	}
	tmp := t.TempDir()
	rng := rand.New(rand.NewPCG(11, 12))
	for _, c := range cases {
		for trial := range 3 {
			t.Run(fmt.Sprintf("%s/%d", c.name, trial), func(t *testing.T) {
				b := randomBatch(rng, 3, c.simhash)
				in := filepath.Join(tmp, "batch.json")
				data, _ := json.Marshal(b)
				writeFile(t, in, string(data))
				cfg := filepath.Join(tmp, "cfg.yaml")
				writeFile(t, cfg, c.yaml)
				out, err := exec.Command(cdeRun, "shape", "--config", cfg, "--in", in).Output()
				if err != nil {
					t.Fatalf("shape: %v", err)
				}
				var got shapeOut
				if err := json.Unmarshal(out, &got); err != nil {
					t.Fatalf("output is not JSON: %v\n%s", err, out)
				}
				// Reference.
				n := len(b.Sequences)
				bonus := make([]float64, n)
				shaped := make([]float64, n)
				for i, s := range b.Sequences {
					if c.ppl {
						bonus[i] += refPPL(s, 3, 1)
					}
					if c.simhash {
						bonus[i] += 0.5 / math.Sqrt(float64(i+1)) // identical embeddings: counts 1, 2, 3, ...
					}
					shaped[i] = s.Reward + bonus[i]
				}
				var advs, rets, advBonus [][]float64
				if c.algo == "grpo" {
					advs = refGRPO(b, shaped)
					for i := range advs {
						rets = append(rets, append([]float64(nil), advs[i]...))
						advBonus = append(advBonus, make([]float64, len(advs[i])))
					}
				} else {
					for i, s := range b.Sequences {
						a, r := refGAE(s, shaped[i])
						ab := make([]float64, len(a))
						if c.mh {
							ab = refMultihead(s, a, 3, 0.5)
						}
						for t := range a {
							a[t] += ab[t]
						}
						advs, rets, advBonus = append(advs, a), append(rets, r), append(advBonus, ab)
					}
					refWhiten(advs)
				}
				if len(got.Sequences) != n {
					t.Fatalf("%d sequences out, %d in", len(got.Sequences), n)
				}
				near := func(what string, i int, a, b float64) {
					if math.Abs(a-b) > 1e-9*(1+math.Abs(b)) {
						t.Fatalf("sequence %d %s: shape %v, reference %v", i, what, a, b)
					}
				}
				for i, s := range got.Sequences {
					near("reward_bonus", i, s.RewardBonus, bonus[i])
					near("shaped_reward", i, s.ShapedReward, shaped[i])
					if len(s.Advantages) != len(advs[i]) || len(s.Returns) != len(rets[i]) || len(s.AdvantageBonus) != len(advBonus[i]) {
						t.Fatalf("sequence %d: lengths %d/%d/%d, want %d", i, len(s.Advantages), len(s.Returns), len(s.AdvantageBonus), len(advs[i]))
					}
					for k := range advs[i] {
						near(fmt.Sprintf("advantages[%d]", k), i, s.Advantages[k], advs[i][k])
						near(fmt.Sprintf("returns[%d]", k), i, s.Returns[k], rets[i][k])
						near(fmt.Sprintf("advantage_bonus[%d]", k), i, s.AdvantageBonus[k], advBonus[i][k])
					}
				}
				if c.ppl {
					m := 0.0
					for _, x := range bonus {
						m += x
					}
					near("explore/ppl/bonus_mean", -1, got.Metrics["explore/ppl/bonus_mean"], m/float64(n))
				}
			})
		}
	}
}

func TestShapeErrors(t *testing.T) {
	tmp := t.TempDir()
	cfg := filepath.Join(tmp, "cfg.yaml")
	writeFile(t, cfg, "algorithm: {name: ppo}\n")
	cases := []struct{ name, batch, want string }{
		{"no values for ppo", `{"step": 1, "total_steps": 5, "sequences": [{"group": 0, "reward": 1, "logprobs": [-1]}]}`, "sequences[0].values"},
		{"ragged entropies", `{"step": 1, "total_steps": 5, "sequences": [{"group": 0, "reward": 1, "logprobs": [-1, -2], "entropies": [1]}]}`, "sequences[0].entropies"},
		{"empty logprobs", `{"step": 1, "total_steps": 5, "sequences": [{"group": 0, "reward": 1, "logprobs": []}]}`, "sequences[0].logprobs"},
		{"not json", `{"step": `, "batch.json"},
		// Fields with no sane default are errors naming the file, the sequence
		// and the field; these used to be read as 0.
		{"missing step", `{"total_steps": 5, "sequences": [{"group": 0, "reward": 1, "logprobs": [-1], "values": [[0]]}]}`, "batch.json: step: missing"},
		{"missing group", `{"step": 1, "total_steps": 5, "sequences": [{"group": 0, "reward": 1, "logprobs": [-1], "values": [[0]]}, {"reward": 1, "logprobs": [-1], "values": [[0]]}]}`, "batch.json: sequences[1].group: missing"},
		{"missing reward", `{"step": 1, "total_steps": 5, "sequences": [{"group": 0, "logprobs": [-1], "values": [[0]]}]}`, "batch.json: sequences[0].reward: missing"},
		{"null log-prob", `{"step": 1, "total_steps": 5, "sequences": [{"group": 0, "reward": 1, "logprobs": [-1, null], "values": [[0], [0]]}]}`, "batch.json: sequences[0].logprobs[1]: null"},
		// Finite inputs whose result overflows: delta = 1e308 - (-1e308) = +Inf.
		{"overflow", `{"step": 1, "total_steps": 5, "sequences": [{"group": 0, "reward": 1e308, "logprobs": [-1], "values": [[-1e308]]}]}`, "batch.json: sequences[0].advantages[0] = "},
		{"step past the config's train.steps", `{"step": 200, "sequences": [{"group": 0, "reward": 1, "logprobs": [-1], "values": [[0]]}]}`, "batch.json: step: 200: must be < train.steps (200) of the config"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := filepath.Join(tmp, "batch.json")
			writeFile(t, in, c.batch)
			out, err := exec.Command(cdeRun, "shape", "--config", cfg, "--in", in).CombinedOutput()
			if err == nil || !strings.Contains(string(out), c.want) {
				t.Fatalf("want an error naming %q, got %v:\n%s", c.want, err, out)
			}
		})
	}
}
