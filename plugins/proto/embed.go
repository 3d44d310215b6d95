package strategypb

import _ "embed"

// Proto is cde_strategy.proto, the protocol's source, for plugins in other
// languages (`cde-run plugins new --lang node` writes it beside the plugin).
//
//go:embed cde_strategy.proto
var Proto []byte
