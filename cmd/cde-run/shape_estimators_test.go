package main

import (
	"encoding/json"
	"math"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
)

// cde-run shape on a tiny hand-written rollout, one per advantage estimator
// of #15 item 1, with the advantages worked out by hand in the comments.
// No strategy is configured, so r~ = r, reward_bonus and advantage_bonus
// are 0.
func TestShapeEstimators(t *testing.T) {
	w1 := 1 / math.Sqrt(1+1e-8)      // reinforce_pp: sample var 1
	w23 := 1 / math.Sqrt(2.0/3+1e-8) // reinforce_pp_baseline: sample var 2/3
	mx := (2.0 / 3) / (1.0/3 + 1e-6) // maxrl: the lone correct answer of three
	cases := []struct {
		name, yaml, batch string
		adv, ret          [][]float64
	}{
		{
			name: "rloo",
			yaml: "algorithm: {name: rloo}\n",
			// Group 0: r = [1, -1, -1] -> 1 - (-1-1)/2 = 2; -1 - (1-1)/2 = -1 (twice).
			// Group 1: a group of one -> 0.
			batch: `{"step": 0, "total_steps": 5, "sequences": [
				{"group": 0, "reward": 1, "logprobs": [-0.1, -0.2]},
				{"group": 0, "reward": -1, "logprobs": [-0.3]},
				{"group": 0, "reward": -1, "logprobs": [-0.4, -0.5, -0.6]},
				{"group": 1, "reward": 1, "logprobs": [-0.7, -0.8]}]}`,
			adv: [][]float64{{2, 2}, {-1}, {-1, -1, -1}, {0, 0}},
			ret: [][]float64{{2, 2}, {-1}, {-1, -1, -1}, {0, 0}},
		},
		{
			name: "reinforce_pp",
			yaml: "algorithm: {name: reinforce_pp}\n",
			// Returns r on every token: 1, 1 | -1 | 1. Whitening over the 4
			// tokens: mean 2/4 = 1/2; deviations 1/2, 1/2, -3/2, 1/2; squares
			// 3/4 + 9/4 = 3; sample var 3/3 = 1; A = dev / sqrt(1 + 1e-8).
			batch: `{"step": 0, "total_steps": 5, "sequences": [
				{"group": 0, "reward": 1, "logprobs": [-0.1, -0.2]},
				{"group": 0, "reward": -1, "logprobs": [-0.3]},
				{"group": 1, "reward": 1, "logprobs": [-0.4]}]}`,
			adv: [][]float64{{0.5 * w1, 0.5 * w1}, {-1.5 * w1}, {0.5 * w1}},
			ret: [][]float64{{1, 1}, {-1}, {1}},
		},
		{
			name: "reinforce_pp_baseline",
			yaml: "algorithm: {name: reinforce_pp_baseline}\n",
			// Group 0: r = [1, -1], mean 0 -> 1 (1 token), -1 (3 tokens); group 1
			// alone -> 0 (2 tokens). Tokens 1, -1, -1, -1, 0, 0: mean -2/6 = -1/3;
			// deviations 4/3, -2/3 x3, 1/3 x2; squares (16 + 12 + 2)/9 = 10/3;
			// sample var (10/3)/5 = 2/3; A = dev / sqrt(2/3 + 1e-8).
			batch: `{"step": 0, "total_steps": 5, "sequences": [
				{"group": 0, "reward": 1, "logprobs": [-0.1]},
				{"group": 0, "reward": -1, "logprobs": [-0.2, -0.3, -0.4]},
				{"group": 1, "reward": 1, "logprobs": [-0.5, -0.6]}]}`,
			adv: [][]float64{{4.0 / 3 * w23}, {-2.0 / 3 * w23, -2.0 / 3 * w23, -2.0 / 3 * w23}, {1.0 / 3 * w23, 1.0 / 3 * w23}},
			ret: [][]float64{{1}, {-1, -1, -1}, {1, 1}},
		},
		{
			name: "dr_grpo",
			yaml: "algorithm: {name: dr_grpo}\n",
			// Group 0: r = [1, -1, -1, -1], mean -1/2 -> 1.5, -0.5 x3 (no std).
			// Group 1: [-1, -1] -> 0.
			batch: `{"step": 0, "total_steps": 5, "sequences": [
				{"group": 0, "reward": 1, "logprobs": [-0.1, -0.2]},
				{"group": 0, "reward": -1, "logprobs": [-0.3]},
				{"group": 1, "reward": -1, "logprobs": [-0.4]},
				{"group": 0, "reward": -1, "logprobs": [-0.5]},
				{"group": 0, "reward": -1, "logprobs": [-0.6, -0.7]},
				{"group": 1, "reward": -1, "logprobs": [-0.8]}]}`,
			adv: [][]float64{{1.5, 1.5}, {-0.5}, {0}, {-0.5}, {-0.5, -0.5}, {0}},
			ret: [][]float64{{1.5, 1.5}, {-0.5}, {0}, {-0.5}, {-0.5, -0.5}, {0}},
		},
		{
			name: "grpo_passk",
			yaml: "algorithm: {name: grpo_passk, k: 2}\n",
			// Group 0: N = 4, c = 1 (the "correct" flag, not the reward), k = 2:
			// C(3,2)/C(4,2) = 1/2 -> Rbar = 1/2, sigma = 1/2, A_pos = 1;
			// C(2,1)/C(3,1) = 2/3 -> A_neg = (1/2 - 2/3)/(1/2) = -1/3.
			// Group 1: both correct -> sigma = 0 -> 0.
			batch: `{"step": 0, "total_steps": 5, "sequences": [
				{"group": 0, "reward": -1, "correct": false, "logprobs": [-0.1, -0.2]},
				{"group": 0, "reward": -1, "correct": true, "logprobs": [-0.3]},
				{"group": 0, "reward": 1, "correct": false, "logprobs": [-0.4]},
				{"group": 0, "reward": -1, "correct": false, "logprobs": [-0.5, -0.6, -0.7]},
				{"group": 1, "reward": 1, "correct": true, "logprobs": [-0.8]},
				{"group": 1, "reward": 1, "correct": true, "logprobs": [-0.9]}]}`,
			adv: [][]float64{{-1.0 / 3, -1.0 / 3}, {1}, {-1.0 / 3}, {-1.0 / 3, -1.0 / 3, -1.0 / 3}, {0}, {0}},
			ret: [][]float64{{-1.0 / 3, -1.0 / 3}, {1}, {-1.0 / 3}, {-1.0 / 3, -1.0 / 3, -1.0 / 3}, {0}, {0}},
		},
		{
			name: "maxrl",
			yaml: "algorithm: {name: maxrl}\n",
			// No task here: r_inc = -1, r_cor = 1. Group 0: u = 1, 0, 0,
			// mean 1/3: A = (2/3)/(1/3 + 1e-6), (-1/3)/(1/3 + 1e-6).
			// Group 1: none correct -> 0.
			batch: `{"step": 0, "total_steps": 5, "sequences": [
				{"group": 0, "reward": 1, "logprobs": [-0.1, -0.2]},
				{"group": 0, "reward": -1, "logprobs": [-0.3]},
				{"group": 0, "reward": -1, "logprobs": [-0.4]},
				{"group": 1, "reward": -1, "logprobs": [-0.5]}]}`,
			adv: [][]float64{{mx, mx}, {-mx / 2}, {-mx / 2}, {0}},
			ret: [][]float64{{mx, mx}, {-mx / 2}, {-mx / 2}, {0}},
		},
		{
			name: "rs_grpo",
			yaml: "algorithm: {name: rs_grpo, beta: 2}\n",
			// A pair r = 1, -1: A = +-tanh(beta)/beta = +-tanh(2)/2.
			batch: `{"step": 0, "total_steps": 5, "sequences": [
				{"group": 0, "reward": 1, "logprobs": [-0.1]},
				{"group": 0, "reward": -1, "logprobs": [-0.2, -0.3]}]}`,
			adv: [][]float64{{math.Tanh(2) / 2}, {-math.Tanh(2) / 2, -math.Tanh(2) / 2}},
			ret: [][]float64{{math.Tanh(2) / 2}, {-math.Tanh(2) / 2, -math.Tanh(2) / 2}},
		},
	}
	tmp := t.TempDir()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := filepath.Join(tmp, c.name+".json")
			writeFile(t, in, c.batch)
			cfg := filepath.Join(tmp, c.name+".yaml")
			writeFile(t, cfg, c.yaml)
			out, err := exec.Command(cdeRun, "shape", "--config", cfg, "--in", in).CombinedOutput()
			if err != nil {
				t.Fatalf("shape: %v\n%s", err, out)
			}
			var got shapeOut
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("output is not JSON: %v\n%s", err, out)
			}
			if len(got.Sequences) != len(c.adv) {
				t.Fatalf("%d sequences out, want %d", len(got.Sequences), len(c.adv))
			}
			near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-12*(1+math.Abs(b)) }
			for i, s := range got.Sequences {
				if s.RewardBonus != 0 || len(s.Advantages) != len(c.adv[i]) || len(s.Returns) != len(c.ret[i]) || len(s.AdvantageBonus) != len(c.adv[i]) {
					t.Fatalf("sequence %d: bonus %v, %d advantages, %d returns, %d advantage bonuses; want 0 and %d tokens",
						i, s.RewardBonus, len(s.Advantages), len(s.Returns), len(s.AdvantageBonus), len(c.adv[i]))
				}
				for k := range c.adv[i] {
					if !near(s.Advantages[k], c.adv[i][k]) || !near(s.Returns[k], c.ret[i][k]) || s.AdvantageBonus[k] != 0 {
						t.Errorf("sequence %d token %d: advantage %.15g return %.15g bonus %v, want %.15g, %.15g, 0",
							i, k, s.Advantages[k], s.Returns[k], s.AdvantageBonus[k], c.adv[i][k], c.ret[i][k])
					}
				}
			}
		})
	}
}

