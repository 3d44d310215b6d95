package xla

import (
	"fmt"
	"os"
	"strings"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/gobackend"

	"github.com/cde-rl/cde/engines/cpu"
)

// Engines accepted by backend.engine.
var Engines = []string{"auto", "cpu", "go", "xla:cpu", "xla:cuda", "xla:tpu"}

// openXLA opens GoMLX's XLA engine on device ("cpu", "cuda" or "tpu") with
// the PJRT plugin that findPJRTPlugin picks from backend.pjrt_plugin. Only
// the build with the tag xla sets it (engine_xla.go): GoMLX's XLA backend
// needs cgo, and the default build stays pure Go.
var openXLA func(device, pjrtPlugin string) (compute.Backend, error)

// IsCPUEngine reports whether backend.engine names cde's own cpu engine
// ("cpu", "auto" or "").
func IsCPUEngine(engine string) bool { return engine == "" || engine == "auto" || engine == "cpu" }

// NewEngine returns the GoMLX backend for backend.engine:
//
//	cpu       cde's own CPU engine (engines/cpu): assembly matmul kernels
//	          (AVX-512 or AVX2+FMA, pure Go elsewhere), parallel elementwise
//	go        GoMLX's pure-Go engine, with sequential op scheduling (its
//	          parallel op mode deadlocks on our train step; matmuls still use
//	          every core inside an op)
//	xla:cpu   GoMLX's XLA engine through a PJRT plugin, in a build with
//	xla:cuda  -tags xla (an error naming the tag in the default build);
//	xla:tpu   pjrtPlugin is backend.pjrt_plugin (see findPJRTPlugin)
//	auto      cpu, in every build
//
// auto never picks XLA, even where a plugin is installed: cde's cpu engine is
// the one its reproducibility claims are tested on (bit-identical reruns,
// kill-and-resume), and whether XLA's CPU plugin is faster on cde's graphs
// has not been measured; a run's numerics should not change with what
// happens to be installed on the machine. XLA is chosen by name.
//
// GOMLX_NO_AUTO_INSTALL is always set (and the XLA build also switches
// GoMLX's auto-install off and only ever passes it an absolute plugin path):
// GoMLX would otherwise try to download a PJRT plugin, with no timeout.
func NewEngine(engine, pjrtPlugin string) (compute.Backend, error) {
	os.Setenv("GOMLX_NO_AUTO_INSTALL", "1")
	installFastDotGrad()
	switch {
	case IsCPUEngine(engine):
		return cpu.New("")
	case engine == "go":
		return newGo()
	case engine == "xla:cpu" || engine == "xla:cuda" || engine == "xla:tpu":
		if openXLA == nil {
			return nil, fmt.Errorf("backend.engine %q: this cde-run was built without XLA; rebuild with `go build -tags xla ./cmd/cde-run` (needs cgo and a C compiler), or use engine cpu or go", engine)
		}
		b, err := openXLA(strings.TrimPrefix(engine, "xla:"), pjrtPlugin)
		if err != nil {
			return nil, fmt.Errorf("backend.engine %q: %w", engine, err)
		}
		return b, nil
	default:
		return nil, fmt.Errorf("config: backend.engine: unknown engine %q (known: %s)", engine, strings.Join(Engines, ", "))
	}
}

func newGo() (compute.Backend, error) {
	return gobackend.New("ops_sequential")
}
