package trainer

import (
	"strings"
	"testing"
)

// A config error words a value as its writer wrote it, never by its Go
// type, and an unknown key or name that a typo explains comes with the
// closest known one (only then: k4 among k1, k2, k3 gets none).
func TestConfigMessages(t *testing.T) {
	for _, c := range []struct {
		set, want, not string
	}{
		{"train.stepz=1", "train.stepz: unknown key, did you mean train.steps? (known keys here: ", ""},
		{"model.d_modle=4", "did you mean model.d_model?", ""},
		{"train.zzzzzzzz=1", "train.zzzzzzzz: unknown key (known keys here: ", "did you mean"},
		{"train.steps=[4]", "train.steps: want an integer, got [4] (a list of 1 number)", "interface"},
		{"train.steps=1.5", "train.steps: want an integer, got 1.5 (set by", "float64"},
		{"train.actor_lr=[a, 2]", "train.actor_lr: want a number, got [\"a\", 2] (a list of 2 values)", "interface"},
		{"eval.at_start=3", "eval.at_start: want true or false, got 3 (set by", "int"},
		{"train=5", "config: train: want a mapping, got 5 (set by", "int"},
		{"train.logger={a: 1}", "train.logger: want a list of strings, got {a: 1} (a mapping)", "map["},
		{"train.kl_mode=los", `train.kl_mode: unknown value "los", did you mean "loss"? (known: loss, reward)`, ""},
		{"train.kl_estimator=k4", `unknown value "k4" (known: k1, k2, k3)`, "did you mean"},
	} {
		_, err := LoadConfig(LoadOptions{Env: []string{}, Sets: []string{c.set}})
		if err == nil || !strings.Contains(err.Error(), c.want) || c.not != "" && strings.Contains(err.Error(), c.not) {
			t.Errorf("--set %s: %v\nwant %q", c.set, err, c.want)
		}
	}
}

func TestClosest(t *testing.T) {
	for _, c := range []struct {
		s    string
		cand []string
		want string
	}{
		{"stepz", []string{"seed", "steps"}, "steps"},
		{"stepz", []string{"steps", "step"}, ""}, // as close: no guess
		{"kapa", []string{"alpha", "kappa", "name"}, "kappa"},
		{"acotr_lr", []string{"actor_lr", "critic_lr"}, "actor_lr"},
		{"xyz", []string{"steps"}, ""},
		{"k4", []string{"k1", "k2"}, ""},
	} {
		if got := Closest(c.s, c.cand); got != c.want {
			t.Errorf("Closest(%q, %v) = %q, want %q", c.s, c.cand, got, c.want)
		}
	}
}
