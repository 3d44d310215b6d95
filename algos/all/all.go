// Package all registers every in-tree algorithm (grpo, ppo): import it for
// its side effect, `import _ "github.com/cde-rl/cde/algos/all"`.
package all

import (
	_ "github.com/cde-rl/cde/algos/grpo"
	_ "github.com/cde-rl/cde/algos/ppo"
)
