package xla

import (
	"fmt"

	"github.com/cde-rl/cde/core"
	"github.com/gomlx/gomlx/core/tensors"
)

// batch is a padded [B, T] layout of (prompt ++ response) sequences. The
// prediction for response token t of row i sits at position P_i - 1 + t.
type batch struct {
	b, t    int
	tokens  []int32
	targets []int32
	mask    []float32
	// at[i][t] is the flat index of response token t of row i.
	at [][]int
}

func (be *Backend) layout(seqs []*core.Sequence) (*batch, error) {
	maxL := 0
	for _, s := range seqs {
		maxL = max(maxL, len(s.Prompt)+len(s.Response))
	}
	T := min(roundUp(maxL, 8), be.policy.cfg.MaxLen)
	if maxL > T {
		return nil, fmt.Errorf("sequence of %d tokens exceeds the model's max length %d", maxL, be.policy.cfg.MaxLen)
	}
	B := len(seqs)
	bt := &batch{b: B, t: T, tokens: make([]int32, B*T), targets: make([]int32, B*T), mask: make([]float32, B*T), at: make([][]int, B)}
	for i, s := range seqs {
		row := bt.tokens[i*T : (i+1)*T]
		for j := range row {
			row[j] = be.opts.PAD
		}
		copy(row, s.Prompt)
		copy(row[len(s.Prompt):], s.Response)
		bt.at[i] = make([]int, len(s.Response))
		for t, tok := range s.Response {
			p := i*T + len(s.Prompt) - 1 + t
			bt.targets[p] = tok
			bt.mask[p] = 1
			bt.at[i][t] = p
		}
	}
	return bt, nil
}

func ptrs(r *core.Rollout) []*core.Sequence {
	out := make([]*core.Sequence, len(r.Seqs))
	for i := range r.Seqs {
		out[i] = &r.Seqs[i]
	}
	return out
}

// ScoreValues fills Values with the critic's K head values.
func (b *Backend) ScoreValues(r *core.Rollout) error {
	if b.critic == nil {
		return fmt.Errorf("score values: no critic (the algorithm or strategies must ask for value heads)")
	}
	seqs := ptrs(r)
	bt, err := b.layout(seqs)
	if err != nil {
		return err
	}
	e, err := b.critic.exec(&b.critic.score, b.critic.buildScore())
	if err != nil {
		return err
	}
	out, err := run(e, tensors.FromFlatDataAndDimensions(bt.tokens, bt.b, bt.t), tensors.FromFlatDataAndDimensions(bt.targets, bt.b, bt.t), float32(1))
	if err != nil {
		return fmt.Errorf("score values: %w", err)
	}
	vals := tensors.MustCopyFlatData[float32](out[0])
	out[0].FinalizeAll()
	K := b.critic.cfg.ValueK
	// One column of T x K values for the batch (core/columns.go); a batch
	// scored in parts is packed into one afterwards (the trainer).
	r.NewColumn(K, func(s *core.Sequence) *[]float64 { return &s.Values })
	for i, s := range seqs {
		for t, p := range bt.at[i] {
			for k := range K {
				s.Values[t*K+k] = float64(vals[p*K+k])
			}
		}
	}
	return nil
}

// ScoreLogProbs returns each sequence's per-token log-probs and entropies
// under the current policy at temperature temp.
func (b *Backend) ScoreLogProbs(seqs []*core.Sequence, temp float64) (lps, ents [][]float64, err error) {
	return scoreLP(b.policy, b, seqs, temp)
}

func scoreLP(n *net, be *Backend, seqs []*core.Sequence, temp float64) (lps, ents [][]float64, err error) {
	bt, err := be.layout(seqs)
	if err != nil {
		return nil, nil, err
	}
	e, err := n.exec(&n.score, n.buildScore())
	if err != nil {
		return nil, nil, err
	}
	out, err := run(e, tensors.FromFlatDataAndDimensions(bt.tokens, bt.b, bt.t), tensors.FromFlatDataAndDimensions(bt.targets, bt.b, bt.t), float32(1/temp))
	if err != nil {
		return nil, nil, fmt.Errorf("score: %w", err)
	}
	lp := tensors.MustCopyFlatData[float32](out[0])
	en := tensors.MustCopyFlatData[float32](out[1])
	for _, t := range out {
		t.FinalizeAll()
	}
	// Each answer is one block with a window per sequence.
	total := 0
	for i := range seqs {
		total += len(bt.at[i])
	}
	lpBlock, entBlock := make([]float64, total), make([]float64, total)
	lps, ents = make([][]float64, len(seqs)), make([][]float64, len(seqs))
	off := 0
	for i := range seqs {
		end := off + len(bt.at[i])
		lps[i], ents[i] = lpBlock[off:end:end], entBlock[off:end:end]
		for t, p := range bt.at[i] {
			lps[i][t], ents[i][t] = float64(lp[p]), float64(en[p])
		}
		off = end
	}
	return lps, ents, nil
}

// MaxPromptTokens is the longest prompt Generate accepts with
// maxResponseTokens after it (prompts are padded to a multiple of 4).
func (b *Backend) MaxPromptTokens(maxResponseTokens int) int {
	return (b.policy.cfg.MaxLen - maxResponseTokens) / 4 * 4
}

// MaxSequenceTokens is the longest prompt + response the model scores.
func (b *Backend) MaxSequenceTokens() int { return b.policy.cfg.MaxLen }
