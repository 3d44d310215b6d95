package xla

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
	"github.com/gomlx/gomlx/ml/model"

	"github.com/cde-rl/cde/backends/xla/hf"
	"github.com/cde-rl/cde/backends/xla/safetensors"
	"github.com/cde-rl/cde/core"
)

// tinyHFConfigs are small configs of each architecture that exercise its
// particular parts: GQA, Llama-3.1 rope scaling and an untied head (llama),
// q/k/v biases (qwen2), per-head q/k norm with head_dim != hidden/heads
// (qwen3), attention biases on all projections (llama-bias).
var tinyHFConfigs = map[string]string{
	"llama": `{"architectures": ["LlamaForCausalLM"], "vocab_size": 61, "hidden_size": 32, "intermediate_size": 48,
		"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-5,
		"max_position_embeddings": 64, "rope_theta": 500000.0, "tie_word_embeddings": false, "bos_token_id": 1, "eos_token_id": 2,
		"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 16}}`,
	"qwen2": `{"architectures": ["Qwen2ForCausalLM"], "vocab_size": 61, "hidden_size": 32, "intermediate_size": 40,
		"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 1, "rms_norm_eps": 1e-6,
		"max_position_embeddings": 64, "rope_theta": 10000.0, "tie_word_embeddings": true, "sliding_window": 32, "use_sliding_window": false}`,
	"qwen3": `{"architectures": ["Qwen3ForCausalLM"], "vocab_size": 61, "hidden_size": 32, "intermediate_size": 48, "head_dim": 12,
		"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-6,
		"max_position_embeddings": 64, "rope_theta": 1000000.0, "tie_word_embeddings": true}`,
	"mistral": `{"architectures": ["MistralForCausalLM"], "vocab_size": 61, "hidden_size": 32, "intermediate_size": 48,
		"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4, "rms_norm_eps": 1e-5,
		"max_position_embeddings": 64, "sliding_window": null, "attention_bias": true}`,
}

// writeTinyHF writes a random checkpoint of the named config to a new
// directory (weights in dt) and returns the directory and the config.
func writeTinyHF(t testing.TB, name string, dt safetensors.DType, seed uint64) (string, *hf.Config) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(tinyHFConfigs[name]), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := hf.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	var ts []safetensors.Tensor
	shapes := hfParamShapes(c, true)
	for _, n := range slices.Sorted(maps.Keys(shapes)) { // sorted: the same weights every run
		shape := shapes[n]
		size := 1
		for _, d := range shape {
			size *= d
		}
		v := make([]float32, size)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * 0.2)
			if filepath.Ext(n) == ".weight" && len(shape) == 1 {
				v[i] += 1 // norm gains near 1
			}
		}
		if dt == safetensors.BF16 {
			ts = append(ts, safetensors.BF16Tensor(n, shape, v))
		} else {
			ts = append(ts, safetensors.F32Tensor(n, shape, v))
		}
	}
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), ts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	return dir, c
}

// hfLogProbs runs the full forward of the checkpoint in dir on tokens and
// returns log p(targets[b][t]) per position.
func hfLogProbs(t testing.TB, dir string, c *hf.Config, tokens, targets [][]int32) [][]float32 {
	t.Helper()
	return hfLogProbsOn(t, "cpu", dir, c, tokens, targets)
}

