//go:build !race

package cpu_test

const raceOn = false
