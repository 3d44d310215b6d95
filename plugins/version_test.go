package plugins_test

import (
	"reflect"
	"testing"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/core/strategytest"
	"github.com/cde-rl/cde/plugins"
)

// A plugin process offering protocol version 2 (as every plugin built
// before version 3 does) serves the token-loss hook over the messages: the
// host negotiates 2, the strategy is a TokenLossHook, the conformance kit
// passes, and its answers equal the in-tree strategy's.
func TestTokenLossOverVersion2(t *testing.T) {
	t.Setenv("CDE_TESTPLUGIN_VERSION", "2")
	params := map[string]any{"strategy": "forking_tokens", "params": map[string]any{"rho": 0.3}}
	s, p := mustOpen(t, params, nil)
	if p.Version() != 2 || p.Hooks() != "token_loss" || core.HooksOf(s).TokenLoss == nil || p.Transport() != "messages" {
		t.Fatalf("version %d hooks %q token-loss hook %v transport %s; want 2, token_loss, true, messages",
			p.Version(), p.Hooks(), core.HooksOf(s).TokenLoss != nil, p.Transport())
	}
	local := newInTree(t, "forking_tokens", map[string]any{"rho": 0.3}, nil)
	info, r := randomRollout(21)
	a, err := core.HooksOf(local).TokenLoss(info, strategytest.Clone(r))
	if err != nil {
		t.Fatal(err)
	}
	b, err := core.HooksOf(s).TokenLoss(info, strategytest.Clone(r))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("in-tree %+v\nplugin %+v", a, b)
	}
	strategytest.Run(t, func() core.Strategy {
		s, _ := mustOpen(t, map[string]any{"strategy": "adaptive_entropy", "params": map[string]any{"target": 1}}, nil)
		return s
	}, strategytest.Options{Steps: 3})
}

// An old plugin, offering only protocol version 1 (as every plugin built
// before version 2 does), is still served: the host negotiates 1 and calls
// the version-1 hooks. A strategy with a token-loss hook served at version
// 1 cannot declare it, so the host's strategy has no TokenLossHook (and
// the trainer never calls it).
func TestVersion1PluginStillServed(t *testing.T) {
	t.Setenv("CDE_TESTPLUGIN_VERSION", "1")
	s, p := mustOpen(t, map[string]any{"strategy": "ppl"}, nil)
	if p.Version() != 1 || p.Hooks() != "reward_bonus,observe" {
		t.Fatalf("version %d hooks %q; want 1 and reward_bonus,observe", p.Version(), p.Hooks())
	}
	strategytest.Run(t, func() core.Strategy {
		s, _ := mustOpen(t, map[string]any{"strategy": "ppl"}, nil)
		return s
	}, strategytest.Options{})
	info, r := randomRollout(5)
	if _, err := core.HooksOf(s).RewardBonus(info, r); err != nil {
		t.Fatal(err)
	}
	s, p = mustOpen(t, map[string]any{"strategy": "forking_tokens"}, nil)
	if p.Version() != 1 || p.Hooks() != "none" || core.HooksOf(s).TokenLoss != nil {
		t.Fatalf("forking_tokens at version 1: version %d hooks %q token-loss hook %v", p.Version(), p.Hooks(), core.HooksOf(s).TokenLoss != nil)
	}
}

// A plugin of this build started by a host that offers only versions 1
// and 2 (a host from before the shared-memory transport) serves version 2
// over the messages.
func TestNewPluginOldHost(t *testing.T) {
	plugins.SetHostMaxVersion(t, 2)
	s, p := mustOpen(t, map[string]any{"strategy": "forking_tokens"}, nil)
	if p.Version() != 2 || p.Transport() != "messages" || core.HooksOf(s).TokenLoss == nil {
		t.Fatalf("version %d transport %s; want 2 over the messages", p.Version(), p.Transport())
	}
	strategytest.Run(t, func() core.Strategy {
		s, _ := mustOpen(t, map[string]any{"strategy": "forking_tokens"}, nil)
		return s
	}, strategytest.Options{Steps: 2})
}

func TestProtocolVersions(t *testing.T) {
	if plugins.ProtocolVersion != 3 || plugins.MinProtocolVersion != 1 {
		t.Fatalf("versions %d..%d", plugins.MinProtocolVersion, plugins.ProtocolVersion)
	}
}
