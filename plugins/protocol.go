package plugins

import (
	"github.com/hashicorp/go-hclog"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/plugins/internal/wire"
)

// The protocol and the plugin-side server live in plugins/internal/wire,
// which plugins/sdk imports without this package: a plugin binary links
// neither the host nor its logging. These names keep the host package's
// public API as it was.

// ProtocolVersion is the version of plugins/proto/cde_strategy.proto this
// build speaks (see wire.ProtocolVersion).
const ProtocolVersion = wire.ProtocolVersion

// MinProtocolVersion is the oldest protocol version the host still serves.
const MinProtocolVersion = wire.MinProtocolVersion

// PluginName is the name under which the strategy service is dispensed.
const PluginName = wire.PluginName

// Handshake is the go-plugin handshake host and plugin share.
var Handshake = wire.Handshake

// MaxMessageSize is the gRPC message limit, both directions.
const MaxMessageSize = wire.MaxMessageSize

// SDKName identifies the Go SDK in Description.sdk.
const SDKName = wire.SDKName

// MessageBytes bounds the size of a Batch message (see wire.MessageBytes).
func MessageBytes(n, t, k, d int) int64 { return wire.MessageBytes(n, t, k, d) }

// GRPCPlugin is the go-plugin glue for the strategy service.
type GRPCPlugin = wire.GRPCPlugin

// ServeOptions tune Serve; the zero value is what plugin authors want.
type ServeOptions = wire.ServeOptions

// Serve serves the strategies f builds and returns when the host closes
// the plugin. Plugin authors call sdk.Serve, which does not link the host.
func Serve(f core.StrategyFactory, opts ServeOptions) { wire.Serve(f, opts) }

// NewPluginLogger returns the plugin side's hclog logger (JSON lines on
// stderr, which the host forwards into its log).
func NewPluginLogger(name string) hclog.Logger { return wire.NewPluginLogger(name) }

// capabilities is the bit set of a plugin's optional hooks.
type capabilities = wire.Caps
