package grpo

import (
	"fmt"
	"testing"

	"github.com/cde-rl/cde/core/algotest"
)

// The conformance kit (core/algotest): groups of one, truncated responses,
// non-finite rewards, lengths, determinism, inputs left alone; with the
// default keys, without the std division, and with eps 0 (a group of equal
// rewards then divides 0 by 0).
func TestConformance(t *testing.T) {
	for _, params := range []map[string]any{nil, {"norm_by_std": false}, {"eps": 0}} {
		t.Run(fmt.Sprint(params), func(t *testing.T) {
			algotest.Run(t, algotest.Registered("grpo", params), algotest.Options{})
		})
	}
}
