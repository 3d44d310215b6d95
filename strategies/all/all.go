// Package all registers every in-tree exploration strategy: import it for
// its side effect, `import _ "github.com/cde-rl/cde/strategies/all"`. The
// names are core.Strategies() at run time and the strategies table of
// docs/config.md. A new package under strategies/ adds its import line here;
// internal/repocheck's TestAllImportsEveryExtension fails while one is
// missing, and TestConfigDocumentsEveryExtension while a name has no row in
// docs/config.md.
package all

import (
	_ "github.com/cde-rl/cde/strategies/adaptiveentropy"
	_ "github.com/cde-rl/cde/strategies/clipcov"
	_ "github.com/cde-rl/cde/strategies/elliptical"
	_ "github.com/cde-rl/cde/strategies/entropy"
	_ "github.com/cde-rl/cde/strategies/forking"
	_ "github.com/cde-rl/cde/strategies/klcov"
	_ "github.com/cde-rl/cde/strategies/multihead"
	_ "github.com/cde-rl/cde/strategies/outcomeucb"
	_ "github.com/cde-rl/cde/strategies/ppl"
	_ "github.com/cde-rl/cde/strategies/rarecorrect"
	_ "github.com/cde-rl/cde/strategies/simhash"
)
