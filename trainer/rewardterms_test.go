package trainer

import (
	"math"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
)

// Lmax = 10, buffer 4: no penalty up to 6 tokens, then (6 - L)/4 * penalty.
func TestOverlongPenalty(t *testing.T) {
	for _, c := range []struct {
		L, buffer int
		penalty   float64
		want      float64
	}{
		{6, 4, 1, 0}, {1, 4, 1, 0}, {7, 4, 1, -0.25}, {9, 4, 1, -0.75}, {10, 4, 1, -1},
		{8, 4, 0.5, -0.25}, {10, 0, 1, 0}, {10, 1, 2, -2}, {9, 1, 2, 0},
	} {
		if got := OverlongPenalty(c.L, 10, c.buffer, c.penalty); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("L=%d buffer=%d penalty=%v: %v, want %v", c.L, c.buffer, c.penalty, got, c.want)
		}
	}
}

func TestRewardPenalties(t *testing.T) {
	cfg, err := LoadConfig(LoadOptions{Env: []string{}, Sets: []string{"rollout.max_response_tokens=4",
		"train.overlong.buffer=2", "train.overlong.penalty=1", "train.kl_mode=reward", "train.kl_coef=0.5", "train.kl_estimator=k3"}})
	if err != nil {
		t.Fatal(err)
	}
	// s0: 4 tokens (overlong (4-2-4)/2 = -1); k3 at log r = ln 2 is 1 - ln 2,
	// at 0 it is 0: KL penalty -0.5 * (1 - ln 2).
	// s1: 2 tokens, no overlong penalty, reference equal: 0.
	r := &core.Rollout{Seqs: []core.Sequence{
		{Response: make([]int32, 4), LogProbs: []float64{0, -1, -1, -1}, RefLogProbs: []float64{math.Ln2, -1, -1, -1}},
		{Response: make([]int32, 2), LogProbs: []float64{-1, -2}, RefLogProbs: []float64{-1, -2}},
	}}
	m := map[string]float64{}
	if err := RewardPenalties(cfg, r, m); err != nil {
		t.Fatal(err)
	}
	want0 := -1 - 0.5*(1-math.Ln2)
	if math.Abs(r.Seqs[0].RewardPenalty-want0) > 1e-12 || r.Seqs[1].RewardPenalty != 0 {
		t.Errorf("penalties %v %v, want %v 0", r.Seqs[0].RewardPenalty, r.Seqs[1].RewardPenalty, want0)
	}
	if math.Abs(m["reward/overlong_penalty"]+0.5) > 1e-12 || math.Abs(m["reward/kl_penalty"]+0.25*(1-math.Ln2)) > 1e-12 {
		t.Errorf("metrics %v", m)
	}
	r.Seqs[1].RefLogProbs = nil
	if err := RewardPenalties(cfg, r, m); err == nil || !strings.Contains(err.Error(), "sequences[1]") {
		t.Errorf("missing reference log-probs: %v", err)
	}
}

func TestKeepInformativeGroups(t *testing.T) {
	rewards := []struct {
		group  int
		reward float64
	}{{0, 1}, {0, 1}, {1, 1}, {1, -1}, {2, 0}, {3, -1}, {3, -1}, {3, 1}, {4, -1}, {4, -1}}
	r := &core.Rollout{}
	for _, x := range rewards {
		r.Seqs = append(r.Seqs, core.Sequence{Group: x.group, Reward: x.reward})
	}
	keep, dropped := KeepInformativeGroups(r)
	// Groups 1 and 3 vary; 0, 2 (a group of one) and 4 do not.
	if dropped != 3 || len(keep) != 2 || keep[0][0] != 2 || keep[1][0] != 5 || len(keep[1]) != 3 {
		t.Errorf("keep %v dropped %d, want [[2 3] [5 6 7]] and 3", keep, dropped)
	}
}

// The config refuses a policy loss's setting by the loss's own check.
func TestConfigRefusesLossSettings(t *testing.T) {
	if _, err := LoadConfig(LoadOptions{Env: []string{}, Sets: []string{"train.policy_loss=cispo", "train.ratio_level=sequence"}}); err == nil ||
		!strings.Contains(err.Error(), "train.policy_loss: cispo: train.ratio_level sequence") {
		t.Errorf("config: %v", err)
	}
}
