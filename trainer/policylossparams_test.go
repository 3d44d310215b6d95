package trainer

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
)

// lossesDeclaring lists the registered policy losses declaring key, as
// the config's errors name them (from the registry).
func lossesDeclaring(key string) string {
	var out []string
	for _, n := range core.PolicyLosses() {
		if keys, _ := core.PolicyLossKeys(n); slices.Contains(keys, key) {
			out = append(out, n)
		}
	}
	return strings.Join(out, ", ")
}

// train.policy_loss_params reaches the Config as given, from a file, the
// environment or --set, and is read by the loss's factory when the config
// is: a refusal names train.policy_loss_params.KEY. A config without it
// (every config written before it existed) decodes as before: the loss at
// its defaults.
func TestConfigPolicyLossParams(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "sapo.yaml")
	if err := os.WriteFile(file, []byte("train: {policy_loss: sapo, policy_loss_params: {tau_pos: 0.5, tau_neg: 2}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(dir, "old.yaml")
	if err := os.WriteFile(old, []byte("train: {policy_loss: cispo, clip_high: 0.28}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		o    LoadOptions
		loss string
		want map[string]any
	}{
		{"defaults", LoadOptions{}, core.LossPPO, map[string]any{}},
		{"a config from before the key", LoadOptions{File: old}, core.LossCISPO, map[string]any{}},
		{"file", LoadOptions{File: file}, core.LossSAPO, map[string]any{"tau_pos": 0.5, "tau_neg": 2}},
		{"--set", LoadOptions{Sets: []string{"train.policy_loss=sapo", "train.policy_loss_params.tau_neg=1.5"}}, core.LossSAPO, map[string]any{"tau_neg": 1.5}},
		{"environment", LoadOptions{Env: []string{"CDE_TRAIN__POLICY_LOSS=sapo", "CDE_TRAIN__POLICY_LOSS_PARAMS__TAU_POS=3"}}, core.LossSAPO, map[string]any{"tau_pos": 3}},
		{"--set over the file", LoadOptions{File: file, Sets: []string{"train.policy_loss_params.tau_pos=0.25"}}, core.LossSAPO, map[string]any{"tau_pos": 0.25, "tau_neg": 2}},
		{"null: the defaults", LoadOptions{Sets: []string{"train.policy_loss=sapo", "train.policy_loss_params=null"}}, core.LossSAPO, nil},
	} {
		if c.o.Env == nil {
			c.o.Env = []string{}
		}
		cfg, err := LoadConfig(c.o)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if cfg.Train.PolicyLoss != c.loss || !maps.Equal(cfg.Train.PolicyLossParams, c.want) {
			t.Errorf("%s: %s %v, want %s %v", c.name, cfg.Train.PolicyLoss, cfg.Train.PolicyLossParams, c.loss, c.want)
		}
	}

	const pre = "config: train.policy_loss_params"
	for _, c := range []struct {
		sets []string
		want string
	}{
		{[]string{"train.policy_loss=sapo", "train.policy_loss_params.tau_pos=0"}, pre + ".tau_pos: must be in [0.01, 100], got 0"},
		{[]string{"train.policy_loss=sapo", "train.policy_loss_params.tau_neg=1000"}, pre + ".tau_neg: must be in [0.01, 100], got 1000"},
		{[]string{"train.policy_loss=sapo", "train.policy_loss_params.tau_neg=hot"}, pre + ".tau_neg: want a number, got \"hot\" (a string)"},
		{[]string{"train.policy_loss=sapo", "train.policy_loss_params.tau=1"}, pre + ".tau: unknown key (the keys of sapo: tau_neg, tau_pos)"},
		{[]string{"train.policy_loss_params.tau_pos=1"}, pre + ".tau_pos: not a key of ppo (it belongs to " + lossesDeclaring("tau_pos") + ")"},
		{[]string{"train.policy_loss=gmpo", "train.policy_loss_params.clip=0.4"}, pre + ".clip: unknown key (the keys of gmpo: none)"},
		{[]string{"train.policy_loss_params=3"}, pre + ": want a mapping, got 3"},
		// The loss's name is checked first.
		{[]string{"train.policy_loss=sapoo", "train.policy_loss_params.tau_pos=1"}, `config: train.policy_loss: unknown value "sapoo"`},
	} {
		if _, err := LoadConfig(LoadOptions{Env: []string{}, Sets: c.sets}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.sets, err, c.want)
		}
	}
}

// The trainer hands train.policy_loss_params to the backend's actor
// update with the loss's name.
func TestActorUpdateGetsPolicyLossParams(t *testing.T) {
	cfg, err := LoadConfig(LoadOptions{Env: []string{}, Sets: []string{"train.steps=1", "train.prompts_per_step=2", "rollout.n=2", "eval.every=0",
		"train.policy_loss=sapo", "train.policy_loss_params={tau_pos: 0.5, tau_neg: 2}"}})
	if err != nil {
		t.Fatal(err)
	}
	var log []string
	be := &recBackend{log: &log}
	tr := &Trainer{Cfg: cfg, Task: fakeTask{}, Backend: be, Algo: meanAlgo{}, RunDir: t.TempDir()}
	if tr.needs, err = tr.Needs(); err != nil {
		t.Fatal(err)
	}
	if err := tr.Step(0, map[string]float64{}); err != nil {
		t.Fatal(err)
	}
	if u := be.lastActor; u.PolicyLoss != core.LossSAPO || !maps.Equal(u.PolicyLossParams, map[string]any{"tau_pos": 0.5, "tau_neg": 2}) {
		t.Errorf("the actor update got %s %v, want sapo {tau_pos: 0.5, tau_neg: 2}", u.PolicyLoss, u.PolicyLossParams)
	}
}
