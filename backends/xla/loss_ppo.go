package xla

import (
	"github.com/cde-rl/cde/core"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/gomlx/core/graph"
)

// The graph of core.LossPPO: pg = max(-A rho, -A clip(rho, 1-cl, 1+ch));
// dual clip: when A < 0 and c > 1, min(pg, -A c). rho is at the configured
// level (token or GSPO's sequence ratio).
func init() {
	registerGraphLoss(core.LossPPO, graphLoss{token: func(in lossIn) (pg, clipped *graph.Node) {
		ratio := graph.Exp(in.logRatio)
		lo, hi := graph.OneMinus(in.clipLow), graph.OnePlus(in.clipHigh)
		loss1 := graph.Neg(graph.Mul(in.adv, ratio))
		loss2 := graph.Neg(graph.Mul(in.adv, graph.Min(graph.Max(ratio, lo), hi)))
		pg = graph.Max(loss1, loss2)
		clipped = graph.ConvertDType(graph.GreaterThan(loss2, loss1), dtypes.Float32)
		b, t := in.adv.Shape().Dimensions[0], in.adv.Shape().Dimensions[1]
		c := in.clipRatioC
		capOn := graph.LogicalAnd(graph.LessThan(in.adv, in.zeros), graph.GreaterThan(graph.BroadcastToDims(c, b, t), graph.OnesLike(in.zeros)))
		return graph.Where(capOn, graph.Min(pg, graph.Neg(graph.Mul(in.adv, c))), pg), clipped
	}})
}
