package all

import (
	"testing"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/core/algotest"
)

// Every registered algorithm, with its default keys, keeps the contract
// the trainer relies on (core/algotest: groups of one, truncated
// responses, non-finite rewards, lengths, determinism, inputs left alone).
// A name registered later is covered by its import line in all.go alone.
func TestEveryAlgorithmConforms(t *testing.T) {
	for _, name := range core.Algorithms() {
		t.Run(name, func(t *testing.T) {
			algotest.Run(t, algotest.Registered(name, nil), algotest.Options{})
		})
	}
}
