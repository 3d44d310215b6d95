package cpu_test

import (
	"math"
	"testing"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
)

// A 3-"layer" residual MLP, with and without gradient checkpointing.
func ckptLoss(ckpt bool) func(x, w1, w2 *Node) []*Node {
	return func(x, w1, w2 *Node) []*Node {
		h := x
		for range 3 {
			if ckpt {
				h = h.Checkpoint()
			}
			r := h
			a := Tanh(DotGeneral(h, []int{1}, nil, w1, []int{0}, nil))
			h = Add(r, DotGeneral(a, []int{1}, nil, w2, []int{0}, nil))
		}
		if ckpt {
			h = h.StopCheckpoint()
		}
		loss := ReduceAllSum(Mul(h, h))
		return append([]*Node{loss}, Gradient(loss, x, w1, w2)...)
	}
}

func TestZZCheckpoint(t *testing.T) {
	ours, ref := engines(t)
	mk := func(seed float32, d ...int) *tensors.Tensor {
		s := shapes.Make(dtypes.Float32, d...)
		v := make([]float32, s.Size())
		for i := range v {
			v[i] = float32(math.Sin(float64(seed) + float64(i)*0.37))
		}
		return tensors.FromFlatDataAndDimensions(v, d...)
	}
	for name, be := range map[string]any{"cpu": ours, "go": ref} {
		x, w1, w2 := mk(1, 4, 8), mk(2, 8, 16), mk(3, 16, 8)
		_ = name
		b := ours
		if name == "go" {
			b = ref
		}
		_ = be
		plain := MustExecOnceN(b, ckptLoss(false), x, w1, w2)
		ck := MustExecOnceN(b, ckptLoss(true), x, w1, w2)
		for i := range plain {
			a := tensors.MustCopyFlatData[float32](plain[i])
			c := tensors.MustCopyFlatData[float32](ck[i])
			for j := range a {
				if math.Abs(float64(a[j]-c[j])) > 1e-5*(1+math.Abs(float64(a[j]))) {
					t.Fatalf("%s: output %d [%d]: plain %v ckpt %v", name, i, j, a[j], c[j])
				}
			}
		}
		// Count nodes: the checkpointed graph must hold barriers and clones.
		g := NewGraph(b, "count")
		px := Parameter(g, "x", x.Shape())
		p1 := Parameter(g, "w1", w1.Shape())
		p2 := Parameter(g, "w2", w2.Shape())
		outs := ckptLoss(true)(px, p1, p2)
		nOB, nSB := 0, 0
		for _, n := range g.Nodes() {
			switch n.Type() {
			case NodeTypeOptimizationBarrier:
				nOB++
			case NodeTypeSchedulingBarrier:
				nSB++
			}
		}
		t.Logf("%s: %d nodes, %d OptimizationBarrier, %d SchedulingBarrier (outputs %d)", name, len(g.Nodes()), nOB, nSB, len(outs))
	}
}
