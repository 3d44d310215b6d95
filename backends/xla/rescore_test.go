package xla

import (
	"math"
	"testing"

	"github.com/cde-rl/cde/core"
)

// The pooled states the full-sequence rescoring gives match those the
// KV-cache sampler pooled while generating the same tokens, for every
// pooling, and its log-probs and entropies are ScoreLogProbs'.
func TestRescoreWithEmbeddingsMatchesGenerate(t *testing.T) {
	b := tinyBackend(t, 0)
	prompts := [][]int32{{1, 5, 6}, {1, 7}, {1, 8, 9, 10, 11}}
	for _, pooling := range []string{"last", "second_last", "mean"} {
		gens, err := b.Generate(core.GenerateRequest{Prompts: prompts, Temperature: 0.8, MaxTokens: 6, Seed: 5, Pooling: pooling})
		if err != nil {
			t.Fatal(err)
		}
		seqs := make([]*core.Sequence, len(gens))
		for i, g := range gens {
			seqs[i] = &core.Sequence{Prompt: prompts[i], Response: g.Tokens}
		}
		lps, ents, embs, err := b.RescoreWithEmbeddings(seqs, 0.8, pooling)
		if err != nil {
			t.Fatal(err)
		}
		wantLP, wantEnt, err := b.ScoreLogProbs(seqs, 0.8)
		if err != nil {
			t.Fatal(err)
		}
		for i, g := range gens {
			if len(embs[i]) != 16 || len(g.Embedding) != 16 {
				t.Fatalf("%s: sequence %d: embedding lengths %d and %d, want 16", pooling, i, len(embs[i]), len(g.Embedding))
			}
			for j := range g.Embedding {
				if math.Abs(embs[i][j]-g.Embedding[j]) > 1e-4 {
					t.Errorf("%s: sequence %d dim %d: rescored %v, generated %v", pooling, i, j, embs[i][j], g.Embedding[j])
				}
			}
			for j := range g.Tokens {
				if lps[i][j] != wantLP[i][j] || ents[i][j] != wantEnt[i][j] {
					t.Errorf("%s: sequence %d token %d: (%v, %v), ScoreLogProbs (%v, %v)", pooling, i, j, lps[i][j], ents[i][j], wantLP[i][j], wantEnt[i][j])
				}
			}
		}
	}
}
