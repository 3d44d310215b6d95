package session

import (
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/trainer"
	"github.com/rs/zerolog"
)

// minGroup is a strategy that needs groups of at least 8 responses.
type minGroup struct{}

func (minGroup) Name() string { return "test_min_group" }
func (minGroup) Needs() core.Needs {
	return core.Needs{MinGroup: 8, MinGroupKey: "strategies[0].params.k"}
}

func init() {
	core.RegisterStrategy("test_min_group", func(p *core.Params, _ core.Algorithm) (core.Strategy, error) {
		p.Int("k", 8)
		return minGroup{}, nil
	})
}

// A strategy's MinGroup is enforced as the algorithm's is: the run is
// refused when rollout.n is smaller, naming both keys (before, only the
// algorithm's was checked, so a plugin declaring min_group ran anyway).
func TestStrategyMinGroupEnforced(t *testing.T) {
	for _, c := range []struct {
		n    string
		want string
	}{
		{"4", "rollout.n = 4 is less than strategies[0].params.k = 8"},
		{"8", ""},
	} {
		cfg, err := trainer.LoadConfig(trainer.LoadOptions{Env: []string{}, Sets: []string{
			"rollout.n=" + c.n, "strategies=[{name: test_min_group}]"}})
		if err != nil {
			t.Fatal(err)
		}
		err = CheckConfig(cfg, zerolog.Nop())
		switch {
		case c.want == "" && err != nil:
			t.Errorf("rollout.n=%s: %v", c.n, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("rollout.n=%s: got %v, want %q", c.n, err, c.want)
		}
	}
}
