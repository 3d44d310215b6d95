package xla

import (
	"fmt"

	"github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
	"github.com/gomlx/gomlx/ml/model"

	"github.com/cde-rl/cde/core"
)

var _ core.EmbeddingRescorer = (*Backend)(nil)

// RescoreWithEmbeddings is ScoreLogProbs plus each sequence's pooled
// last-layer state (pooling "last", "second_last" or "mean", as Generate
// pools: over the states that chose each response token), so strategies
// that read Sequence.Embedding (simhash) work when the responses were
// generated elsewhere (rollout.servers).
func (b *Backend) RescoreWithEmbeddings(seqs []*core.Sequence, temp float64, pooling string) (lps, ents, embs [][]float64, err error) {
	n := b.policy
	bt, err := b.layout(seqs)
	if err != nil {
		return nil, nil, nil, err
	}
	e, err := n.exec(&n.embedScore, func(ctx *model.Scope, in []*graph.Node) []*graph.Node {
		h := fullStates(ctx, n.arch, in[0])
		tlp, ent := scoreHead(ctx, n.arch, h, in[1], in[2])
		return []*graph.Node{tlp, ent, h}
	})
	if err != nil {
		return nil, nil, nil, err
	}
	out, err := run(e, tensors.FromFlatDataAndDimensions(bt.tokens, bt.b, bt.t), tensors.FromFlatDataAndDimensions(bt.targets, bt.b, bt.t), float32(1/temp))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("score: %w", err)
	}
	lp := tensors.MustCopyFlatData[float32](out[0])
	en := tensors.MustCopyFlatData[float32](out[1])
	h := tensors.MustCopyFlatData[float32](out[2])
	for _, t := range out {
		t.FinalizeAll()
	}
	d := n.cfg.DModel
	lps = make([][]float64, len(seqs))
	ents = make([][]float64, len(seqs))
	embs = make([][]float64, len(seqs))
	for i := range seqs {
		var states [][]float32
		for _, p := range bt.at[i] {
			lps[i] = append(lps[i], float64(lp[p]))
			ents[i] = append(ents[i], float64(en[p]))
			states = append(states, h[p*d:(p+1)*d])
		}
		embs[i] = pool(states, pooling)
	}
	return lps, ents, embs, nil
}
