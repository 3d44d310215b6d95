package core

import (
	"fmt"
	"math"
)

// NonFiniteError reports a NaN or infinite quantity that stops a run. A
// backend returns it when an optimiser step would make the model non-finite
// (the step is then not applied); the trainer wraps it with the step.
type NonFiniteError struct {
	Quantity string  // e.g. "actor/loss", "actor/grad_norm", "rollout log-prob"
	Value    float64 // the offending value (NaN when unknown)
	Where    string  // optional detail, e.g. "sequence 3 token 7"
}

func (e *NonFiniteError) Error() string {
	at := ""
	if e.Where != "" {
		at = " at " + e.Where
	}
	return fmt.Sprintf("non-finite %s (%v)%s: stopping before any update or checkpoint is written", e.Quantity, e.Value, at)
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// AllFinite reports whether every x is finite (neither NaN nor ±Inf), in
// one pass without a branch per element: x*0 is ±0 for a finite x and NaN
// otherwise, so the sum of them is 0 exactly when all are finite. The
// checks of hook answers run it over whole rows and look for the offending
// entry only when it fails.
func AllFinite(xs []float64) bool {
	var a0, a1, a2, a3 float64
	i := 0
	for ; i+4 <= len(xs); i += 4 {
		a0 += xs[i] * 0
		a1 += xs[i+1] * 0
		a2 += xs[i+2] * 0
		a3 += xs[i+3] * 0
	}
	for ; i < len(xs); i++ {
		a0 += xs[i] * 0
	}
	return a0+a1+a2+a3 == 0
}
