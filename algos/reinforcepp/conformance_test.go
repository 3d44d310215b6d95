package reinforcepp

import (
	"testing"

	"github.com/cde-rl/cde/core/algotest"
)

// The conformance kit (core/algotest): groups of one, truncated responses,
// non-finite rewards, lengths, determinism, inputs left alone.
func TestConformance(t *testing.T) {
	algotest.Run(t, algotest.Registered("reinforce_pp", nil), algotest.Options{})
}