func hfLogProbsOn(t testing.TB, engine, dir string, c *hf.Config, tokens, targets [][]int32) [][]float32 {
	t.Helper()
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	ctx := model.NewStore().RootScope()
	if err := loadHFParams(ctx, nil, c, set, true, nil, false); err != nil {
		t.Fatal(err)
	}
	eng, err := NewEngine(engine, "")
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Finalize()
	arch := newHFArch(c, 64)
	exec, err := model.NewExec(eng, ctx.Store(), func(ctx *model.Scope, in []*graph.Node) *graph.Node {
		lp := graph.LogSoftmax(arch.logits(ctx, arch.hidden(ctx, in[0])), -1)
		tlp, _ := tokenLogProbs(lp, in[1])
		return tlp
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Exec(tensors.FromValue(tokens), tensors.FromValue(targets))
	if err != nil {
		t.Fatal(err)
	}
	return out[0].Value().([][]float32)
}

// torchLogProbs runs testdata/hf_ref.py; skipped without PyTorch.
func torchLogProbs(t *testing.T, dir string, tokens, targets [][]int32) [][]float64 {
	t.Helper()
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import torch").Run(); err != nil {
		t.Skip("PyTorch is not installed (apt-get install python3-torch): the independent reference is optional")
	}
	return torchLogProbsArgs(t, dir, tokens, targets)
}

func randTokens(rng *rand.Rand, b, t, vocab int) [][]int32 {
	out := make([][]int32, b)
	for i := range out {
		out[i] = make([]int32, t)
		for j := range out[i] {
			out[i][j] = int32(rng.IntN(vocab))
		}
	}
	return out
}

// Per-token log-probs of each architecture agree with the independent
// PyTorch forward to 1e-4, from bf16 and f32 checkpoints.
func TestHFForwardMatchesTorch(t *testing.T) {
	for _, name := range slices.Sorted(maps.Keys(tinyHFConfigs)) {
		for _, dt := range []safetensors.DType{safetensors.F32, safetensors.BF16} {
			t.Run(fmt.Sprintf("%s/%s", name, dt), func(t *testing.T) {
				dir, c := writeTinyHF(t, name, dt, 11)
				rng := rand.New(rand.NewPCG(5, 6))
				tokens, targets := randTokens(rng, 3, 24, c.Vocab), randTokens(rng, 3, 24, c.Vocab)
				got := hfLogProbs(t, dir, c, tokens, targets)
				want := torchLogProbs(t, dir, tokens, targets)
				worst := 0.0
				for b := range want {
					for j := range want[b] {
						worst = math.Max(worst, math.Abs(float64(got[b][j])-want[b][j]))
					}
				}
				t.Logf("max |Go - PyTorch| = %.3g (log-probs around %.3g)", worst, want[0][0])
				if worst > 1e-4 {
					t.Fatalf("max difference %.3g > 1e-4", worst)
				}
			})
		}
	}
}

// HFModel.LogProbs (padded to a bucket, the tokens after `from`) equals the
// plain full-sequence forward at the matching positions.
func TestHFModelLogProbs(t *testing.T) {
	dir, c := writeTinyHF(t, "qwen3", safetensors.BF16, 3)
	m, err := LoadHF(dir, "cpu", "")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	seq := []int32{5, 9, 1, 0, 33, 60, 7, 7, 12, 40}
	targets := append(append([]int32{}, seq[1:]...), 0)
	full := hfLogProbs(t, dir, c, [][]int32{seq}, [][]int32{targets})[0]
	for _, from := range []int{1, 4, 9, 10} {
		got, err := m.LogProbs(seq, from)
		if err != nil {
			t.Fatal(err)
		}
		// log p(seq[j] | seq[:j]) is full[j-1].
		want := full[from-1 : len(seq)-1]
		if len(got) != len(seq)-from {
			t.Fatalf("from %d: %d log-probs", from, len(got))
		}
		for j := range got {
			if math.Abs(float64(got[j]-want[j])) > 1e-5 {
				t.Fatalf("from %d: %v, want %v", from, got, want)
			}
		}
	}
	for _, c := range []struct {
		seq  []int32
		from int
		want string
	}{
		{seq, 0, "want 1 <= from"},
		{[]int32{1, 61}, 1, "id 61 outside the model's vocabulary of 61"},
		{make([]int32, 65), 1, "over max_position_embeddings = 64"},
	} {
		if _, err := m.LogProbs(c.seq, c.from); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("err = %v, want %q", err, c.want)
		}
	}
}

// A checkpoint that disagrees with its config.json is refused by name.
func TestLoadHFErrors(t *testing.T) {
	dir, c := writeTinyHF(t, "llama", safetensors.F32, 4)
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	// A config with one layer more: layer 2's weights are missing.
	c3 := *c
	c3.Layers = 3
	if err := loadHFParams(model.NewStore().RootScope(), nil, &c3, set, true, nil, false); err == nil || !strings.Contains(err.Error(), `"model.layers.2.input_layernorm.weight": missing`) {
		t.Errorf("missing layer: %v", err)
	}
	// A config with one layer fewer: layer 1's weights are not used.
	c1 := *c
	c1.Layers = 1
	if err := loadHFParams(model.NewStore().RootScope(), nil, &c1, set, true, nil, false); err == nil || !strings.Contains(err.Error(), `"model.layers.1.`) || !strings.Contains(err.Error(), "not a weight of LlamaForCausalLM") {
		t.Errorf("extra layer: %v", err)
	}
	// A wider intermediate size: shapes disagree.
	cw := *c
	cw.Intermediate = 50
	if err := loadHFParams(model.NewStore().RootScope(), nil, &cw, set, true, nil, false); err == nil || !strings.Contains(err.Error(), "config.json implies [32 50]") {
		t.Errorf("shape: %v", err)
	}
}

