package main

import (
	"encoding/json"
	"math"
	"testing"
)

// tokenShapeOut is cde-run shape's output with the token-loss fields.
type tokenShapeOut struct {
	Sequences []struct {
		LossCoef  []float64 `json:"loss_coef"`
		PGWeight  []float64 `json:"pg_weight"`
		AbsKLCoef []float64 `json:"abs_kl_coef"`
	} `json:"sequences"`
	PolicyLoss *float64           `json:"policy_loss"`
	Metrics    map[string]float64 `json:"metrics"`
}

func closeTo(a, b float64) bool { return math.Abs(a-b) <= 1e-9*(1+math.Abs(b)) }

func checkRows(t *testing.T, what string, got, want [][]float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("%s[%d]: %v, want %v", what, i, got[i], want[i])
		}
		for k := range want[i] {
			if !closeTo(got[i][k], want[i][k]) {
				t.Errorf("%s[%d][%d] = %.15g, want %.15g", what, i, k, got[i][k], want[i][k])
			}
		}
	}
}

func shapeTokens(t *testing.T, name, yaml, batch string) tokenShapeOut {
	t.Helper()
	_, out, err := runShape(t, t.TempDir(), name, yaml, batch)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var got tokenShapeOut
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return got
}

// forking_tokens with rho 0.4 on shape_loss_test's lossBatch (dr_grpo,
// token-mean, clip 0.2) with entropies s0 {0.5, 2.0}, s1 {0.1}, s2 {1.0},
// s3 {0.3}: N = 5, k = ceil(2) = 2, tau = 1.0, so s0's second token and
// s2 keep their gradient. Of lossBatch's pg (-1.2, -0.9 | 0.8 | 4 | -1.1)
// the kept terms sum to -0.9 + 4 = 3.1: policy_loss 3.1/5 = 0.62;
// loss_coef is the unweighted one (0, -0.18 | 0 | 0.8 | -0.22) times the
// weight: 0, -0.18 | 0 | 0.8 | 0.
func TestShapeForkingTokens(t *testing.T) {
	batch := `{"step": 0, "total_steps": 5, "sequences": [
	{"group": 0, "reward": 1, "logprobs": [0, 0], "entropies": [0.5, 2.0], "new_logprobs": [0.4054651081081644, -0.10536051565782628]},
	{"group": 0, "reward": -1, "logprobs": [0], "entropies": [0.1], "new_logprobs": [-0.6931471805599453]},
	{"group": 1, "reward": -1, "logprobs": [0], "entropies": [1.0], "new_logprobs": [1.3862943611198906]},
	{"group": 1, "reward": 1, "logprobs": [0], "entropies": [0.3], "new_logprobs": [0.09531017980432493]}]}`
	got := shapeTokens(t, "forking", "algorithm: {name: dr_grpo}\nstrategies: [{name: forking_tokens, rho: 0.4}]\n", batch)
	if got.PolicyLoss == nil || !closeTo(*got.PolicyLoss, 0.62) {
		t.Fatalf("policy_loss %v, want 0.62", got.PolicyLoss)
	}
	var pgw, coef [][]float64
	for _, s := range got.Sequences {
		pgw = append(pgw, s.PGWeight)
		coef = append(coef, s.LossCoef)
		if s.AbsKLCoef != nil {
			t.Errorf("abs_kl_coef %v without kl_cov", s.AbsKLCoef)
		}
	}
	checkRows(t, "pg_weight", pgw, [][]float64{{0, 1}, {0}, {1}, {0}})
	checkRows(t, "loss_coef", coef, [][]float64{{0, -0.18}, {0}, {0.8}, {0}})
	if !closeTo(got.Metrics["explore/forking_tokens/pg_weight_mean"], 0.4) {
		t.Errorf("explore/forking_tokens/pg_weight_mean %v, want 0.4", got.Metrics["explore/forking_tokens/pg_weight_mean"])
	}
}

// kl_cov with ratio 0.34 and kl_coef 0.5, dr_grpo, token-mean, clip 0.2.
// Rewards +1, -1 in one group: A = +1 (s0, two tokens), -1 (s1).
// Log-probs s0 {-1, -3}, s1 {-2}: mean -2; mean A = 1/3;
// Cov = (lp + 2)(A - 1/3): s0 {2/3, -2/3}, s1 {0}: k = floor(1.02) = 1,
// s0's first token gets abs_kl_coef 0.5.
// New log-probs: s0 {-1 + ln 1.1, -3} (ratios 1.1, 1), s1 {-2 + ln 0.9}:
//
//	s0 t0: pg -1.1, d/d new -1.1; plus 0.5 |ln 1.1|, d/d new 0.5
//	s0 t1: pg -1,   d/d new -1
//	s1 t0: A = -1, ratio 0.9: -A*0.9 = 0.9 = -A*clip(0.9): pg 0.9, d/d new 0.9
//
// policy_loss = (-1.1 + 0.5 ln 1.1 - 1 + 0.9)/3; loss_coef {-0.6/3, -1/3}, {0.3}.
func TestShapeKLCov(t *testing.T) {
	batch := `{"step": 0, "total_steps": 5, "sequences": [
	{"group": 0, "reward": 1, "logprobs": [-1, -3], "new_logprobs": [-0.9046898201956751, -3]},
	{"group": 0, "reward": -1, "logprobs": [-2], "new_logprobs": [-2.1053605156578263]}]}`
	got := shapeTokens(t, "klcov", "algorithm: {name: dr_grpo}\nstrategies: [{name: kl_cov, ratio: 0.34, kl_coef: 0.5}]\n", batch)
	want := (-1.1 + 0.5*math.Log(1.1) - 1 + 0.9) / 3
	if got.PolicyLoss == nil || !closeTo(*got.PolicyLoss, want) {
		t.Fatalf("policy_loss %v, want %v", got.PolicyLoss, want)
	}
	var kl, coef [][]float64
	for _, s := range got.Sequences {
		kl = append(kl, s.AbsKLCoef)
		coef = append(coef, s.LossCoef)
		if s.PGWeight != nil {
			t.Errorf("pg_weight %v without a pg-weight strategy", s.PGWeight)
		}
	}
	checkRows(t, "abs_kl_coef", kl, [][]float64{{0.5, 0}, {0}})
	checkRows(t, "loss_coef", coef, [][]float64{{-0.2, -1.0 / 3}, {0.3}})
}
