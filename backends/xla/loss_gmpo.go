package xla

import (
	"github.com/cde-rl/cde/core"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/gomlx/core/graph"
)

// The graph of core.LossGMPO: per row, -mean(A) * exp(mean(s)) with s the
// token log-ratio clipped to [-clip_low, clip_high] on the pessimistic
// side of sign(A); the mean over rows with a token.
func init() {
	registerGraphLoss(core.LossGMPO, graphLoss{sequence: func(in lossIn) (loss, clipped *graph.Node) {
		adv, zeros, mask := in.adv, in.zeros, in.mask
		sgn := graph.Where(graph.GreaterThan(adv, zeros), graph.OnesLike(adv),
			graph.Where(graph.LessThan(adv, zeros), graph.Neg(graph.OnesLike(adv)), zeros))
		dClip := graph.Min(graph.Max(in.tokLogRatio, graph.Neg(in.clipLow)), in.clipHigh)
		s := graph.Mul(sgn, graph.Min(graph.Mul(sgn, in.tokLogRatio), graph.Mul(sgn, dClip)))
		sMean := graph.Div(graph.ReduceSum(graph.Mul(s, mask), 1), in.lensSafe)     // [B]
		advMean := graph.Div(graph.ReduceSum(graph.Mul(adv, mask), 1), in.lensSafe) // [B]
		rowValid := graph.ConvertDType(graph.GreaterThan(in.lens, graph.ZerosLike(in.lens)), dtypes.Float32)
		loss = graph.Div(graph.ReduceAllSum(graph.Mul(graph.Neg(graph.Mul(advMean, graph.Exp(sMean))), rowValid)), in.bRows)
		return loss, graph.ConvertDType(graph.LessThan(graph.Mul(sgn, dClip), graph.Mul(sgn, in.tokLogRatio)), dtypes.Float32)
	}})
}
