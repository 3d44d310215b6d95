package cpu_test

import (
	"math"
	"testing"

	"github.com/gomlx/compute"
	. "github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
)

// ckptLoss is a 3-block residual MLP's loss and its gradients, with each
// block under GoMLX's gradient checkpointing (recomputed in the backward
// pass, which needs the engine's OptimizationBarrier and
// SchedulingBarrier) or not.
func ckptLoss(ckpt bool) func(x, w1, w2 *Node) []*Node {
	return func(x, w1, w2 *Node) []*Node {
		h := x
		for range 3 {
			if ckpt {
				h = h.Checkpoint()
			}
			a := Tanh(DotGeneral(h, []int{1}, nil, w1, []int{0}, nil))
			h = Add(h, DotGeneral(a, []int{1}, nil, w2, []int{0}, nil))
		}
		if ckpt {
			h = h.StopCheckpoint()
		}
		loss := ReduceAllSum(Mul(h, h))
		return append([]*Node{loss}, Gradient(loss, x, w1, w2)...)
	}
}

// Gradient checkpointing gives the loss and gradients of the plain graph,
// on cde's engine and on GoMLX's go engine.
func TestGradientCheckpointing(t *testing.T) {
	ours, ref := engines(t)
	mk := func(seed float64, d ...int) *tensors.Tensor {
		v := make([]float32, d[0]*d[1])
		for i := range v {
			v[i] = float32(math.Sin(seed + float64(i)*0.37))
		}
		return tensors.FromFlatDataAndDimensions(v, d...)
	}
	for name, b := range map[string]compute.Backend{"cpu": ours, "go": ref} {
		x, w1, w2 := mk(1, 4, 8), mk(2, 8, 16), mk(3, 16, 8)
		plain := MustExecOnceN(b, ckptLoss(false), x, w1, w2)
		ck := MustExecOnceN(b, ckptLoss(true), x, w1, w2)
		for i := range plain {
			a, c := tensors.MustCopyFlatData[float32](plain[i]), tensors.MustCopyFlatData[float32](ck[i])
			for j := range a {
				if math.Abs(float64(a[j]-c[j])) > 1e-5*(1+math.Abs(float64(a[j]))) {
					t.Fatalf("%s: output %d [%d]: plain %v, checkpointed %v", name, i, j, a[j], c[j])
				}
			}
		}
	}
}
