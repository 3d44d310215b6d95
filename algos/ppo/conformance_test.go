package ppo

import (
	"testing"

	"github.com/cde-rl/cde/core/algotest"
)

// The conformance kit (core/algotest), on a critic of 2 heads with the
// default keys, and of 1 head with discounting and no whitening.
func TestConformance(t *testing.T) {
	algotest.Run(t, algotest.Registered("ppo", nil), algotest.Options{})
	t.Run("discounted", func(t *testing.T) {
		params := map[string]any{"gamma": 0.9, "lambda": 0.95, "whiten": false}
		algotest.Run(t, algotest.Registered("ppo", params), algotest.Options{ValueHeads: 1})
	})
}