// algorithmsDeclaring lists, as the refusal of another algorithm's key
// does, the registered algorithms declaring key: the registry's, which this
// test binary shares with cde-run, so a new algorithm reusing the key
// (an algorithm may) adds itself to the expected message.
func algorithmsDeclaring(t *testing.T, key string) string {
	t.Helper()
	var owners []string
	for _, name := range core.Algorithms() {
		if keys, _ := core.AlgorithmKeys(name); slices.Contains(keys, key) {
			owners = append(owners, name)
		}
	}
	if len(owners) == 0 || slices.Contains(owners, "dr_grpo") {
		t.Fatalf("algorithm key %s belongs to %v: the test wants a key of another algorithm than dr_grpo", key, owners)
	}
	return strings.Join(owners, ", ")
}

// A config error and a run-time error of the estimators reach the user by
// key through cde-run shape.
func TestShapeEstimatorErrors(t *testing.T) {
	tmp := t.TempDir()
	batch := `{"step": 0, "total_steps": 5, "sequences": [
		{"group": 0, "reward": 1, "correct": true, "logprobs": [-0.1]},
		{"group": 0, "reward": -1, "correct": false, "logprobs": [-0.2]}]}`
	in := filepath.Join(tmp, "batch.json")
	writeFile(t, in, batch)
	cases := []struct{ name, yaml, want string }{
		{"k above the group size", "algorithm: {name: grpo_passk}\n", "grpo_passk: group 0 (sequences [0 1]): algorithm.k = 4: must be in [1, N], N = 2"},
		{"k below 1", "algorithm: {name: grpo_passk, k: 0}\n", "config: algorithm.k: must be >= 1"},
		{"grpo key on dr_grpo", "algorithm: {name: dr_grpo, norm_by_std: false}\n", "config: algorithm.norm_by_std: not a key of dr_grpo (it belongs to " + algorithmsDeclaring(t, "norm_by_std") + ")"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := filepath.Join(tmp, "cfg.yaml")
			writeFile(t, cfg, c.yaml)
			out, err := exec.Command(cdeRun, "shape", "--config", cfg, "--in", in).CombinedOutput()
			if err == nil || !strings.Contains(string(out), c.want) {
				t.Fatalf("want an error naming %q, got %v:\n%s", c.want, err, out)
			}
		})
	}
}
