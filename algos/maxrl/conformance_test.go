package maxrl

import (
	"fmt"
	"testing"

	"github.com/cde-rl/cde/core/algotest"
)

// The conformance kit (core/algotest), with the default rewards -1/+1
// and with a task rewarding 0/1 (UseRewardLevels gets the levels).
func TestConformance(t *testing.T) {
	for _, opts := range []algotest.Options{{}, {IncorrectReward: 0, CorrectReward: 1}} {
		t.Run(fmt.Sprintf("rewards %v,%v", opts.IncorrectReward, opts.CorrectReward), func(t *testing.T) {
			algotest.Run(t, algotest.Registered("maxrl", nil), opts)
		})
	}
}
