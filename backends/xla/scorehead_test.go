package xla

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cde-rl/cde/backends/xla/safetensors"
	"github.com/cde-rl/cde/core"
)

// Scoring in chunks of positions (scoreChunkBytes) gives the log-probs and
// entropies of the whole-batch graph, for chunk sizes that divide the
// padded length and that do not, on cde's transformer and a Hugging Face
// one, for ScoreLogProbs and RescoreWithEmbeddings.
func TestScoreHeadChunks(t *testing.T) {
	dir, c := writeTinyHF(t, "qwen3", safetensors.F32, 3)
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	rng := rand.New(rand.NewPCG(1, 1))
	var seqs []*core.Sequence
	for i := range 3 {
		seqs = append(seqs, &core.Sequence{Prompt: randTokens(rng, 1, 3+i, 61)[0], Response: randTokens(rng, 1, 9+2*i, 61)[0]})
	}
	for _, model := range []struct {
		name string
		opts Options
	}{
		{"char", Options{Engine: "cpu", Policy: ModelConfig{Vocab: 61, Layers: 1, DModel: 16, Heads: 2, MaxLen: 48}, Seed: 2, PAD: 0, EOS: 1}},
		{"qwen3", Options{Engine: "cpu", Policy: HFModelConfig(c, 48), Seed: 2, PAD: 0, EOS: 2, HFWeights: set}},
	} {
		score := func(chunkPositions int) (lps, ents, embs [][]float64) {
			defer func(old int) { scoreChunkBytes = old }(scoreChunkBytes)
			scoreChunkBytes = chunkPositions * len(seqs) * 61 * 4
			b, err := New(model.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			lps, ents, err = b.ScoreLogProbs(seqs, 0.7)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, embs, err = b.RescoreWithEmbeddings(seqs, 0.7, "mean"); err != nil {
				t.Fatal(err)
			}
			return lps, ents, embs
		}
		lp0, en0, _ := score(1 << 20)          // one piece
		for _, chunk := range []int{1, 5, 7} { // the padded length is 24: 5 and 7 leave a short last chunk
			lp, en, emb := score(chunk)
			// Chunks change the products' row counts, and so the gemm
			// path and its rounding on some CPUs (on AVX2 without
			// AVX-512; 7.7e-7 measured there): agreement to float32
			// rounding, 2e-6 relative to the value (about 17 ulp), not bit
			// for bit; a wrong chunk is off by whole log-probs.
			worst, worstRel := 0.0, 0.0
			for i := range lp0 {
				if len(lp[i]) != len(lp0[i]) || len(emb[i]) == 0 {
					t.Fatalf("%s chunk %d: sequence %d has %d log-probs, want %d", model.name, chunk, i, len(lp[i]), len(lp0[i]))
				}
				for j := range lp0[i] {
					for _, d := range [][2]float64{{lp[i][j], lp0[i][j]}, {en[i][j], en0[i][j]}} {
						diff := math.Abs(d[0] - d[1])
						worst = math.Max(worst, diff)
						worstRel = math.Max(worstRel, diff/math.Max(1, math.Abs(d[1])))
					}
				}
			}
			t.Logf("%s, chunks of %d positions: max |difference| %.3g (relative to max(1, |value|): %.3g)", model.name, chunk, worst, worstRel)
			if worstRel > 2e-6 {
				t.Errorf("%s, chunks of %d positions: max |difference| %.3g, %.3g relative", model.name, chunk, worst, worstRel)
			}
		}
	}
}
