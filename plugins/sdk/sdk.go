// Package sdk is what a plugin author imports to ship an exploration
// strategy as its own executable.
//
// Write the strategy exactly as an in-tree one (see strategies/ppl): a type
// implementing core.Strategy (Name, Needs) plus any of the optional hooks
// core.RewardHook, core.AdvantageHook, core.LossHook, core.HeadMasker,
// core.Observer and core.Stateful, and a factory of the in-tree factory's
// type, core.StrategyFactory:
//
//	func New(p *core.Params, algo core.Algorithm) (core.Strategy, error)
//
// The factory reads the config entry's `params:` mapping with p (strictly:
// an unknown key or a wrong type is an error naming strategies[i].params.KEY,
// reported by cde-run before training starts). algo carries the configured
// algorithm's Name and NeedsCritic; its Advantages and Finalize are not
// available in a plugin. Then main is one line:
//
//	func main() { sdk.Serve(New) }
//
// The host calls exactly the hooks the returned strategy implements, with
// the signals it declared in Needs (log-probs are always sent; entropies,
// value-head values and embeddings only when declared; HeadMask never).
// Hooks are called one at a time. A hook's error stops the run with the
// plugin's name and the hook in the message; a panic is recovered and
// reported the same way.
//
// Logging: Logger() returns an hclog logger whose lines appear in cde-run's
// log tagged with the plugin's name. Anything printed to stdout or stderr
// after Serve starts is forwarded too. Print nothing on stdout before
// Serve: the first stdout line must be go-plugin's handshake, and cde-run
// refuses to start a plugin that printed something else first (use stderr
// or Logger() instead).
package sdk

import (
	"github.com/hashicorp/go-hclog"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/plugins/internal/wire"
)

// ProtocolVersion is the strategy protocol version this SDK speaks.
const ProtocolVersion = wire.ProtocolVersion

// Factory builds the strategy from its params; it has the type of the
// in-tree strategies' factories, so an in-tree strategy's New can be served
// as is.
type Factory = core.StrategyFactory

// Serve serves the strategy f builds to the cde-run that started this
// process, and returns when cde-run closes the plugin. Run by hand, the
// binary prints that it is a plugin and exits with status 1.
func Serve(f Factory) {
	wire.Serve(f, wire.ServeOptions{Logger: logger})
}

var logger = wire.NewPluginLogger("")

// Logger returns the plugin's logger (JSON lines on the original stderr,
// forwarded by cde-run into its log).
func Logger() hclog.Logger { return logger }
