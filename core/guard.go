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
