// Package testwait scales the wall-clock limits of tests (a plugin's start,
// a call's deadline) to how busy the machine is, so a suite that passes on
// a quiet machine passes on a loaded one too: a limit d becomes d times
// the 1-minute load average per core when that exceeds 1 (at most 10),
// times CDE_TEST_TIME_SCALE when set (a slow runner can ask for more).
// Limits that a test checks on purpose (a timeout it expects to fire)
// must not be scaled.
package testwait

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// EnvScale names the variable that multiplies every scaled limit.
const EnvScale = "CDE_TEST_TIME_SCALE"

var factor = sync.OnceValue(func() float64 {
	return Factor(loadAvg(), runtime.NumCPU(), os.Getenv(EnvScale))
})

// Scale returns d scaled to the machine's load (see the package doc); the
// load is read once per process.
func Scale(d time.Duration) time.Duration {
	return time.Duration(float64(d) * factor())
}

// Factor is the scale for a 1-minute load average load on cpus cores and
// the value env of EnvScale ("" or unparsable: 1).
func Factor(load float64, cpus int, env string) float64 {
	f := 1.0
	if cpus > 0 && load/float64(cpus) > 1 {
		f = min(load/float64(cpus), 10)
	}
	if v, err := strconv.ParseFloat(strings.TrimSpace(env), 64); err == nil && v > 0 {
		f *= v
	}
	return f
}

// loadAvg is /proc/loadavg's 1-minute figure, 0 where it cannot be read.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
