package main

import (
	"encoding/json"
	"math"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// lossShapeOut is cde-run shape's output with the policy-loss fields.
type lossShapeOut struct {
	Sequences []struct {
		RewardPenalty *float64  `json:"reward_penalty"`
		ShapedReward  float64   `json:"shaped_reward"`
		Advantages    []float64 `json:"advantages"`
		LossCoef      []float64 `json:"loss_coef"`
		KLLossCoef    []float64 `json:"kl_loss_coef"`
	} `json:"sequences"`
	PolicyLoss *float64           `json:"policy_loss"`
	KLLoss     *float64           `json:"kl_loss"`
	Metrics    map[string]float64 `json:"metrics"`
}

func runShape(t *testing.T, dir, name, yaml, batch string) (lossShapeOut, string, error) {
	t.Helper()
	in := filepath.Join(dir, name+".json")
	writeFile(t, in, batch)
	cfg := filepath.Join(dir, name+".yaml")
	writeFile(t, cfg, yaml)
	out, err := exec.Command(cdeRun, "shape", "--config", cfg, "--in", in).CombinedOutput()
	var got lossShapeOut
	if err == nil {
		if jerr := json.Unmarshal(out, &got); jerr != nil {
			t.Fatalf("output is not JSON: %v\n%s", jerr, out)
		}
	}
	return got, string(out), err
}

// lossBatch: dr_grpo advantages (r - group mean) are +1, -1 in group 0 and
// -1, +1 in group 1; old log-probs 0, new = ln(ratio):
//
//	s0: A=+1, ratios 1.5, 0.9: 1.5 takes the clipped branch (-1.2 > -1.5)
//	    past 1.2: pg -1.2, no gradient; 0.9 is inside: pg -0.9, d pg/d new =
//	    -A*ratio = -0.9
//	s1: A=-1, ratio 0.5: loss1 0.5 < loss2 0.8: pg 0.8, clipped below 0.8, no gradient
//	s2: A=-1, ratio 4: loss1 4 > loss2 1.2: pg 4, gradient 4; with the dual
//	    clip c = 3: min(4, 3) = 3, no gradient
//	s3: A=+1, ratio 1.1, inside: pg -1.1, gradient -1.1
//
// Sum of pg 1.6 (0.6 with c = 3); N = 5 tokens, B = 4 sequences, Lmax = 8;
// the clipped branch at s0's first token and s1: pg_clipfrac 2/5.
const lossBatch = `{"step": 0, "total_steps": 5, "sequences": [
	{"group": 0, "reward": 1, "logprobs": [0, 0], "new_logprobs": [0.4054651081081644, -0.10536051565782628]},
	{"group": 0, "reward": -1, "logprobs": [0], "new_logprobs": [-0.6931471805599453]},
	{"group": 1, "reward": -1, "logprobs": [0], "new_logprobs": [1.3862943611198906]},
	{"group": 1, "reward": 1, "logprobs": [0], "new_logprobs": [0.09531017980432493]}]}`

func TestShapePolicyLossHandWorked(t *testing.T) {
	base := "algorithm: {name: dr_grpo}\nrollout: {max_response_tokens: 8}\n"
	cases := []struct {
		name, train string
		loss        float64
		coef        [][]float64
	}{
		// 1.6 / 5; coefficients gradient / 5.
		{"token-mean", "train: {loss_agg_mode: token-mean}", 0.32, [][]float64{{0, -0.18}, {0}, {0.8}, {-0.22}}},
		// (1/4) * ((-1.2 - 0.9)/2 + 0.8 + 4 - 1.1) = 2.65/4; s0 weighs 1/(4*2), the others 1/4.
		{"seq-mean-token-mean", "train: {loss_agg_mode: seq-mean-token-mean}", 0.6625, [][]float64{{0, -0.1125}, {0}, {1}, {-0.275}}},
		// 1.6 / 4; every token weighs 1/4.
		{"seq-mean-token-sum", "train: {loss_agg_mode: seq-mean-token-sum}", 0.4, [][]float64{{0, -0.225}, {0}, {1}, {-0.275}}},
		// 1.6 / (4 * 8); every token weighs 1/32.
		{"seq-mean-token-sum-norm", "train: {loss_agg_mode: seq-mean-token-sum-norm}", 0.05, [][]float64{{0, -0.028125}, {0}, {0.125}, {-0.034375}}},
		// Dual clip c = 3: 0.6 / 5; s2 passes no gradient.
		{"dual clip", "train: {clip_ratio_c: 3}", 0.12, [][]float64{{0, -0.18}, {0}, {0}, {-0.22}}},
		// Dual clip with seq-mean-token-sum: 0.6 / 4.
		{"dual clip seq-mean-token-sum", "train: {clip_ratio_c: 3, loss_agg_mode: seq-mean-token-sum}", 0.15, [][]float64{{0, -0.225}, {0}, {0}, {-0.275}}},
	}
	dir := t.TempDir()
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-12*(1+math.Abs(b)) }
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, out, err := runShape(t, dir, strings.ReplaceAll(c.name, " ", "_"), base+c.train+"\n", lossBatch)
			if err != nil {
				t.Fatalf("shape: %v\n%s", err, out)
			}
			if got.PolicyLoss == nil || !near(*got.PolicyLoss, c.loss) {
				t.Fatalf("policy_loss %v, want %v\n%s", got.PolicyLoss, c.loss, out)
			}
			if !near(got.Metrics["actor/pg_clipfrac"], 0.4) {
				t.Errorf("pg_clipfrac %v, want 0.4", got.Metrics["actor/pg_clipfrac"])
			}
			if got.KLLoss != nil {
				t.Errorf("kl_loss %v without ref_logprobs", *got.KLLoss)
			}
			for i, s := range got.Sequences {
				if len(s.LossCoef) != len(c.coef[i]) {
					t.Fatalf("sequence %d: %d loss_coef, want %d", i, len(s.LossCoef), len(c.coef[i]))
				}
				for k := range s.LossCoef {
					if !near(s.LossCoef[k], c.coef[i][k]) {
						t.Errorf("sequence %d token %d: loss_coef %.15g, want %.15g", i, k, s.LossCoef[k], c.coef[i][k])
					}
				}
			}
		})
	}
	// Without new_logprobs the output has neither field.
	plain := strings.NewReplacer(`, "new_logprobs": [0.4054651081081644, -0.10536051565782628]`, "",
		`, "new_logprobs": [-0.6931471805599453]`, "", `, "new_logprobs": [1.3862943611198906]`, "",
		`, "new_logprobs": [0.09531017980432493]`, "").Replace(lossBatch)
	_, out, err := runShape(t, dir, "plain", base, plain)
	if err != nil || strings.Contains(out, "policy_loss") || strings.Contains(out, "loss_coef") || strings.Contains(out, "reward_penalty") {
		t.Errorf("without new_logprobs: %v\n%s", err, out)
	}
}

