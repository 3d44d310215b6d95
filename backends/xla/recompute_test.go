package xla

import (
	"math"
	"testing"

	"github.com/cde-rl/cde/backends/xla/peft"
	"github.com/cde-rl/cde/backends/xla/safetensors"
	"github.com/cde-rl/cde/core"
)

// model.recompute changes memory and time, not results: an actor step, a
// critic step and a supervised step give the metrics and updated
// log-probs of the plain graphs, for cde's transformer, a Hugging Face
// model, and a Hugging Face model with LoRA. TrainChunkBytes is set so low
// that the recomputed graphs' head takes one position at a time.
func TestRecomputeSameResults(t *testing.T) {
	defer func(old int) { TrainChunkBytes = old }(TrainChunkBytes)
	TrainChunkBytes = 1
	dir, c := writeTinyHF(t, "qwen2", safetensors.F32, 7)
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	lora := HFModelConfig(c, 32)
	lora.LoRA = &peft.Config{Rank: 2, Alpha: 4, Targets: []string{"q_proj", "down_proj"}}
	for _, m := range []struct {
		name string
		opts Options
	}{
		{"char", Options{Policy: ModelConfig{Vocab: 61, Layers: 2, DModel: 16, Heads: 2, MaxLen: 32}}},
		{"qwen2", Options{Policy: HFModelConfig(c, 32), HFWeights: set}},
		{"qwen2-lora", Options{Policy: lora, HFWeights: set}},
	} {
		t.Run(m.name, func(t *testing.T) {
			r := loraRollout(c, 2)
			seqs := []*core.Sequence{&r.Seqs[0], &r.Seqs[1], &r.Seqs[2]}
			var metrics []map[string]float64
			var after [][][]float64
			for _, re := range []bool{false, true} {
				o := m.opts
				o.Engine, o.Seed, o.ActorLR, o.CriticLR, o.PAD, o.EOS, o.ValueHeads = "cpu", 3, 1e-2, 1e-2, 0, 2, 2
				o.Policy.Recompute = re
				b, err := New(o)
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				am, err := b.UpdateActor(r, core.ActorUpdate{Epochs: 1, Minibatches: 1, ClipLow: 0.2, ClipHigh: 0.2, EntropyCoef: 0.01, Temperature: 1})
				if err != nil {
					t.Fatal(err)
				}
				cm, err := b.UpdateCritic(r, core.CriticUpdate{Epochs: 1, Minibatches: 1})
				if err != nil {
					t.Fatal(err)
				}
				for k, v := range cm {
					am[k] = v
				}
				sft, err := b.SupervisedStep(seqs, 1e-2)
				if err != nil {
					t.Fatal(err)
				}
				am["sft/loss"] = sft
				lps, _, err := b.ScoreLogProbs(seqs, 1)
				if err != nil {
					t.Fatal(err)
				}
				metrics, after = append(metrics, am), append(after, lps)
			}
			for _, k := range []string{"actor/loss", "actor/grad_norm", "actor/entropy", "critic/vf_loss", "critic/grad_norm", "sft/loss"} {
				a, b := metrics[0][k], metrics[1][k]
				if math.Abs(a-b) > 1e-6*math.Max(1, math.Abs(a)) {
					t.Errorf("%s: %v plain, %v recomputed", k, a, b)
				}
			}
			for i := range after[0] {
				for j := range after[0][i] {
					// relative: the chunked head sums the output
					// embedding's gradient in another order
					if d := math.Abs(after[0][i][j] - after[1][i][j]); d > 1e-6*math.Max(1, math.Abs(after[0][i][j])) {
						t.Fatalf("log-prob %d,%d after the step: %v plain, %v recomputed", i, j, after[0][i][j], after[1][i][j])
					}
				}
			}
		})
	}
}

// evenChunk prefers a divisor of t, so that every chunk has one size.
func TestEvenChunk(t *testing.T) {
	for _, c := range []struct{ t, most, want int }{
		{256, 55, 32},   // 64 is over 55; 32 divides 256 and is not under 55/2
		{256, 300, 256}, // one chunk
		{255, 60, 51},
		{251, 60, 60}, // prime: no divisor in [30, 60]
		{10, 0, 1},
		{7, 7, 7},
	} {
		if got := evenChunk(c.t, c.most); got != c.want {
			t.Errorf("evenChunk(%d, %d) = %d, want %d", c.t, c.most, got, c.want)
		}
	}
}
