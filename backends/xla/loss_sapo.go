package xla

import (
	"github.com/cde-rl/cde/core"
	"github.com/gomlx/gomlx/core/graph"
)

// The graph of core.LossSAPO: -(4/tau) * sigmoid(tau * (rho - 1)) * A at
// the token ratio, tau = tau_pos where A > 0, else tau_neg (the loss's
// keys, from hyper); nothing is clipped.
func init() {
	registerGraphLoss(core.LossSAPO, graphLoss{token: func(in lossIn) (pg, clipped *graph.Node) {
		b, t := in.adv.Shape().Dimensions[0], in.adv.Shape().Dimensions[1]
		rho := graph.Exp(in.tokLogRatio)
		tau := graph.Where(graph.GreaterThan(in.adv, in.zeros),
			graph.BroadcastToDims(in.param("tau_pos"), b, t), graph.BroadcastToDims(in.param("tau_neg"), b, t))
		gate := graph.Div(graph.Sigmoid(graph.Mul(tau, graph.AddScalar(rho, -1))), tau)
		pg = graph.Neg(graph.MulScalar(graph.Mul(gate, in.adv), 4))
		return pg, graph.ZerosLike(pg)
	}})
}
