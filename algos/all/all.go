// Package all registers every in-tree algorithm (advantage estimator):
// import it for its side effect, `import _ "github.com/cde-rl/cde/algos/all"`.
// The names are core.Algorithms() at run time and the algorithm table of
// docs/config.md. A new package under algos/ adds its import line here;
// internal/repocheck's TestAllImportsEveryExtension fails while one is
// missing, and TestConfigDocumentsEveryExtension while a name or a key has
// no row in docs/config.md.
package all

import (
	_ "github.com/cde-rl/cde/algos/drgrpo"
	_ "github.com/cde-rl/cde/algos/grpo"
	_ "github.com/cde-rl/cde/algos/grpopassk"
	_ "github.com/cde-rl/cde/algos/maxrl"
	_ "github.com/cde-rl/cde/algos/ppo"
	_ "github.com/cde-rl/cde/algos/reinforcepp"
	_ "github.com/cde-rl/cde/algos/reinforceppbaseline"
	_ "github.com/cde-rl/cde/algos/rloo"
	_ "github.com/cde-rl/cde/algos/rsgrpo"
)
