package xla

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cde-rl/cde/backends/xla/safetensors"
	"github.com/cde-rl/cde/core"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
)

// roundBF16Ref rounds x to the nearest bfloat16 (ties to even), spelled
// out on the bits: the reference of the products below.
func roundBF16Ref(x float32) float32 {
	b := math.Float32bits(x)
	lsb := (b >> 16) & 1
	b += 0x7fff + lsb
	return math.Float32frombits(b &^ 0xffff)
}

// linearBF16 on the cpu and go engines equals a loop that rounds both
// operands to bfloat16 and sums the products in float64, to float32's
// accumulation error.
func TestLinearBF16MatchesLoop(t *testing.T) {
	const rows, in, out = 6, 37, 5
	rng := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, rows*in)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * 3)
	}
	w := make([]float32, out*in)
	for i := range w {
		w[i] = float32(rng.NormFloat64())
	}
	bias := []float32{0.5, -1, 2, 0, 0.25}
	want := make([]float64, rows*out)
	for r := range rows {
		for o := range out {
			s := float64(bias[o])
			for k := range in {
				s += float64(roundBF16Ref(x[r*in+k])) * float64(roundBF16Ref(w[o*in+k]))
			}
			want[r*out+o] = s
		}
	}
	for _, eng := range []string{"cpu", "go"} {
		be, err := NewEngine(eng, "")
		if err != nil {
			t.Fatal(err)
		}
		e := graph.MustNewExec(be, func(x, w, b *graph.Node) *graph.Node {
			return linearBF16(graph.Reshape(x, 2, rows/2, in), graph.ConvertDType(w, dtypes.BFloat16), b, false)
		})
		got := e.MustExec(tensors.FromFlatDataAndDimensions(x, rows, in), tensors.FromFlatDataAndDimensions(w, out, in), bias)[0]
		if d := got.Shape().Dimensions; !slices.Equal(d, []int{2, rows / 2, out}) || got.Shape().DType != dtypes.Float32 {
			t.Fatalf("%s: shape %v", eng, got.Shape())
		}
		for i, g := range tensors.MustCopyFlatData[float32](got) {
			if math.Abs(float64(g)-want[i]) > 1e-5*(1+math.Abs(want[i])) {
				t.Fatalf("%s: entry %d = %v, the loop gives %v", eng, i, g, want[i])
			}
		}
		// The weights unrounded give a different answer: the rounding is
		// what the loop checks, not an accident of the data.
		plain := 0.0
		for k := range in {
			plain += float64(x[k]) * float64(w[k])
		}
		if math.Abs(plain+float64(bias[0])-want[0]) < 1e-4 {
			t.Fatalf("the rounding changes nothing on this data")
		}
		be.Finalize()
	}
}

// rollout.dtype bfloat16 on the tiny checkpoints, on the cpu engine and
// on the go engine (which also runs the device loop): the generation view
// is used (its log-probs differ from the float32 policy's on the same
// tokens) but close (the gap is logged: issue 42's measurement); the
// device and host loops agree in bfloat16 too; the copies are made again
// only after an update changed the weights.
func TestGenerateBF16(t *testing.T) {
	for _, tc := range []struct{ name, eng string }{
		{"llama", "cpu"}, {"mistral", "cpu"}, {"qwen2", "cpu"}, {"qwen3", "cpu"}, {"qwen3", "go"}, {"llama", "go"},
	} {
		name := tc.name
		t.Run(name+"/"+tc.eng, func(t *testing.T) {
			dir, c := writeTinyHF(t, name, safetensors.F32, 41)
			set, err := safetensors.OpenDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer set.Close()
			b, err := New(Options{Engine: tc.eng, Policy: HFModelConfig(c, 40), Seed: 1, ActorLR: 1e-2, PAD: 0, EOS: 2, HFWeights: set, GenBF16: true})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			rng := rand.New(rand.NewPCG(9, 10))
			var prompts [][]int32
			for i := range 6 {
				prompts = append(prompts, randTokens(rng, 1, 2+i%3, c.Vocab)[0])
			}
			req := core.GenerateRequest{Prompts: prompts, Temperature: 1, MaxTokens: 16, Seed: 5}
			t.Setenv("CDE_GENERATE", "host")
			host, err := b.Generate(req)
			if err != nil {
				t.Fatal(err)
			}
			matrices := b.gen.converted
			if matrices == 0 {
				t.Fatal("no weight was rounded to bfloat16")
			}
			dev := host
			if tc.eng == "go" { // the cpu engine has no device loop (no bitwise ops for the noise)
				t.Setenv("CDE_GENERATE", "device")
				if dev, err = b.Generate(req); err != nil {
					t.Fatal(err)
				}
			} else if host, err = b.Generate(req); err != nil {
				t.Fatal(err)
			}
			if b.gen.converted != matrices {
				t.Fatalf("a second Generate with the same weights rounded %d matrices again", b.gen.converted-matrices)
			}
			for i := range host {
				if !slices.Equal(host[i].Tokens, dev[i].Tokens) {
					t.Fatalf("response %d: host loop %v, device loop %v", i, host[i].Tokens, dev[i].Tokens)
				}
				for k := range host[i].LogProbs {
					if math.Abs(host[i].LogProbs[k]-dev[i].LogProbs[k]) > 1e-5 {
						t.Fatalf("response %d token %d: log-prob %v (host) vs %v (device)", i, k, host[i].LogProbs[k], dev[i].LogProbs[k])
					}
				}
			}
			// The float32 policy's log-probs of the same tokens.
			seqs := make([]*core.Sequence, len(host))
			for i, g := range host {
				seqs[i] = &core.Sequence{Prompt: prompts[i], Response: g.Tokens}
			}
			lps, _, err := b.ScoreLogProbs(seqs, 1)
			if err != nil {
				t.Fatal(err)
			}
			maxGap, sumGap, n := 0.0, 0.0, 0
			for i, g := range host {
				for k, lp := range g.LogProbs {
					d := math.Abs(lp - lps[i][k])
					maxGap, sumGap, n = max(maxGap, d), sumGap+d, n+1
				}
			}
			t.Logf("%s: bfloat16 generation vs float32 scoring over %d tokens: mean |gap| %.2e, max %.2e nats", name, n, sumGap/float64(n), maxGap)
			if maxGap == 0 || maxGap > 0.1 {
				t.Fatalf("max |log-prob gap| %v: want > 0 (the bfloat16 view generates) and <= 0.1", maxGap)
			}
			// An update changes every matrix: all are rounded again.
			r := &core.Rollout{}
			for i, g := range host {
				s := core.Sequence{Group: i / 2, Prompt: prompts[i], Response: g.Tokens, LogProbs: lps[i], Advantages: make([]float64, len(g.Tokens))}
				for k := range s.Advantages {
					s.Advantages[k] = float64(i%2*2 - 1)
				}
				r.Seqs = append(r.Seqs, s)
			}
			if _, err := b.UpdateActor(r, core.ActorUpdate{Epochs: 1, Minibatches: 1, ClipLow: 0.2, ClipHigh: 0.28, Temperature: 1}); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Generate(req); err != nil {
				t.Fatal(err)
			}
			if got := b.gen.converted; got != 2*matrices {
				t.Fatalf("after an update %d matrices were rounded again, want all %d", got-matrices, matrices)
			}
		})
	}
}

