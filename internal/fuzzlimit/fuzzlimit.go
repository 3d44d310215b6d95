// Package fuzzlimit bounds the time Go's fuzzer spends minimising each new
// interesting input of a fuzz target whose executions are costly.
//
// The fuzzer minimises every input that adds coverage before it counts it,
// by removing bytes and chunks one at a time: a quadratic number of
// executions in the input's length, for up to -test.fuzzminimizetime (60 s
// by default). Meanwhile the worker's executions are not counted, so a
// target whose inputs are a few hundred bytes (a rollout file, a parquet
// file) and whose executions take most of a millisecond under the fuzzer's
// instrumentation shows 0 executions per second for minutes, and the
// minimisation can end in "context deadline exceeded". Bounding the
// minimisation keeps the target fuzzing; the inputs it keeps are less
// minimised, which costs nothing but a larger corpus entry.
package fuzzlimit

import "flag"

// MinimizeTime sets -test.fuzzminimizetime to d (a duration or a count,
// such as "2s" or "200x") unless the command line set it. Call it in the
// fuzz target before f.Fuzz.
func MinimizeTime(d string) {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.fuzzminimizetime" })
	if !set && flag.Lookup("test.fuzzminimizetime") != nil {
		flag.Set("test.fuzzminimizetime", d)
	}
}
