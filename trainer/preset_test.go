package trainer

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	_ "github.com/cde-rl/cde/algos/grpo" // no critic: no warm-up
	_ "github.com/cde-rl/cde/algos/ppo"  // a critic: the paper's warm-up
)

// The paper preset fills the keys left at their defaults with the paper's
// values (Table "training-detail" and its objectives) and leaves every key
// the user set, in the file, the environment or a flag, as set.
func TestPaperPreset(t *testing.T) {
	dir := t.TempDir()
	write := func(yaml string) string {
		p := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	strat := func(c *Config, i int) map[string]any { return c.Strategies[i] }

	c, err := LoadConfig(LoadOptions{Env: []string{}, File: write(`preset: paper
algorithm: {name: ppo}
strategies:
  - {name: ppl}
  - {name: multihead, heads: 4}
  - {name: multihead, heads: 16}
  - {name: multihead}
  - {name: ppl, weight: {schedule: constant, w0: 0.5}}
  - {name: multihead, heads: 16, zeta: 0.25}
`)})
	if err != nil {
		t.Fatal(err)
	}
	if c.Train.LossAggMode != "seq-mean-token-mean" || c.Train.CriticWarmup != 10 || c.Preset != "paper" {
		t.Errorf("train: loss_agg_mode %q, critic_warmup %d, preset %q", c.Train.LossAggMode, c.Train.CriticWarmup, c.Preset)
	}
	w, _ := strat(c, 0)["weight"].(map[string]any)
	if w["schedule"] != "staircase" || w["w0"] != 1.0 {
		t.Errorf("ppl weight %v, want the staircase", w)
	}
	for i, want := range map[int]float64{1: 1, 2: 0.5, 3: 1, 5: 0.25} {
		if got := strat(c, i)["zeta"]; got != want {
			t.Errorf("strategies[%d].zeta = %v, want %v", i, got, want)
		}
	}
	if w, _ := strat(c, 4)["weight"].(map[string]any); w["schedule"] != "constant" {
		t.Errorf("a weight the user set was replaced: %v", w)
	}
	want := []string{"train.loss_agg_mode", "train.critic_warmup", "strategies[0].weight", "strategies[1].zeta", "strategies[2].zeta", "strategies[3].zeta"}
	if !slices.Equal(c.PresetApplied, want) {
		t.Errorf("applied %v, want %v", c.PresetApplied, want)
	}

	// Keys the user set win, from the file, the environment or a flag;
	// GRPO gets no critic warm-up.
	c, err = LoadConfig(LoadOptions{File: write("preset: paper\ntrain: {loss_agg_mode: token-mean}\n"), Env: []string{"CDE_TRAIN__CRITIC_WARMUP=3"}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Train.LossAggMode != "token-mean" || c.Train.CriticWarmup != 3 || len(c.PresetApplied) != 0 {
		t.Errorf("user keys: %q %d %v", c.Train.LossAggMode, c.Train.CriticWarmup, c.PresetApplied)
	}
	c, err = LoadConfig(LoadOptions{Env: []string{}, Sets: []string{"preset=paper", "train.loss_agg_mode=seq-mean-token-sum"}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Train.LossAggMode != "seq-mean-token-sum" || c.Train.CriticWarmup != 0 {
		t.Errorf("flags: %q %d", c.Train.LossAggMode, c.Train.CriticWarmup)
	}
	// No preset: the defaults.
	c, err = LoadConfig(LoadOptions{Env: []string{}, File: write("strategies: [{name: ppl}]\n")})
	if err != nil {
		t.Fatal(err)
	}
	if c.Preset != "none" || c.Train.LossAggMode != "token-mean" || strat(c, 0)["weight"] != nil {
		t.Errorf("no preset: %q %q %v", c.Preset, c.Train.LossAggMode, strat(c, 0)["weight"])
	}
	// A resume starts from the run's resolved config, where the user's
	// token-mean under the preset must stay token-mean.
	c, err = LoadConfig(LoadOptions{Env: []string{}, Base: []byte(DefaultConfigYAML + "\n"), Sets: []string{"preset=paper"}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Train.LossAggMode != "token-mean" {
		t.Errorf("resume: the preset replaced a resolved key: %q", c.Train.LossAggMode)
	}
	if _, err := LoadConfig(LoadOptions{Env: []string{}, Sets: []string{"preset=papr"}}); err == nil || !strings.Contains(err.Error(), "preset: want one of none, paper") {
		t.Errorf("a misspelt preset: %v", err)
	}
}
