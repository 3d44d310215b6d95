package xla

import (
	"encoding/json"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/cde-rl/cde/backends/xla/hf"
	"github.com/cde-rl/cde/backends/xla/peft"
	"github.com/cde-rl/cde/backends/xla/safetensors"
	"github.com/cde-rl/cde/core"
)

// writeRandomAdapter writes a PEFT adapter for the model c with random A
// and B (both non-zero, so it changes the model and A has a gradient).
func writeRandomAdapter(t testing.TB, c *hf.Config, lc peft.Config, seed uint64) string {
	t.Helper()
	cfg := HFModelConfig(c, 8)
	cfg.LoRA = &lc
	names, out, in := loraModules(cfg)
	rng := rand.New(rand.NewPCG(seed, 2))
	a, b := map[string][]float32{}, map[string][]float32{}
	for _, m := range names {
		a[m], b[m] = make([]float32, lc.Rank*in[m]), make([]float32, out[m]*lc.Rank)
		for i := range a[m] {
			a[m][i] = float32(rng.NormFloat64() * 0.2)
		}
		for i := range b[m] {
			b[m][i] = float32(rng.NormFloat64() * 0.2)
		}
	}
	dir := filepath.Join(t.TempDir(), "adapter")
	if err := peft.Write(dir, lc, a, b, in, out); err != nil {
		t.Fatal(err)
	}
	return dir
}

var testLoRA = map[string]peft.Config{
	"llama":   {Rank: 4, Alpha: 8, Targets: slices.Clone(peft.Modules)},
	"qwen2":   {Rank: 2, Alpha: 16, Targets: []string{"q_proj", "v_proj"}},
	"qwen3":   {Rank: 3, Alpha: 5, Targets: []string{"q_proj", "k_proj", "o_proj", "down_proj"}},
	"mistral": {Rank: 4, Alpha: 4, Targets: []string{"gate_proj", "up_proj", "down_proj"}},
}

func needTorch(t *testing.T) {
	t.Helper()
	if err := exec.Command("/usr/bin/python3", "-c", "import torch").Run(); err != nil {
		t.Skip("PyTorch is not installed (apt-get install python3-torch): the independent reference is optional")
	}
}

// `score --adapter` (the adapter merged at load) agrees with PyTorch's
// forward of the weights merged by hand, W + (alpha/r) B A, to 1e-4; the
// training graph's unmerged form (x W^T + (alpha/r) (x A^T) B^T) agrees
// with the merged one to 1e-5.
func TestLoRAScoreMatchesTorch(t *testing.T) {
	needTorch(t)
	for _, name := range slices.Sorted(maps.Keys(testLoRA)) {
		t.Run(name, func(t *testing.T) {
			dir, c := writeTinyHF(t, name, safetensors.F32, 13)
			adir := writeRandomAdapter(t, c, testLoRA[name], 17)
			m, err := LoadHFAdapter(dir, adir, "cpu", "")
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			rng := rand.New(rand.NewPCG(9, 9))
			seqs := randTokens(rng, 3, 20, c.Vocab)
			var tokens, targets [][]int32
			for _, s := range seqs {
				tokens, targets = append(tokens, s[:19]), append(targets, s[1:])
			}
			want := torchLogProbsArgs(t, dir, tokens, targets, "--adapter="+adir)
			base := torchLogProbsArgs(t, dir, tokens, targets)
			ad, err := peft.Read(adir)
			if err != nil {
				t.Fatal(err)
			}
			set, err := safetensors.OpenDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer set.Close()
			pc := HFModelConfig(c, 32)
			lc := testLoRA[name]
			pc.LoRA = &lc
			be, err := New(Options{Engine: "cpu", Policy: pc, Seed: 1, ActorLR: 1e-3, PAD: 0, EOS: 2, HFWeights: set, Adapter: ad})
			if err != nil {
				t.Fatal(err)
			}
			defer be.Close()
			var cs []*core.Sequence
			for _, s := range seqs {
				cs = append(cs, &core.Sequence{Prompt: s[:1], Response: s[1:]})
			}
			graphLP, _, err := be.ScoreLogProbs(cs, 1)
			if err != nil {
				t.Fatal(err)
			}
			refLP, err := be.ReferenceLogProbs(&core.Rollout{Seqs: derefSeqs(cs)}, 1)
			if err != nil {
				t.Fatal(err)
			}
			worst, worstGraph, worstRef, moved := 0.0, 0.0, 0.0, 0.0
			for b, s := range seqs {
				got, err := m.LogProbs(s, 1)
				if err != nil {
					t.Fatal(err)
				}
				for j := range got {
					worst = math.Max(worst, math.Abs(float64(got[j])-want[b][j]))
					worstGraph = math.Max(worstGraph, math.Abs(graphLP[b][j]-float64(got[j])))
					worstRef = math.Max(worstRef, math.Abs(refLP[b][j]-base[b][j]))
					moved = math.Max(moved, math.Abs(want[b][j]-base[b][j]))
				}
			}
			t.Logf("merged vs PyTorch %.3g; unmerged graph vs merged %.3g; reference (adapters off) vs PyTorch base %.3g; the adapter moves log-probs by up to %.3g", worst, worstGraph, worstRef, moved)
			if worst > 1e-4 || worstGraph > 1e-5 || worstRef > 1e-4 {
				t.Fatalf("merged %.3g (1e-4), graph %.3g (1e-5), reference %.3g (1e-4)", worst, worstGraph, worstRef)
			}
			if moved < 1e-2 {
				t.Fatalf("the adapter moves log-probs by only %.3g: the test would not see a missing adapter", moved)
			}
		})
	}
}

