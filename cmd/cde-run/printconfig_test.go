package main

import (
	"strings"
	"testing"
)

// train --print-config refuses what train refuses, with train's message:
// a key of another algorithm, a misspelt strategy key, an unknown
// algorithm or strategy.
func TestPrintConfigValidates(t *testing.T) {
	for _, c := range []struct {
		set, want string
	}{
		{"algorithm.gamma=0.9", "algorithm.gamma: not a key of grpo"},
		{"strategies=[{name: entropy, kapa: 1}]", "strategies[0].kapa"},
		{"algorithm.name=grpo_mediam", "grpo_mediam"},
		{"strategies=[{name: entropi}]", "entropi"},
	} {
		out, err := cdeRunEnv(nil, "train", "--print-config", "--set", "model.checkpoint=\"\"", "--set", c.set)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("--set %s: %v, want an error with %q\n%s", c.set, err, c.want, out)
		}
	}
}
