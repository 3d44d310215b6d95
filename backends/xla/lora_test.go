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

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/gomlx/core/tensors"

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
			be := newLoRABackend(t, dir, c, testLoRA[name], ad, 0)
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
			b := newLoRABackend(t, dir, c, testLoRA[name], ad, 0)
			before := hfValues(t, b.policy)
			for v := range b.policy.ctx.IterVariables() {
				if strings.HasPrefix(v.Scope(), "/adam") && strings.Contains(v.Scope(), "/"+hfScope+"/") {
					t.Fatalf("Adam state for a frozen weight: %s", v.Path())
				}
			}
			rng := rand.New(rand.NewPCG(7, 8))
			r, step := torchStepBatch(t, b, rng, c.Vocab)
			lpBefore, _, _ := b.ScoreLogProbs([]*core.Sequence{&r.Seqs[0]}, 1)
			m, err := b.UpdateActor(r, core.ActorUpdate{Epochs: 1, Minibatches: 1, ClipLow: 0.2, ClipHigh: 0.28, Temperature: 1})
			if err != nil {
				t.Fatal(err)
			}
			want := torchStep(t, dir, step, "--adapter="+adir)
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

// newLoRABackend builds a LoRA policy (and a K-head critic when k > 0) on
// a tiny checkpoint, its adapters from ad (nil: PEFT's initialisation).
func newLoRABackend(t *testing.T, dir string, c *hf.Config, lc peft.Config, ad *peft.Adapter, k int) *Backend {
	t.Helper()
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	pc := HFModelConfig(c, 32)
	pc.LoRA = &lc
	b, err := New(Options{Engine: "cpu", Policy: pc, ValueHeads: k, Seed: 3, ActorLR: 1e-2, CriticLR: 1e-2, PAD: 0, EOS: 2, HFWeights: set, Adapter: ad})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func loraRollout(c *hf.Config, k int) *core.Rollout {
	rng := rand.New(rand.NewPCG(3, 4))
	r := &core.Rollout{}
	for i := range 3 {
		p, resp := randTokens(rng, 1, 4, c.Vocab)[0], randTokens(rng, 1, 5, c.Vocab)[0]
		lp, adv := make([]float64, 5), make([]float64, 5)
		mask := slices.Repeat([]float64{1}, 5*max(k, 1))
		for j := range lp {
			lp[j], adv[j] = -4+rng.NormFloat64(), float64(i-1)
		}
		r.Seqs = append(r.Seqs, core.Sequence{Prompt: p, Response: resp, LogProbs: lp, Advantages: adv, Returns: adv, HeadMask: mask})
	}
	return r
}

// A fresh LoRA policy (PEFT's initialisation, B = 0) scores exactly as the
// base; after updates, a checkpoint holds the adapters and their Adam
// state only, and restores the policy bit for bit into a new backend
// built from the same base.
func TestLoRACheckpoint(t *testing.T) {
	dir, c := writeTinyHF(t, "qwen3", safetensors.F32, 21)
	lc := testLoRA["qwen3"]
	b := newLoRABackend(t, dir, c, lc, nil, 0)
	r := loraRollout(c, 0)
	seqs := []*core.Sequence{&r.Seqs[0], &r.Seqs[1], &r.Seqs[2]}
	start, _, err := b.ScoreLogProbs(seqs, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := b.ReferenceLogProbs(r, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range start {
		if !slices.Equal(start[i], ref[i]) {
			t.Fatalf("B = 0 at start, yet the policy differs from its base at sequence %d: %v vs %v", i, start[i], ref[i])
		}
	}
	for range 3 {
		if _, err := b.UpdateActor(r, core.ActorUpdate{Epochs: 1, Minibatches: 1, ClipLow: 0.2, ClipHigh: 0.2, Temperature: 1}); err != nil {
			t.Fatal(err)
		}
	}
	after, _, _ := b.ScoreLogProbs(seqs, 1)
	if slices.Equal(after[0], start[0]) {
		t.Fatal("three updates left the policy unchanged")
	}
	ck := t.TempDir()
	if err := b.Save(ck); err != nil {
		t.Fatal(err)
	}
	var saved checkpoint
	if err := readGob(filepath.Join(ck, "policy.gob"), &saved); err != nil {
		t.Fatal(err)
	}
	names, _, _ := loraModules(b.policy.cfg)
	if want := 3 * 2 * len(names); len(saved.Vars) != want {
		t.Fatalf("policy.gob holds %d variables, want %d (A and B of %d modules, each with two Adam moments)", len(saved.Vars), want, len(names))
	}
	for k := range saved.Vars {
		if strings.Contains(k, "/"+hfScope+"/") || strings.HasPrefix(k, "/"+hfScope) {
			t.Fatalf("policy.gob holds the frozen weight %s", k)
		}
	}
	if fileExists(filepath.Join(ck, "reference.gob")) {
		t.Fatal("a LoRA run saved a reference copy")
	}
	b2 := newLoRABackend(t, dir, c, lc, nil, 0)
	if err := b2.Load(ck); err != nil {
		t.Fatal(err)
	}
	again, _, _ := b2.ScoreLogProbs(seqs, 1)
	for i := range after {
		if !slices.Equal(after[i], again[i]) {
			t.Fatalf("restored policy differs at sequence %d", i)
		}
	}
	// Another rank is refused.
	other := lc
	other.Rank = 5
	b3 := newLoRABackend(t, dir, c, other, nil, 0)
	if err := b3.Load(ck); err == nil || !strings.Contains(err.Error(), "differ from the configured") {
		t.Fatalf("load into another rank: %v", err)
	}
}

// Export -> load round trips are exact: the exported PEFT adapter, as a
// new run's model.adapter, gives bit-identical log-probs; the merged
// export (ExportHF) scores bit-identically to the base with the adapter
// merged at load (score --adapter); a policy without adapters refuses
// ExportAdapter.
func TestLoRAExportRoundTrip(t *testing.T) {
	dir, c := writeTinyHF(t, "llama", safetensors.F32, 23)
	lc := testLoRA["llama"]
	b := newLoRABackend(t, dir, c, lc, nil, 0)
	r := loraRollout(c, 0)
	for range 2 {
		if _, err := b.UpdateActor(r, core.ActorUpdate{Epochs: 1, Minibatches: 1, ClipLow: 0.2, ClipHigh: 0.2, Temperature: 1}); err != nil {
			t.Fatal(err)
		}
	}
	seqs := []*core.Sequence{&r.Seqs[0], &r.Seqs[1], &r.Seqs[2]}
	want, _, _ := b.ScoreLogProbs(seqs, 1)
	out := filepath.Join(t.TempDir(), "adapter")
	if err := b.ExportAdapter(out, "tiny-llama"); err != nil {
		t.Fatal(err)
	}
	if err := b.ExportAdapter(out, "tiny-llama"); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("export over an existing directory: %v", err)
	}
	ad, err := peft.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if ad.Config.BaseModel != "tiny-llama" || ad.Config.Rank != lc.Rank || ad.Config.Alpha != lc.Alpha {
		t.Fatalf("adapter config %+v", ad.Config)
	}
	b2 := newLoRABackend(t, dir, c, lc, ad, 0)
	got, _, _ := b2.ScoreLogProbs(seqs, 1)
	for i := range want {
		if !slices.Equal(want[i], got[i]) {
			t.Fatalf("model.adapter from the export: sequence %d differs: %v vs %v", i, got[i], want[i])
		}
	}
	merged := filepath.Join(t.TempDir(), "merged")
	if err := b.ExportHF(dir, merged, safetensors.F32); err != nil {
		t.Fatal(err)
	}
	mm, err := LoadHF(merged, "cpu", "")
	if err != nil {
		t.Fatal(err)
	}
	defer mm.Close()
	ma, err := LoadHFAdapter(dir, out, "cpu", "")
	if err != nil {
		t.Fatal(err)
	}
	defer ma.Close()
	for _, s := range seqs {
		seq := append(slices.Clone(s.Prompt), s.Response...)
		x, err := mm.LogProbs(seq, len(s.Prompt))
		if err != nil {
			t.Fatal(err)
		}
		y, err := ma.LogProbs(seq, len(s.Prompt))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(x, y) {
			t.Fatalf("merged export %v, base + adapter %v", x, y)
		}
	}
	// The merged export differs from the base (the adapters trained).
	base, _ := LoadHF(dir, "cpu", "")
	defer base.Close()
	s := seqs[0]
	seq := append(slices.Clone(s.Prompt), s.Response...)
	x, _ := base.LogProbs(seq, len(s.Prompt))
	y, _ := mm.LogProbs(seq, len(s.Prompt))
	if slices.Equal(x, y) {
		t.Fatal("the merged export equals the base")
	}
	set, _ := safetensors.OpenDir(dir)
	defer set.Close()
	plain, err := New(Options{Engine: "cpu", Policy: HFModelConfig(c, 32), Seed: 1, PAD: 0, EOS: 2, HFWeights: set})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := plain.ExportAdapter(filepath.Join(t.TempDir(), "a"), ""); err == nil || !strings.Contains(err.Error(), "no adapters") {
		t.Fatalf("ExportAdapter without adapters: %v", err)
	}
}

// A LoRA critic reads the policy's frozen trunk (the same tensors, no
// copy) and trains its own adapters and value head: its updates change
// its values and leave the policy and the shared weights as they were.
func TestLoRACritic(t *testing.T) {
	dir, c := writeTinyHF(t, "qwen2", safetensors.F32, 25)
	b := newLoRABackend(t, dir, c, testLoRA["qwen2"], nil, 2)
	shared := 0
	pol := map[string]*tensors.Tensor{}
	for v := range b.policy.ctx.IterVariables() {
		if v.Scope() == "/"+hfScope {
			pol[v.Name()], _ = v.Value()
		}
	}
	for v := range b.critic.ctx.IterVariables() {
		if v.Scope() == "/"+hfScope {
			val, _ := v.Value()
			if pol[v.Name()] != val {
				t.Fatalf("critic weight %s is a copy, not the policy's tensor", v.Name())
			}
			shared++
		}
	}
	if shared == 0 {
		t.Fatal("the critic has no Hugging Face weights")
	}
	var trainable []string
	for _, v := range b.critic.trainable() {
		trainable = append(trainable, v.Path())
	}
	names, _, _ := loraModules(b.critic.cfg)
	if len(trainable) != 2*len(names)+2 || !slices.Contains(trainable, "/value/w") {
		t.Fatalf("critic trains %v, want the adapters of %d modules and the value head", trainable, len(names))
	}
	r := loraRollout(c, 2)
	seqs := []*core.Sequence{&r.Seqs[0], &r.Seqs[1], &r.Seqs[2]}
	lp0, _, _ := b.ScoreLogProbs(seqs, 1)
	w0 := hfValues(t, b.policy)
	if err := b.ScoreValues(r); err != nil {
		t.Fatal(err)
	}
	v0 := r.Seqs[0].Values[0]
	for range 3 {
		if _, err := b.UpdateCritic(r, core.CriticUpdate{Epochs: 1, Minibatches: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.ScoreValues(r); err != nil {
		t.Fatal(err)
	}
	if r.Seqs[0].Values[0] == v0 {
		t.Fatal("critic updates left its values unchanged")
	}
	lp1, _, _ := b.ScoreLogProbs(seqs, 1)
	for i := range lp0 {
		if !slices.Equal(lp0[i], lp1[i]) {
			t.Fatal("critic updates changed the policy")
		}
	}
	w1 := hfValues(t, b.policy)
	for k := range w0 {
		if !slices.Equal(w0[k], w1[k]) {
			t.Fatalf("critic updates changed the shared weight %s", k)
		}
	}
}

// model.lora.base_dtype bfloat16 stores the frozen weights in bfloat16
// (the critic reading the same tensors) and changes nothing else: on a
// checkpoint stored in bfloat16, whose values the float32 run holds
// exactly, scoring, the KL reference, generation, actor and critic
// updates, values and the merged weights equal the float32 base's bit for
// bit, with and without model.recompute.
func TestLoRABF16Base(t *testing.T) {
	dir, c := writeTinyHF(t, "qwen3", safetensors.BF16, 27)
	lc := testLoRA["qwen3"]
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	for _, re := range []bool{false, true} {
		type result struct {
			lps, ref  [][]float64
			gens      []core.Generation
			metrics   []map[string]float64
			values    [][]float64
			merged    map[string][]byte
			after     [][]float64
			bf16Count int
		}
		run := func(bf16 bool) result {
			pc := HFModelConfig(c, 32)
			pc.LoRA, pc.Recompute, pc.BaseBF16 = &lc, re, bf16
			b, err := New(Options{Engine: "cpu", Policy: pc, ValueHeads: 2, Seed: 3, ActorLR: 1e-2, CriticLR: 1e-2, PAD: 0, EOS: 2, HFWeights: set})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			var res result
			for v := range b.policy.ctx.IterVariables() {
				if v.Scope() == "/"+hfScope && v.Shape().DType == dtypes.BFloat16 {
					res.bf16Count++
				}
			}
			r := loraRollout(c, 2)
			seqs := []*core.Sequence{&r.Seqs[0], &r.Seqs[1], &r.Seqs[2]}
			if res.lps, _, err = b.ScoreLogProbs(seqs, 1); err != nil {
				t.Fatal(err)
			}
			if res.ref, err = b.ReferenceLogProbs(r, 1); err != nil {
				t.Fatal(err)
			}
			if res.gens, err = b.Generate(core.GenerateRequest{Prompts: [][]int32{r.Seqs[0].Prompt, r.Seqs[1].Prompt}, Temperature: 1, MaxTokens: 6, Seed: 5}); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				m, err := b.UpdateActor(r, core.ActorUpdate{Epochs: 1, Minibatches: 1, ClipLow: 0.2, ClipHigh: 0.2, EntropyCoef: 0.01, KLCoef: 0.1, Temperature: 1})
				if err != nil {
					t.Fatal(err)
				}
				res.metrics = append(res.metrics, m)
			}
			m, err := b.UpdateCritic(r, core.CriticUpdate{Epochs: 1, Minibatches: 1})
			if err != nil {
				t.Fatal(err)
			}
			res.metrics = append(res.metrics, m)
			if err := b.ScoreValues(r); err != nil {
				t.Fatal(err)
			}
			for _, s := range r.Seqs {
				res.values = append(res.values, s.ValueRow(0))
			}
			ts, err := b.hfTensors(safetensors.F32)
			if err != nil {
				t.Fatal(err)
			}
			res.merged = map[string][]byte{}
			for _, x := range ts {
				res.merged[x.Name] = x.Data
			}
			res.after, _, _ = b.ScoreLogProbs(seqs, 1)
			return res
		}
		f32, b16 := run(false), run(true)
		if f32.bf16Count != 0 || b16.bf16Count != len(hfParamShapes(c, true)) {
			t.Fatalf("recompute %v: %d and %d bfloat16 base weights, want 0 and all %d", re, f32.bf16Count, b16.bf16Count, len(hfParamShapes(c, true)))
		}
		same := func(what string, a, b [][]float64) {
			t.Helper()
			for i := range a {
				if !slices.Equal(a[i], b[i]) {
					t.Fatalf("recompute %v: %s %d: %v float32 base, %v bfloat16 base", re, what, i, a[i], b[i])
				}
			}
		}
		same("log-probs", f32.lps, b16.lps)
		same("reference log-probs", f32.ref, b16.ref)
		same("values after the critic update", f32.values, b16.values)
		same("log-probs after the updates", f32.after, b16.after)
		for i := range f32.gens {
			if !slices.Equal(f32.gens[i].Tokens, b16.gens[i].Tokens) || !slices.Equal(f32.gens[i].LogProbs, b16.gens[i].LogProbs) {
				t.Fatalf("recompute %v: generation %d differs: %+v vs %+v", re, i, f32.gens[i], b16.gens[i])
			}
		}
		for i := range f32.metrics {
			if !maps.Equal(f32.metrics[i], b16.metrics[i]) {
				t.Fatalf("recompute %v: update %d metrics %v float32 base, %v bfloat16 base", re, i, f32.metrics[i], b16.metrics[i])
			}
		}
		if len(f32.merged) == 0 || !maps.EqualFunc(f32.merged, b16.merged, slices.Equal[[]byte]) {
			t.Fatalf("recompute %v: merged weights differ", re)
		}
		if f32.after[0][0] == f32.lps[0][0] {
			t.Fatalf("recompute %v: the updates left the policy unchanged", re)
		}
	}
}