// TestConformanceGenerateBF16: rollout.dtype bfloat16 on the cpu engine
// and on the reference engine (CDE_CONFORMANCE_REF: go here, xla:cuda in
// scripts/gpucheck check a, where the products are the engine's bfloat16
// dot) give the same tokens but at near-ties, and close log-probs and
// entropies on the tokens they share: the same products summed in another
// order, which can move an activation across a bfloat16 rounding boundary
// (a relative step of 2^-8 in one input of the next product), so the
// bound is bfloat16's, not float32's: 0.02 at worst, 1e-3 on average.
func TestConformanceGenerateBF16(t *testing.T) {
	dir, c := writeTinyHF(t, "qwen3", safetensors.F32, 43)
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	var bs [2]*Backend
	for i, eng := range []string{"cpu", confRef()} {
		if bs[i], err = New(Options{Engine: eng, PJRTPlugin: testPlugin(eng), Policy: HFModelConfig(c, 40), Seed: 1, PAD: 0, EOS: 2, HFWeights: set, GenBF16: true}); err != nil {
			t.Fatal(err)
		}
		defer bs[i].Close()
	}
	rng := rand.New(rand.NewPCG(12, 13))
	var prompts [][]int32
	for i := range 8 {
		prompts = append(prompts, randTokens(rng, 1, 2+i%4, c.Vocab)[0])
	}
	req := core.GenerateRequest{Prompts: prompts, Temperature: 1, MaxTokens: 20, Seed: 8}
	ga, err := bs[0].Generate(req)
	if err != nil {
		t.Fatal(err)
	}
	gb, err := bs[1].Generate(req)
	if err != nil {
		t.Fatal(err)
	}
	cut, same, worst, sum := 0, 0, 0.0, 0.0
	for i := range prompts {
		a, b := ga[i], gb[i]
		n := min(len(a.Tokens), len(b.Tokens))
		k := 0
		for k < n && a.Tokens[k] == b.Tokens[k] {
			k++
		}
		if k < n || len(a.Tokens) != len(b.Tokens) {
			cut++
		}
		same += k
		for j := range k {
			dl, de := math.Abs(a.LogProbs[j]-b.LogProbs[j]), math.Abs(a.Entropies[j]-b.Entropies[j])
			worst, sum = max(worst, dl, de), sum+dl+de
		}
	}
	mean := sum / float64(2*max(same, 1))
	t.Logf("cpu vs %s in bfloat16: %d shared tokens, %d of %d rows cut, |d| mean %.2e, worst %.2e", confRef(), same, cut, len(prompts), mean, worst)
	if cut > 1 || worst > 0.02 || mean > 1e-3 || same < 100 {
		t.Fatalf("cpu vs %s in bfloat16: %d rows diverge (at most 1 near-tie expected), %d shared tokens, log-prob/entropy difference mean %v worst %v (want <= 1e-3, 0.02)",
			confRef(), cut, same, mean, worst)
	}
}
