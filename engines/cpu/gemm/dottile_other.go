//go:build !amd64

package gemm

// dotTilePlanFor: off amd64 every path's dot tiles are the pure-Go ones
// (dottile_go.go).
func dotTilePlanFor(string) *dotTilePlan { return nil }
