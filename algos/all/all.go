// Package all registers every in-tree algorithm (grpo, ppo, rloo,
// reinforce_pp, reinforce_pp_baseline, dr_grpo, grpo_passk, maxrl, rs_grpo): import it for
// its side effect, `import _ "github.com/cde-rl/cde/algos/all"`.
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
