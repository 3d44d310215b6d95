package cpu_test

import (
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	. "github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/cde-rl/cde/engines/cpu"
)

func TestSmoke(t *testing.T) {
	ours, _ := cpu.New("")
	ref, _ := simplego.New("ops_sequential")
	for _, be := range []backends.Backend{ours, ref} {
		e := MustNewExec(be, func(x, y *Node) (*Node, *Node) {
			z := Add(MatMul(x, y), OnePlus(x))
			return ReduceAllSum(Softmax(z)), Transpose(Exp(z), 0, 1)
		})
		x := tensors.FromValue([][]float32{{1, 2}, {3, 4}})
		y := tensors.FromValue([][]float32{{0.5, -1}, {2, 0.25}})
		out := e.MustExec(x, y)
		t.Logf("%s: %v %v", be.Name(), out[0].Value(), out[1].Value())
	}
}
