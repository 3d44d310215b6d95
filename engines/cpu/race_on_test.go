//go:build race

package cpu_test

// raceOn: the race detector's instrumentation allocates, so allocation
// counts are not checked under it.
const raceOn = true
