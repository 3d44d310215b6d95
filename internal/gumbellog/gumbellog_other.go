//go:build !amd64

package gumbellog

const haveVector = false

func transformVector(dst []float32, u []float64) { panic("gumbellog: no vector path") }
