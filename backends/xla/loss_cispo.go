package xla

import (
	"github.com/cde-rl/cde/core"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/gomlx/core/graph"
)

// The graph of core.LossCISPO: -sg[clip(rho)] * A * logp at the token
// ratio.
func init() {
	registerGraphLoss(core.LossCISPO, graphLoss{token: func(in lossIn) (pg, clipped *graph.Node) {
		rho := graph.Exp(in.tokLogRatio)
		w := graph.StopGradient(graph.Min(graph.Max(rho, graph.OneMinus(in.clipLow)), graph.OnePlus(in.clipHigh)))
		pg = graph.Neg(graph.Mul(graph.Mul(w, in.adv), graph.Where(in.valid, in.logp, in.zeros)))
		return pg, graph.ConvertDType(graph.NotEqual(w, rho), dtypes.Float32)
	}})
}
