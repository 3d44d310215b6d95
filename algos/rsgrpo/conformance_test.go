package rsgrpo

import (
	"fmt"
	"testing"

	"github.com/cde-rl/cde/core/algotest"
)

// The conformance kit (core/algotest), with the default beta and a large
// one (exp of large differences, kept from overflowing).
func TestConformance(t *testing.T) {
	for _, params := range []map[string]any{nil, {"beta": 40}} {
		t.Run(fmt.Sprint(params), func(t *testing.T) {
			algotest.Run(t, algotest.Registered("rs_grpo", params), algotest.Options{})
		})
	}
}
