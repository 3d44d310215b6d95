// Package all registers every in-tree exploration strategy (adaptive_entropy,
// clip_cov, elliptical, entropy, forking_tokens, kl_cov, multihead, outcome_ucb, ppl, rare_correct, simhash):
// import it for its side effect,
// `import _ "github.com/cde-rl/cde/strategies/all"`.
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
