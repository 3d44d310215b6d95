package plugins

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/core/strategytest"
)

// Usage is the help text of `cde-run plugins`, its check and new
// subcommands (the flags follow it).
const Usage = `usage: cde-run plugins check PATH [flags]
       cde-run plugins new --lang python|go|node [--name NAME] [--python INTERPRETER] DIR

new writes a working plugin skeleton into DIR (new or empty): a placeholder
reward bonus and a metric, with its unit test, which plugins check passes as
written. Python: NAME.py (executable; its shebang names --python, default
the first python3 with grpc, google.protobuf and numpy), test_NAME.py and a
copy of the SDK (cde_plugin/). Go: main.go and main_test.go, for a module
that requires github.com/cde-rl/cde. Node: plugin.js, strategy.js,
strategy.test.js, package.json (npm install) and cde_strategy.proto.
docs/plugins.md walks through each.

check starts the plugin at PATH, prints its hooks, needs, the protocol version
and transport it speaks and the signals cde-run sends it (only those its needs
declare), runs the strategy conformance kit against it (core/strategytest:
Needs, Hooks, Undeclared, Determinism, State; every instance is a fresh plugin
process) and prints a verdict. Exit status 0 when
the plugin conforms, 1 when a check fails, 2 on usage errors.

Flags:
`

// Check runs the strategy conformance kit (core/strategytest) against the
// plugin cfg names, every instance a fresh plugin process, and writes one
// line per check and a verdict to w. It reports whether the plugin
// conforms. One instance is started first, so a plugin that does not start
// gets that error rather than a failure of every check.
func Check(w io.Writer, cfg Config, opts strategytest.Options) bool {
	first, err := Open(cfg)
	if err != nil {
		fmt.Fprintf(w, "FAIL %s: %v\n", cfg.Path, err)
		return false
	}
	pl, _ := Of(first)
	needs := first.Needs()
	fmt.Fprintf(w, "plugin %s (%s): hooks %s, needs %+v\n", first.Name(), cfg.Path, pl.Hooks(), needs)
	fmt.Fprintf(w, "  protocol version %d, transport %s, sdk %q\n", pl.Version(), pl.Transport(), pl.sdk)
	sent, withheld := SignalsSent(needs)
	fmt.Fprintf(w, "  signals sent: %s; withheld, as not declared: %s\n", list(sent), list(withheld))
	core.CloseAll([]core.Strategy{first})
	newStrategy := func() core.Strategy {
		s, err := Open(cfg)
		if err != nil {
			panic(err)
		}
		return s
	}
	failed := 0
	for _, c := range strategytest.Checks() {
		start := time.Now()
		if err := c.Func(newStrategy, opts); err != nil {
			failed++
			// The kit's rollouts carry every signal, but the host sends
			// a plugin only those it declared: say which.
			msg := strings.ReplaceAll(err.Error(), "(all signals present)",
				fmt.Sprintf("(rollouts with every signal; sent to the plugin: %s; withheld, as not declared: %s)", list(sent), list(withheld)))
			fmt.Fprintf(w, "  FAIL %-12s %s\n", c.Name, strings.ReplaceAll(msg, "\n", "\n       "))
			continue
		}
		fmt.Fprintf(w, "  ok   %-12s %s\n", c.Name, time.Since(start).Round(time.Millisecond))
	}
	if failed > 0 {
		fmt.Fprintf(w, "FAIL: %s fails %d of %d conformance checks\n", cfg.Path, failed, len(strategytest.Checks()))
		return false
	}
	fmt.Fprintf(w, "PASS: %s conforms to the strategy contract (%d checks)\n", cfg.Path, len(strategytest.Checks()))
	return true
}

// SignalsSent lists the optional rollout signals the host sends a plugin
// with these needs (log-probs and the verdicts always; entropies, values
// and the embedding when declared) and those it withholds because they
// are not declared. (The kit also checks that a plugin that does not
// declare correct gives the same outputs when every verdict is negated.)
func SignalsSent(n core.Needs) (sent, withheld []string) {
	for _, s := range []struct {
		name string
		ok   bool
	}{
		{"logprobs", true},
		{"entropies", n.Entropies},
		{"values", n.ValueHeads > 0},
		{"embedding", n.Pooling != ""},
		{"correct", true},
	} {
		if s.ok {
			sent = append(sent, s.name)
		} else {
			withheld = append(withheld, s.name)
		}
	}
	return sent, withheld
}

func list(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