func derefSeqs(ss []*core.Sequence) []core.Sequence {
	out := make([]core.Sequence, len(ss))
	for i, s := range ss {
		out[i] = *s
	}
	return out
}

// torchLogProbsArgs is torchLogProbs with extra hf_ref.py arguments.
func torchLogProbsArgs(t *testing.T, dir string, tokens, targets [][]int32, args ...string) [][]float64 {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"tokens": tokens, "targets": targets})
	batch := filepath.Join(t.TempDir(), "batch.json")
	if err := os.WriteFile(batch, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/usr/bin/python3", append([]string{filepath.Join("testdata", "hf_ref.py"), dir, batch}, args...)...)
	cmd.Env = append(os.Environ(), "OMP_NUM_THREADS=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hf_ref.py: %v\n%s", err, out)
	}
	var r struct{ Logprobs [][]float64 }
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	return r.Logprobs
}

// One LoRA actor step's loss and gradient norm (over the adapters only)
// agree with PyTorch autograd with the base weights frozen; the step
// leaves the base weights bit-identical, creates Adam state for the
// adapters only, and changes the policy.
func TestLoRAActorStepMatchesTorch(t *testing.T) {
	needTorch(t)
	for _, name := range slices.Sorted(maps.Keys(testLoRA)) {
		t.Run(name, func(t *testing.T) {
			dir, c := writeTinyHF(t, name, safetensors.F32, 31)
			adir := writeRandomAdapter(t, c, testLoRA[name], 5)
			ad, err := peft.Read(adir)
			if err != nil {
				t.Fatal(err)
			}
			set, err := safetensors.OpenDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer set.Close()
			pc := HFModelConfig(c, 48)
			lc := testLoRA[name]
			pc.LoRA = &lc
			b, err := New(Options{Engine: "cpu", Policy: pc, Seed: 1, ActorLR: 1e-3, PAD: 0, EOS: 2, HFWeights: set, Adapter: ad})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			before := hfValues(t, b.policy)
			for v := range b.policy.ctx.IterVariables() {
				if strings.HasPrefix(v.Scope(), "/adam") && strings.Contains(v.Scope(), "/"+hfScope+"/") {
					t.Fatalf("Adam state for a frozen weight: %s", v.ScopeAndName())
				}
			}
			rng := rand.New(rand.NewPCG(7, 8))
			r := &core.Rollout{}
			step := map[string]any{"clip_low": 0.2, "clip_high": 0.28}
			var prompts, responses [][]int32
			var olds, advs [][]float64
			for i := range 4 {
				p := randTokens(rng, 1, 3+i, c.Vocab)[0]
				resp := randTokens(rng, 1, 6-i, c.Vocab)[0]
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
			step["prompts"], step["responses"], step["old_logprobs"], step["advantages"] = prompts, responses, olds, advs
			lpBefore, _, _ := b.ScoreLogProbs([]*core.Sequence{&r.Seqs[0]}, 1)
			m, err := b.UpdateActor(r, core.ActorUpdate{Epochs: 1, Minibatches: 1, ClipLow: 0.2, ClipHigh: 0.28, Temperature: 1})
			if err != nil {
				t.Fatal(err)
			}
			js, _ := json.Marshal(step)
			path := filepath.Join(t.TempDir(), "step.json")
			if err := os.WriteFile(path, js, 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("/usr/bin/python3", filepath.Join("testdata", "hf_ref.py"), dir, path, "--train", "--adapter="+adir)
			cmd.Env = append(os.Environ(), "OMP_NUM_THREADS=1")
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("hf_ref.py --train: %v", err)
			}
			var want struct {
				Loss     float64 `json:"loss"`
				GradNorm float64 `json:"grad_norm"`
			}
			if err := json.Unmarshal(out, &want); err != nil {
				t.Fatal(err)
			}
			t.Logf("loss %.7g vs PyTorch %.7g; adapter grad norm %.7g vs %.7g", m["actor/loss"], want.Loss, m["actor/grad_norm"], want.GradNorm)
			if math.Abs(m["actor/loss"]-want.Loss) > 1e-5 || math.Abs(m["actor/grad_norm"]/want.GradNorm-1) > 1e-4 {
				t.Fatalf("loss %v vs %v, grad norm %v vs %v", m["actor/loss"], want.Loss, m["actor/grad_norm"], want.GradNorm)
			}
			after := hfValues(t, b.policy)
			for k, v := range before {
				if !slices.Equal(v, after[k]) {
					t.Fatalf("frozen weight %s changed", k)
				}
			}
			lpAfter, _, _ := b.ScoreLogProbs([]*core.Sequence{&r.Seqs[0]}, 1)
			if slices.Equal(lpBefore[0], lpAfter[0]) {
				t.Fatal("the update left the policy unchanged")
			}
		})
	}
}

// hfValues copies a net's Hugging Face weights.
func hfValues(t *testing.T, n *net) map[string][]float32 {
	t.Helper()
	out := map[string][]float32{}
	for v := range n.ctx.IterVariables() {
		if v.Scope() != "/"+hfScope {
			continue
		}
		val, err := v.Value()
		if err != nil {
			t.Fatal(err)
		}
		out[v.Name()] = tensors.MustCopyFlatData[float32](val)
	}
	return out
}