// GSPO (ratio_level: sequence, clip 0.05 each side) with a k3 KL term.
// dr_grpo advantages +1 (sA), -1 (sB).
// sA: log-ratios ln 2, -ln 2: mean 0, s = 1, inside: pg -1 per token,
// gradient -A*s = -1 per token. sB: log-ratios 2 ln 1.1, 0: mean ln 1.1,
// s = 1.1, A = -1: loss1 = 1.1 > loss2 = 1.05: pg 1.1 per token, gradient
// -A*s = 1.1 per token. token-mean over 4 tokens: (-2 + 2.2)/4 = 0.05;
// loss_coef -0.25 (sA) and 0.275 (sB).
// ref_logprobs = new + ln 2 at every token: k3 = 2 - ln 2 - 1 = 1 - ln 2,
// kl_loss = 1 - ln 2, d k3/d new = 1 - 2 = -1: kl_loss_coef -1/4.
func TestShapeSequenceRatioAndKL(t *testing.T) {
	l2, l11 := math.Ln2, math.Log(1.1)
	batch := `{"step": 0, "total_steps": 5, "sequences": [
		{"group": 0, "reward": 1, "logprobs": [-1, -1], "new_logprobs": [` + f(-1+l2) + `, ` + f(-1-l2) + `],
		 "ref_logprobs": [` + f(-1+2*l2) + `, ` + f(-1) + `]},
		{"group": 0, "reward": -1, "logprobs": [-2, -2], "new_logprobs": [` + f(-2+2*l11) + `, -2],
		 "ref_logprobs": [` + f(-2+2*l11+l2) + `, ` + f(-2+l2) + `]}]}`
	yaml := "algorithm: {name: dr_grpo}\ntrain: {ratio_level: sequence, clip_low: 0.05, clip_high: 0.05, kl_coef: 0.1, kl_estimator: k3}\n"
	got, out, err := runShape(t, t.TempDir(), "gspo", yaml, batch)
	if err != nil {
		t.Fatalf("shape: %v\n%s", err, out)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*(1+math.Abs(b)) }
	if got.PolicyLoss == nil || !near(*got.PolicyLoss, 0.05) || got.KLLoss == nil || !near(*got.KLLoss, 1-l2) {
		t.Fatalf("policy_loss %v kl_loss %v, want 0.05 and %v\n%s", got.PolicyLoss, got.KLLoss, 1-l2, out)
	}
	for i, want := range []float64{-0.25, 0.275} {
		for k := range 2 {
			if !near(got.Sequences[i].LossCoef[k], want) || !near(got.Sequences[i].KLLossCoef[k], -0.25) {
				t.Errorf("sequence %d token %d: loss_coef %v kl_loss_coef %v, want %v, -0.25", i, k,
					got.Sequences[i].LossCoef[k], got.Sequences[i].KLLossCoef[k], want)
			}
		}
	}
}

func f(x float64) string {
	b, _ := json.Marshal(x)
	return string(b)
}

