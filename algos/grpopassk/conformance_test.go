package grpopassk

import (
	"fmt"
	"testing"

	"github.com/cde-rl/cde/core/algotest"
)

// The conformance kit (core/algotest): with the default k = 4 (Needs asks
// for groups of 4, so a group of one may be refused, and is), and with
// k = 1, where a group of one gets 0 and must not be refused.
func TestConformance(t *testing.T) {
	for _, params := range []map[string]any{nil, {"k": 1}, {"k": 2}} {
		t.Run(fmt.Sprint(params), func(t *testing.T) {
			algotest.Run(t, algotest.Registered("grpo_passk", params), algotest.Options{})
		})
	}
}
