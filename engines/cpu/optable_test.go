package cpu

import (
	"slices"
	"testing"

	"github.com/gomlx/compute"
)

// The table is consistent: elementwise entries have a shape rule, kernels
// only for dtypes buffers support, and a test domain for the kernel's
// operand; other entries no shape rule; Capabilities lists exactly the
// table's ops.
func TestOpTable(t *testing.T) {
	for op, def := range opTable {
		if def.kernels == nil {
			if def.shape != nil || def.test != nil {
				t.Errorf("%s: shape rule or test domains without kernels", op)
			}
			continue
		}
		if def.shape == nil || def.exec != nil || len(def.kernels) == 0 {
			t.Errorf("%s: an elementwise op needs a shape rule and kernels, and no exec", op)
		}
		if def.kernelInput >= len(def.test) {
			t.Errorf("%s: %d test domains, kernels chosen by operand %d", op, len(def.test), def.kernelInput)
		}
		for dt, k := range def.kernels {
			if k == nil || !slices.Contains(supportedDTypes, dt) {
				t.Errorf("%s: kernel for dtype %s (nil or unsupported dtype)", op, dt)
			}
		}
	}
	be, err := New("")
	if err != nil {
		t.Fatal(err)
	}
	listed := be.Capabilities().Operations
	for op := range compute.OpTypeLast {
		if _, ok := opTable[op]; ok != listed[op] {
			t.Errorf("%s: in table %v, in Capabilities %v", op, ok, listed[op])
		}
	}
}
