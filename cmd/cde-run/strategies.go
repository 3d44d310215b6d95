package main

// The in-tree exploration strategies register themselves by name.
import (
	_ "github.com/cde-rl/cde/strategies/entropy"
	_ "github.com/cde-rl/cde/strategies/multihead"
	_ "github.com/cde-rl/cde/strategies/ppl"
	_ "github.com/cde-rl/cde/strategies/simhash"
)