// Overlong punishment and KL in the reward, through shape: Lmax = 2,
// buffer 1: a response of 2 tokens gets (2 - 1 - 2)/1 * 0.5 = -0.5, one of
// 1 token 0. kl_mode: reward with k1 and kl_coef 0.5: -0.5 * sum_t (old -
// ref); s0: old [-1, -1], ref [-2, -1]: k1 sum 1, penalty -0.5; s1: old
// [-1], ref [-0.5]: k1 -0.5, penalty +0.25. Rewards 1 and -1, so shaped
// rewards 1 - 0.5 - 0.5 = 0 and -1 + 0.25 = -0.75; dr_grpo advantages
// 0.375, -0.375.
func TestShapeRewardPenalties(t *testing.T) {
	batch := `{"step": 0, "total_steps": 5, "sequences": [
		{"group": 0, "reward": 1, "logprobs": [-1, -1], "ref_logprobs": [-2, -1]},
		{"group": 0, "reward": -1, "logprobs": [-1], "ref_logprobs": [-0.5]}]}`
	yaml := "algorithm: {name: dr_grpo}\nrollout: {max_response_tokens: 2}\n" +
		"train: {overlong: {buffer: 1, penalty: 0.5}, kl_mode: reward, kl_coef: 0.5, kl_estimator: k1}\n"
	dir := t.TempDir()
	got, out, err := runShape(t, dir, "penalties", yaml, batch)
	if err != nil {
		t.Fatalf("shape: %v\n%s", err, out)
	}
	for i, want := range []struct{ penalty, shaped, adv float64 }{{-1, 0, 0.375}, {0.25, -0.75, -0.375}} {
		s := got.Sequences[i]
		if s.RewardPenalty == nil || *s.RewardPenalty != want.penalty || s.ShapedReward != want.shaped || s.Advantages[0] != want.adv {
			t.Errorf("sequence %d: penalty %v shaped %v advantage %v, want %v %v %v", i, s.RewardPenalty, s.ShapedReward, s.Advantages[0], want.penalty, want.shaped, want.adv)
		}
	}
	if got.Metrics["reward/overlong_penalty"] != -0.25 || got.Metrics["reward/kl_penalty"] != -0.125 {
		t.Errorf("metrics %v", got.Metrics)
	}
	// kl_mode: reward without ref_logprobs is an error naming the sequence.
	noRef := `{"step": 0, "total_steps": 5, "sequences": [{"group": 0, "reward": 1, "logprobs": [-1]}]}`
	if _, out, err := runShape(t, dir, "noref", yaml, noRef); err == nil || !strings.Contains(out, "sequences[0]: train.kl_mode: reward needs reference log-probs") {
		t.Errorf("want an error naming sequences[0] and train.kl_mode, got %v\n%s", err, out)
	}
}

// grpo_passk reads "correct": a sequence without it is an error naming it,
// not a silent false.
func TestShapePassKNeedsCorrect(t *testing.T) {
	batch := `{"step": 0, "total_steps": 5, "sequences": [
		{"group": 0, "reward": 1, "correct": true, "logprobs": [-0.1]},
		{"group": 0, "reward": -1, "logprobs": [-0.2]}]}`
	_, out, err := runShape(t, t.TempDir(), "passk", "algorithm: {name: grpo_passk, k: 1}\n", batch)
	if err == nil || !strings.Contains(out, "sequences[1].correct: required by algorithm grpo_passk") {
		t.Errorf("want an error naming sequences[1].correct, got %v\n%s", err, out)
	}
}

// SAPO on lossBatch with its own keys (train.policy_loss_params), worked
// from pg = -(4/tau) sigmoid(tau (ratio - 1)) A, tau = tau_pos where A > 0,
// tau_neg elsewhere: with tau_pos 2, tau_neg 0.5 the five tokens give
// -2 s(1), -2 s(-0.2), 8 s(-0.25), 8 s(1.5), -2 s(0.2) (s the logistic),
// mean 1.3162133290405509; at the defaults (1, 1.05) the mean is
// -0.28418267752973597. `shape` must pass the keys to the loss.
func TestShapeSAPOKeys(t *testing.T) {
	base := "algorithm: {name: dr_grpo}\nrollout: {max_response_tokens: 8}\n"
	dir := t.TempDir()
	for _, c := range []struct {
		name, train string
		loss        float64
	}{
		{"sapo_keys", "train: {policy_loss: sapo, policy_loss_params: {tau_pos: 2, tau_neg: 0.5}}", 1.3162133290405509},
		{"sapo_defaults", "train: {policy_loss: sapo}", -0.28418267752973597},
	} {
		got, out, err := runShape(t, dir, c.name, base+c.train+"\n", lossBatch)
		if err != nil {
			t.Fatalf("%s: shape: %v\n%s", c.name, err, out)
		}
		if got.PolicyLoss == nil || math.Abs(*got.PolicyLoss-c.loss) > 1e-12 {
			t.Fatalf("%s: policy_loss %v, want %v\n%s", c.name, got.PolicyLoss, c.loss, out)
		}
	}
}
