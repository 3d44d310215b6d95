package tasks

import (
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
)

// Rewards beyond +-1e6 (1e308 overflowed advantages to NaN at step 0) are
// refused for both tasks, naming the key.
func TestRewardBounds(t *testing.T) {
	for _, c := range []struct {
		key  string
		v    float64
		want string
	}{
		{"correct_reward", 1e308, "task.correct_reward: must be in [-1e+06, 1e+06], got 1e+308"},
		{"incorrect_reward", -2e6, "task.incorrect_reward: must be in [-1e+06, 1e+06]"},
		{"correct_reward", 1e6, ""},
	} {
		_, err := New(core.NewParams("task", map[string]any{"name": "arith", c.key: c.v}))
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s=%v: got %v, want %q", c.key, c.v, err, c.want)
		}
	}
}
