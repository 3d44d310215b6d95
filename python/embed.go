// Package python embeds the Python plugin SDK (cde_plugin), so that
// `cde-run plugins new --lang python` can vendor it beside a new plugin.
// The SDK itself is plain Python: see python/cde_plugin and docs/plugins.md.
package python

import "embed"

// SDK holds cde_plugin/*.py.
//
//go:embed cde_plugin/*.py
var SDK embed.FS
