package xla

import (
	"fmt"
	"os"
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"

	"github.com/cde-rl/cde/engines/cpu"
)

// Engines accepted by backend.engine.
var Engines = []string{"auto", "cpu", "go", "xla:cpu", "xla:cuda", "xla:tpu"}

// xlaAvailable would report whether a PJRT plugin for the given device is
// already installed, without downloading. Nothing sets it yet (the XLA
// build is future work), so the xla:* engines always fail with the error
// below and auto always picks cpu.
var xlaAvailable func(device string) bool

// NewEngine returns the GoMLX backend for backend.engine:
//
//	cpu       cde's own CPU engine (engines/cpu): assembly matmul kernels
//	          (AVX-512 or AVX2+FMA, pure Go elsewhere), parallel elementwise
//	go        GoMLX's pure-Go engine, with sequential op scheduling (its
//	          parallel op mode deadlocks on our train step; matmuls still use
//	          every core inside an op)
//	xla:cpu   the XLA PJRT engine: not built yet (an error in every build)
//	xla:cuda
//	auto      cpu (xla:cpu once the XLA build sets xlaAvailable)
//
// GOMLX_NO_AUTO_INSTALL is always set: GoMLX would otherwise try to download
// a PJRT plugin with no timeout.
func NewEngine(engine, pjrtPlugin string) (backends.Backend, error) {
	_ = pjrtPlugin // read by the XLA build (engine_xla.go)
	os.Setenv("GOMLX_NO_AUTO_INSTALL", "1")
	installFastDotGrad()
	switch engine {
	case "", "auto":
		if xlaAvailable != nil && xlaAvailable("cpu") {
			if b, err := backends.NewWithConfig("xla:cpu"); err == nil {
				return b, nil
			}
		}
		return cpu.New("")
	case "cpu":
		return cpu.New("")
	case "go":
		return newGo()
	case "xla:cpu", "xla:cuda", "xla:tpu":
		if xlaAvailable == nil {
			return nil, fmt.Errorf("backend.engine %q: cde has no XLA build yet (use cpu or go)", engine)
		}
		dev := strings.TrimPrefix(engine, "xla:")
		if !xlaAvailable(dev) {
			return nil, fmt.Errorf("backend.engine %q: no PJRT plugin for %q is installed (cde never downloads one; install it, or use engine go)", engine, dev)
		}
		return backends.NewWithConfig(engine)
	default:
		return nil, fmt.Errorf("config: backend.engine: unknown engine %q (known: %s)", engine, strings.Join(Engines, ", "))
	}
}

func newGo() (backends.Backend, error) {
	return simplego.New("ops_sequential")
}
