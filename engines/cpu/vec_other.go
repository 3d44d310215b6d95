//go:build !amd64

package cpu

import "github.com/gomlx/gomlx/backends"

func simdVV(op backends.OpType, d, a, b []float32) int                   { return 0 }
func simdVS(op backends.OpType, d, a []float32, s float32) int           { return 0 }
func simdSV(op backends.OpType, d []float32, s float32, b []float32) int { return 0 }
func simdExp(d, x []float32) int                                         { return 0 }

func simdFold(op backends.OpType, x []float32) (float32, int) { return 0, 0 }
