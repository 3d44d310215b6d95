// Package all registers every in-tree exploration strategy (entropy,
// multihead, ppl, simhash): import it for its side effect,
// `import _ "github.com/cde-rl/cde/strategies/all"`.
package all

import (
	_ "github.com/cde-rl/cde/strategies/entropy"
	_ "github.com/cde-rl/cde/strategies/multihead"
	_ "github.com/cde-rl/cde/strategies/ppl"
	_ "github.com/cde-rl/cde/strategies/simhash"
)
