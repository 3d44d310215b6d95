// Package plugins runs exploration strategies written outside this
// repository as separate executables, over hashicorp/go-plugin's gRPC
// transport, and makes each look like an in-tree core.Strategy.
//
//   - proto/: the versioned protocol (cde.strategy.v1, protocol versions 1
//     to 3: 2 adds the TokenLoss hook, 3 the shared-memory transport; the
//     host serves all three) and its generated Go code, committed; gen.sh
//     regenerates it (protoc and pinned generators).
//   - Transport (version 3, Linux, internal/wire/shm*.go): the batch's large
//     arrays go through a sealed memfd the plugin maps read-only, per-token
//     answers come back through a second one, and an array is written
//     again only when its content changed since the last call (one batch
//     per step, whatever the number of hooks); the gRPC messages remain the
//     fallback (Config.Transport, the `transport:` key).
//   - Host side: Open starts a plugin (handshake with a magic cookie,
//     protocol-version negotiation, AutoMTLS, start timeout, optional SHA-256
//     pin, logs bridged into zerolog), configures it with the entry's params
//     and returns a core.Strategy whose core.Hooks (it is a
//     core.HookProvider) are exactly the hooks the plugin declared, nil for
//     the others (a strategy that always had every hook would, for
//     instance, reset another strategy's head masks). Every call has a deadline; outputs are
//     checked (lengths, finiteness) before the trainer sees them; a crash, a
//     timeout or an invalid output kills the process and names the plugin in
//     the error. On Linux the plugin runs as the leader of its own process
//     group: Close, a failure and the plugin's own exit kill the whole
//     group (children of a wrapper script included), and the host never
//     waits on output pipes a leftover process holds (runner.go); the
//     plugin process also dies with the host (Pdeathsig), so even kill -9
//     of cde-run leaves no orphan plugin.
//   - Protocol and plugin side: internal/wire holds the handshake, the
//     message conversions and the server that serves a
//     core.StrategyFactory (what sdk.Serve calls; Serve here is the same
//     for callers of this package). A plugin binary imports sdk, which
//     imports wire but not this package, so it links neither the host nor
//     zerolog (sdk's TestPluginBinaryLinksNoHost lists its dependencies).
//     The plugin author writes the same Go code as an in-tree strategy.
//
// See docs/plugins.md for the walk-through and examples/answercount for a
// complete plugin.
package plugins