// The whole forward graph of each architecture gives the same log-probs on
// cde's cpu engine and on GoMLX's own pure-Go engine.
func TestHFForwardEngines(t *testing.T) {
	for _, name := range slices.Sorted(maps.Keys(tinyHFConfigs)) {
		dir, c := writeTinyHF(t, name, safetensors.F32, 21)
		rng := rand.New(rand.NewPCG(8, 9))
		tokens, targets := randTokens(rng, 2, 40, c.Vocab), randTokens(rng, 2, 40, c.Vocab)
		a := hfLogProbsOn(t, "cpu", dir, c, tokens, targets)
		b := hfLogProbsOn(t, "go", dir, c, tokens, targets)
		for i := range a {
			for j := range a[i] {
				if d := math.Abs(float64(a[i][j] - b[i][j])); d > 2e-5 {
					t.Fatalf("%s: position %d,%d: cpu %v, go %v", name, i, j, a[i][j], b[i][j])
				}
			}
		}
	}
}

// A Hugging Face policy and critic in the Backend: KV-cache sampling agrees
// with full-sequence scoring (which equals the checkpoint's forward, checked
// against PyTorch above), the critic starts from the same trunk with a fresh
// value head, an actor step moves the log-probs the way the advantages say,
// and a checkpoint round trip restores the weights.
func TestHFBackend(t *testing.T) {
	dir, c := writeTinyHF(t, "qwen3", safetensors.F32, 17)
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	b, err := New(Options{Engine: "cpu", Policy: HFModelConfig(c, 48), ValueHeads: 2, Seed: 1,
		ActorLR: 1e-2, CriticLR: 1e-2, PAD: 0, EOS: 2, HFWeights: set})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	prompts := [][]int32{{5, 6, 7}, {9}, {3, 4, 8, 10, 11}}
	gens, err := b.Generate(core.GenerateRequest{Prompts: prompts, Temperature: 0.8, MaxTokens: 8, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	seqs := make([]*core.Sequence, len(gens))
	for i, g := range gens {
		seqs[i] = &core.Sequence{Prompt: prompts[i], Response: g.Tokens}
	}
	lps, ents, err := b.ScoreLogProbs(seqs, 0.8)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range gens {
		for j := range g.Tokens {
			if math.Abs(lps[i][j]-g.LogProbs[j]) > 1e-4 || math.Abs(ents[i][j]-g.Entropies[j]) > 1e-4 {
				t.Fatalf("seq %d token %d: sampler (%v, %v) vs scorer (%v, %v)", i, j, g.LogProbs[j], g.Entropies[j], lps[i][j], ents[i][j])
			}
		}
	}
	// Scoring at temperature 1 equals the checkpoint forward.
	lp1, _, err := b.ScoreLogProbs(seqs[:1], 1)
	if err != nil {
		t.Fatal(err)
	}
	full := append(append([]int32{}, prompts[0]...), gens[0].Tokens...)
	targets := append(append([]int32{}, full[1:]...), 0)
	ref := hfLogProbs(t, dir, c, [][]int32{full}, [][]int32{targets})[0]
	for j := range gens[0].Tokens {
		if d := math.Abs(lp1[0][j] - float64(ref[len(prompts[0])-1+j])); d > 1e-5 {
			t.Fatalf("token %d: backend %v, checkpoint forward %v", j, lp1[0][j], ref[len(prompts[0])-1+j])
		}
	}
	// The critic: the policy's trunk, K = 2 fresh heads, no LM head.
	if b.critic.ctx.At(hfScope).Store().GetVariable(model.JoinPath("/"+hfScope, "model.layers.0.mlp.up_proj.weight")) == nil {
		t.Fatal("critic has no trunk")
	}
	r := &core.Rollout{ValueHeads: 2}
	for i, s := range seqs {
		adv := 1.0
		if i == 1 {
			adv = -1
		}
		n := len(s.Response)
		seq := core.Sequence{Group: 0, Prompt: s.Prompt, Response: s.Response, LogProbs: gens[i].LogProbs,
			Advantages: make([]float64, n), Returns: make([]float64, n)}
		for j := range n {
			seq.Advantages[j] = adv
			seq.Returns[j] = adv
		}
		r.Seqs = append(r.Seqs, seq)
	}
	if err := b.ScoreValues(r); err != nil {
		t.Fatal(err)
	}
	if len(r.Seqs[0].Values) != 2*len(r.Seqs[0].Response) || r.Seqs[0].Heads() != 2 {
		t.Fatalf("values %v", r.Seqs[0].Values)
	}
	m, err := b.UpdateActor(r, core.ActorUpdate{Epochs: 1, Minibatches: 1, ClipLow: 0.2, ClipHigh: 0.2, Temperature: 0.8})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("generated %d/%d/%d tokens; actor metrics %v", len(gens[0].Tokens), len(gens[1].Tokens), len(gens[2].Tokens), m)
	if m["actor/grad_norm"] <= 0 {
		t.Fatalf("metrics %v", m)
	}
	after, _, err := b.ScoreLogProbs(seqs, 0.8)
	if err != nil {
		t.Fatal(err)
	}
	if !(after[0][0] > lps[0][0]) || !(after[1][0] < lps[1][0]) {
		t.Fatalf("log-probs did not follow the advantages: %v -> %v, %v -> %v", lps[0][0], after[0][0], lps[1][0], after[1][0])
	}
	if _, err := b.UpdateCritic(r, core.CriticUpdate{Epochs: 1, Minibatches: 1}); err != nil {
		t.Fatal(err)
	}
	ck := t.TempDir()
	if err := b.Save(ck); err != nil {
		t.Fatal(err)
	}
	b2, err := New(Options{Engine: "cpu", Policy: HFModelConfig(c, 48), ValueHeads: 2, Seed: 9, ActorLR: 1e-2, CriticLR: 1e-2, PAD: 0, EOS: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	if err := b2.Load(ck); err != nil {
		t.Fatal(err)
	}
	again, _, err := b2.ScoreLogProbs(seqs, 0.8)
	if err != nil {
		t.Fatal(err)
	}
	for i := range after {
		for j := range after[i] {
			if after[i][j] != again[i][j] {
				t.Fatalf("restored policy differs at %d,%d: %v vs %v", i, j, after[i][j], again[i][j])
			}
		}
	}
	// A checkpoint of another architecture is refused.
	other, _ := hf.ParseConfig([]byte(tinyHFConfigs["llama"]))
	b3, err := New(Options{Engine: "cpu", Policy: HFModelConfig(other, 48), Seed: 1, ActorLR: 1e-2, PAD: 0, EOS: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b3.Close()
	if err := b3.Load(ck); err == nil || !strings.Contains(err.Error(), "differ from the configured") {
		t.Fatalf("load into another architecture: %v", err)
	}
}

// One actor step's loss and gradient norm (before clipping) agree with
// PyTorch autograd on the same batch and weights.
func TestHFActorStepMatchesTorch(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import torch").Run(); err != nil {
		t.Skip("PyTorch is not installed (apt-get install python3-torch): the independent reference is optional")
	}
	for _, name := range slices.Sorted(maps.Keys(tinyHFConfigs)) {
		t.Run(name, func(t *testing.T) {
			dir, c := writeTinyHF(t, name, safetensors.F32, 31)
			set, err := safetensors.OpenDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer set.Close()
			b, err := New(Options{Engine: "cpu", Policy: HFModelConfig(c, 48), Seed: 1, ActorLR: 1e-3, PAD: 0, EOS: 2, HFWeights: set})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			rng := rand.New(rand.NewPCG(7, 8))
			r, step := torchStepBatch(t, b, rng, c.Vocab)
			m, err := b.UpdateActor(r, core.ActorUpdate{Epochs: 1, Minibatches: 1, ClipLow: 0.2, ClipHigh: 0.28, Temperature: 1})
			if err != nil {
				t.Fatal(err)
			}
			want := torchStep(t, dir, step)
			t.Logf("loss %.6g vs PyTorch %.6g; grad norm %.6g vs %.6g", m["actor/loss"], want.Loss, m["actor/grad_norm"], want.GradNorm)
			if math.Abs(m["actor/loss"]-want.Loss) > 1e-5 || math.Abs(m["actor/grad_norm"]/want.GradNorm-1) > 1e-4 {
				t.Fatalf("loss %v vs %v, grad norm %v vs %v", m["actor/loss"], want.Loss, m["actor/grad_norm"], want.GradNorm)
			}
		})
	}
}

// torchStepBatch makes an actor batch of 4 random sequences for b whose
// old log-probs are 0.9 x b's own plus noise (ratios off 1 and
// model-dependent, some clipped) and random advantages, and the same batch
// as hf_ref.py --train reads it.
func torchStepBatch(t *testing.T, b *Backend, rng *rand.Rand, vocab int) (*core.Rollout, map[string]any) {
	t.Helper()
	r := &core.Rollout{}
	var prompts, responses [][]int32
	var olds, advs [][]float64
	for i := range 4 {
		p := randTokens(rng, 1, 3+i, vocab)[0]
		resp := randTokens(rng, 1, 6-i, vocab)[0]
		seq := &core.Sequence{Prompt: p, Response: resp}
		lp, _, err := b.ScoreLogProbs([]*core.Sequence{seq}, 1)
		if err != nil {
			t.Fatal(err)
		}
		old, adv := make([]float64, len(resp)), make([]float64, len(resp))
		for j := range old {
			old[j] = 0.9*lp[0][j] + rng.NormFloat64()*0.3
			adv[j] = rng.NormFloat64()
		}
		seq.LogProbs, seq.Advantages, seq.Returns = old, adv, adv
		r.Seqs = append(r.Seqs, *seq)
		prompts, responses, olds, advs = append(prompts, p), append(responses, resp), append(olds, old), append(advs, adv)
	}
	return r, map[string]any{"clip_low": 0.2, "clip_high": 0.28, "prompts": prompts, "responses": responses, "old_logprobs": olds, "advantages": advs}
}

// torchStep runs hf_ref.py --train (args: e.g. --adapter=DIR) on the
// checkpoint in dir and the batch step: PyTorch autograd's loss and
// gradient norm.
func torchStep(t *testing.T, dir string, step map[string]any, args ...string) (want struct {
	Loss     float64 `json:"loss"`
	GradNorm float64 `json:"grad_norm"`
}) {
	t.Helper()
	js, _ := json.Marshal(step)
	path := filepath.Join(t.TempDir(), "step.json")
	if err := os.WriteFile(path, js, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/usr/bin/python3", append([]string{filepath.Join("testdata", "hf_ref.py"), dir, path, "--train"}, args...)...)
	cmd.Env = append(os.Environ(), "OMP_NUM_THREADS=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hf_ref.py --train: %v", err)
	}
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	return want
}

// The whole train step of each architecture (forward, backward, Adam)
// agrees between the cpu engine and GoMLX's go engine: loss, gradient norm
// and the log-probs after the update.
//
// The learning rate is 1e-3: Adam's first step moves every weight by about
// ±lr, the sign of its gradient, so a weight whose gradient is rounding
// noise moves one way or the other with the engine's summation order. At
// lr 1e-2 that put mistral's log-probs after the step 1.25e-4 apart when
// the cpu engine's order changed (2026-11-28, docs/engine.md "One
// summation order"), over the 1e-4 bound, with loss, gradient norm and
// entropy still agreeing to 1e-4; at 1e-3 that noise is ten times
// smaller, while a wrong gradient still moves the log-probs by about lr.
func TestHFTrainStepEngines(t *testing.T) {
	for _, name := range slices.Sorted(maps.Keys(tinyHFConfigs)) {
		t.Run(name, func(t *testing.T) {
			dir, c := writeTinyHF(t, name, safetensors.F32, 41)
			set, err := safetensors.OpenDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer set.Close()
			rng := rand.New(rand.NewPCG(3, 3))
			r := &core.Rollout{}
			for i := range 3 {
				p, resp := randTokens(rng, 1, 4, c.Vocab)[0], randTokens(rng, 1, 5, c.Vocab)[0]
				lp, adv := make([]float64, 5), make([]float64, 5)
				for j := range lp {
					lp[j], adv[j] = -4+rng.NormFloat64(), float64(i-1)
				}
				r.Seqs = append(r.Seqs, core.Sequence{Prompt: p, Response: resp, LogProbs: lp, Advantages: adv, Returns: adv})
			}
			var metrics []map[string]float64
			var after [][][]float64
			for _, eng := range []string{"cpu", "go"} {
				b, err := New(Options{Engine: eng, Policy: HFModelConfig(c, 32), Seed: 1, ActorLR: 1e-3, PAD: 0, EOS: 2, HFWeights: set})
				if err != nil {
					t.Fatal(err)
				}
				m, err := b.UpdateActor(r, core.ActorUpdate{Epochs: 1, Minibatches: 1, ClipLow: 0.2, ClipHigh: 0.28, EntropyCoef: 0.01, Temperature: 1})
				if err != nil {
					t.Fatal(err)
				}
				seqs := []*core.Sequence{&r.Seqs[0], &r.Seqs[1], &r.Seqs[2]}
				lps, _, err := b.ScoreLogProbs(seqs, 1)
				if err != nil {
					t.Fatal(err)
				}
				b.Close()
				metrics, after = append(metrics, m), append(after, lps)
			}
			for _, k := range []string{"actor/loss", "actor/grad_norm", "actor/entropy"} {
				if d := math.Abs(metrics[0][k] - metrics[1][k]); d > 1e-4*math.Max(1, math.Abs(metrics[1][k])) {
					t.Fatalf("%s: cpu %v, go %v", k, metrics[0][k], metrics[1][k])
				}
			}
			for i := range after[0] {
				for j := range after[0][i] {
					if d := math.Abs(after[0][i][j] - after[1][i][j]); d > 1e-4 {
						t.Fatalf("after the step, seq %d token %d: cpu %v, go %v", i, j, after[0][i][j], after[1][i][j])
					}
				}
			}
		})
	}
}

// On the cpu engine (shared buffers) the weights are written straight into
// engine buffers, with no host copy; the values are those of the host path,
// for loaded and for random weights.
func TestHFWeightsInEngineBuffers(t *testing.T) {
	dir, c := writeTinyHF(t, "qwen3", safetensors.BF16, 5)
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	eng, err := NewEngine("cpu", "")
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Finalize()
	for _, load := range []bool{true, false} {
		host, dev := model.NewStore().RootScope(), model.NewStore().RootScope()
		if load {
			if err := loadHFParams(host, nil, c, set, true, nil, false); err != nil {
				t.Fatal(err)
			}
			if err := loadHFParams(dev, eng, c, set, true, nil, false); err != nil {
				t.Fatal(err)
			}
		} else {
			if err := initHFParams(host, nil, c, 9, 0.02, true, false); err != nil {
				t.Fatal(err)
			}
			if err := initHFParams(dev, eng, c, 9, 0.02, true, false); err != nil {
				t.Fatal(err)
			}
		}
		n := 0
		for v := range dev.IterVariables() {
			n++
			tv, err := v.Value()
			if err != nil {
				t.Fatal(err)
			}
			if tv.IsLocal() || !tv.IsOnAnyDevice() {
				t.Fatalf("load %v: %s: local %v, on the engine %v: want only an engine buffer", load, v.Name(), tv.IsLocal(), tv.IsOnAnyDevice())
			}
			hv, err := host.Store().GetVariable(model.JoinPath(v.Scope(), v.Name())).Value()
			if err != nil {
				t.Fatal(err)
			}
			if !tv.Shape().Equal(hv.Shape()) || !slices.Equal(tensors.MustCopyFlatData[float32](tv), tensors.MustCopyFlatData[float32](hv)) {
				t.Fatalf("load %v: %s: engine and host values differ", load, v.Name())
			}
		}
		if n != len(hfParamShapes(c, true)) {
			t.Fatalf("load %v: %d variables, want %d", load, n, len(hfParamShapes(c, true)))
		}
	}
}
