package xla

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
	"github.com/gomlx/gomlx/ml/model"

	"github.com/cde-rl/cde/backends/xla/hf"
	"github.com/cde-rl/cde/backends/xla/safetensors"
	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/engines/cpu/gemm"
	"github.com/cde-rl/cde/tasks"
	"github.com/cde-rl/cde/trainer"
)

// Bit-identical results on every kernel path and thread count.
//
// TestKernelPathsBitIdentical runs TestKernelPathsChild in a child process
// (this test binary again) once per kernel path of this CPU
// (gemm.Paths(): avx512, avx2, go, whichever it has; "go" is everywhere,
// so an AVX2 host compares at least two paths, and every host compares
// thread counts) and per GOMAXPROCS in
// kernelPathProcs, with CDE_CPU_KERNEL and GOMAXPROCS set in the child's
// environment. The child computes, on the "cpu" engine and from fixed
// seeds, for the default model (the built-in defaults' sizes and task
// vocabulary, with the shipped base policy's weights) and for a tiny
// random Qwen3: the forward (full logits and final hidden states, scored
// log-probs and entropies at two temperatures, the critic's values, and
// seeded KV-cache generations of every prompt and of one prompt alone:
// tokens, log-probs, entropies), the backward (the actor's gradients, and
// the default model's critic's, read from the micro-batch accumulators of
// a micro-batched update), and one fused update as training makes it
// (metrics, then every weight and Adam moment after the step: the actor,
// and the default model's critic). It hashes every output (SHA-256 over
// the little-endian bits: float32 tensors as float32, the backend's
// float64 results as float64, tokens as int32) and writes the named
// hashes to the file named by kernelHashesEnv. The parent compares every
// run with the reference (the first path at GOMAXPROCS 1) and names, for
// each run that differs, the first differing output. The go path is the
// slow one: about 8 s a GOMAXPROCS value of the test's 40 s on an idle
// 2-core machine.
//
//	go test ./backends/xla -run '^TestKernelPathsBitIdentical$' -v

// kernelHashesEnv marks the child process and names the JSON file it
// writes its hashes to.
const kernelHashesEnv = "CDE_TEST_KERNEL_HASHES"

// kernelPathProcs are the GOMAXPROCS values each path runs at: one
// thread, this machine's two cores, an odd count that splits work
// unevenly, and more threads than cores.
var kernelPathProcs = []int{1, 2, 3, 8}

// kernelHash is one output's hash.
type kernelHash struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
	N      int    `json:"n"` // values hashed
}

// kernelReport is what a child writes.
type kernelReport struct {
	Path    string       `json:"path"`    // gemm.Path() in the child
	Procs   int          `json:"procs"`   // runtime.GOMAXPROCS(0) in the child
	Engines []string     `json:"engines"` // the backends' engine descriptions
	Outputs []kernelHash `json:"outputs"`
}

func TestKernelPathsBitIdentical(t *testing.T) {
	paths := gemm.Paths()
	if len(paths) == 0 || paths[len(paths)-1] != gemm.PathGo {
		t.Fatalf("gemm.Paths() = %v: want \"go\" last (a CPU without AVX2 has only \"go\": its runs still compare thread counts)", paths)
	}
	type result struct {
		path  string
		procs int
		rep   kernelReport
	}
	var runs []result
	dir := t.TempDir()
	start := time.Now()
	for _, p := range paths {
		for _, procs := range kernelPathProcs {
			out := filepath.Join(dir, fmt.Sprintf("%s-%d.json", p, procs))
			cmd := exec.Command(os.Args[0], "-test.run", "^TestKernelPathsChild$", "-test.count=1", "-test.timeout=5m")
			cmd.Env = append(os.Environ(), gemm.KernelEnv+"="+p, "GOMAXPROCS="+strconv.Itoa(procs), kernelHashesEnv+"="+out)
			began := time.Now()
			log, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child %s=%s GOMAXPROCS=%d: %v\n%s", gemm.KernelEnv, p, procs, err, log)
			}
			data, err := os.ReadFile(out)
			if err != nil {
				t.Fatalf("child %s=%s GOMAXPROCS=%d wrote no hashes (%v); its output:\n%s", gemm.KernelEnv, p, procs, err, log)
			}
			var rep kernelReport
			if err := json.Unmarshal(data, &rep); err != nil {
				t.Fatalf("child %s=%s GOMAXPROCS=%d: %v", gemm.KernelEnv, p, procs, err)
			}
			if rep.Path != p || rep.Procs != procs {
				t.Fatalf("child asked for path %s at GOMAXPROCS %d ran path %s at GOMAXPROCS %d", p, procs, rep.Path, rep.Procs)
			}
			t.Logf("path %-6s GOMAXPROCS %d: %d outputs in %.1f s (%s)", p, procs, len(rep.Outputs), time.Since(began).Seconds(), strings.Join(rep.Engines, "; "))
			runs = append(runs, result{p, procs, rep})
		}
	}
	t.Logf("%d runs in %.1f s", len(runs), time.Since(start).Seconds())
	ref := runs[0]
	if len(ref.rep.Outputs) == 0 {
		t.Fatal("the reference run hashed no outputs")
	}
	for _, r := range runs[1:] {
		a, b := ref.rep.Outputs, r.rep.Outputs
		names := func(hs []kernelHash) []string {
			out := make([]string, len(hs))
			for i, h := range hs {
				out[i] = h.Name
			}
			return out
		}
		if !slices.Equal(names(a), names(b)) {
			t.Errorf("path %s GOMAXPROCS %d: outputs %v, the reference (path %s GOMAXPROCS %d) has %v", r.path, r.procs, names(b), ref.path, ref.procs, names(a))
			continue
		}
		var differ []string
		for i := range a {
			if a[i] != b[i] {
				differ = append(differ, a[i].Name)
			}
		}
		if len(differ) == 0 {
			t.Logf("path %-6s GOMAXPROCS %d: all %d outputs bit-identical to path %s GOMAXPROCS %d", r.path, r.procs, len(a), ref.path, ref.procs)
			continue
		}
		t.Errorf("path %s GOMAXPROCS %d: %s differs from path %s GOMAXPROCS %d (the first of %d of %d outputs that differ; the others: %s)",
			r.path, r.procs, differ[0], ref.path, ref.procs, len(differ), len(a), summarize(differ[1:], 6))
	}
}

// summarize lists at most n names and how many more there are.
func summarize(names []string, n int) string {
	if len(names) == 0 {
		return "none"
	}
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:n], ", ") + fmt.Sprintf(" and %d more", len(names)-n)
}

// TestKernelPathsChild is TestKernelPathsBitIdentical's child process.
func TestKernelPathsChild(t *testing.T) {
	out := os.Getenv(kernelHashesEnv)
	if out == "" {
		t.Skip("a child of TestKernelPathsBitIdentical, which sets " + kernelHashesEnv)
	}
	if want := os.Getenv(gemm.KernelEnv); gemm.Path() != want {
		t.Fatalf("%s=%s but gemm.Path() is %s", gemm.KernelEnv, want, gemm.Path())
	}
	h := &kernelHasher{}
	rep := kernelReport{Path: gemm.Path(), Procs: runtime.GOMAXPROCS(0)}
	for _, c := range []kernelCase{defaultModelCase(t), tinyQwen3Case(t)} {
		began := time.Now()
		rep.Engines = append(rep.Engines, c.name+": "+kernelCaseOutputs(t, h, c))
		t.Logf("%s: %.1f s", c.name, time.Since(began).Seconds())
	}
	rep.Outputs = h.out
	data, err := json.MarshalIndent(rep, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// kernelHasher collects named hashes in order.
type kernelHasher struct{ out []kernelHash }

func (h *kernelHasher) add(name string, n int, write func(hash.Hash)) {
	s := sha256.New()
	write(s)
	h.out = append(h.out, kernelHash{Name: name, SHA256: hex.EncodeToString(s.Sum(nil)), N: n})
}

func (h *kernelHasher) f32(name string, x []float32) {
	h.add(name, len(x), func(s hash.Hash) {
		buf := make([]byte, 4*len(x))
		for i, v := range x {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
		}
		s.Write(buf)
	})
}

// f64 hashes ragged rows: each row's length, then its values' bits.
func (h *kernelHasher) f64(name string, rows [][]float64) {
	n := 0
	h.add(name, 0, func(s hash.Hash) {
		var b [8]byte
		for _, r := range rows {
			binary.LittleEndian.PutUint64(b[:], uint64(len(r)))
			s.Write(b[:])
			for _, v := range r {
				binary.LittleEndian.PutUint64(b[:], math.Float64bits(v))
				s.Write(b[:])
			}
			n += len(r)
		}
	})
	h.out[len(h.out)-1].N = n
}

func (h *kernelHasher) i32(name string, rows [][]int32) {
	n := 0
	h.add(name, 0, func(s hash.Hash) {
		var b [4]byte
		for _, r := range rows {
			binary.LittleEndian.PutUint32(b[:], uint32(len(r)))
			s.Write(b[:])
			for _, v := range r {
				binary.LittleEndian.PutUint32(b[:], uint32(v))
				s.Write(b[:])
			}
			n += len(r)
		}
	})
	h.out[len(h.out)-1].N = n
}

// metrics hashes each metric of an update on its own, in sorted order.
func (h *kernelHasher) metrics(name string, m map[string]float64) {
	for _, k := range sortedKeys(m) {
		h.f64(name+"/"+k, [][]float64{{m[k]}})
	}
}

// vars hashes each variable of a snapshot (weights and Adam moments).
func (h *kernelHasher) vars(name string, ck checkpoint) {
	for _, k := range sortedKeys(ck.Vars) {
		h.f32(name+k, ck.Vars[k].Data)
	}
}

// kernelCase is one model of the child: how to build a fresh backend on
// the "cpu" engine (with a critic), and the batch it runs.
type kernelCase struct {
	name               string
	newBackend         func(t *testing.T) *Backend
	prompts, responses [][]int32
	genTokens          int  // the batched generation's MaxTokens
	trainCritic        bool // the critic's gradients and update too (else its forward only)
}

// defaultModelCase is the model `cde-run train` trains by default: the
// built-in config's sizes, the default task's vocabulary, and the shipped
// base policy's weights (model.checkpoint: auto finds it), with real
// prompts and worked solutions of the default task.
func defaultModelCase(t *testing.T) kernelCase {
	cfg, err := trainer.LoadConfig(trainer.LoadOptions{Env: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	task, err := tasks.New(core.NewParams("task", cfg.Task))
	if err != nil {
		t.Fatal(err)
	}
	tok := task.Tokenizer()
	mc := ModelConfig{Vocab: tok.VocabSize(), Layers: cfg.Model.Layers, DModel: cfg.Model.DModel,
		Heads: cfg.Model.Heads, FF: cfg.Model.FF, MaxLen: cfg.Model.MaxLen}
	opts := Options{Engine: "cpu", Policy: mc, ValueHeads: 2, Seed: cfg.Seed, ActorLR: cfg.Train.ActorLR,
		CriticLR: cfg.Train.CriticLR, MaxGradNorm: cfg.Train.MaxGradNorm, PAD: tok.PAD(), EOS: tok.EOS()}
	// The shipped base whose sizes are the defaults'; random weights from
	// the seed if none is (the test compares paths, not the base).
	bases, _ := filepath.Glob(filepath.Join("..", "..", "assets", "base", "*", "policy.gob"))
	base := ""
	for _, p := range bases {
		var ck checkpoint
		if readGob(p, &ck) == nil && ck.Config.Vocab == mc.Vocab && ck.Config.Layers == mc.Layers && ck.Config.DModel == mc.DModel &&
			ck.Config.Heads == mc.Heads && ck.Config.FF == mc.FF && ck.Config.MaxLen == mc.MaxLen && ck.Config.HF == nil {
			base = filepath.Dir(p)
			break
		}
	}
	rng := rand.New(rand.NewPCG(21, 22))
	// 10 sequences: B x T > 256 rows, so weight gradients sum over more
	// than one depth block.
	c := kernelCase{name: "default", genTokens: 24, trainCritic: true, newBackend: func(t *testing.T) *Backend {
		b, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		if base != "" {
			if err := b.Load(base); err != nil {
				t.Fatal(err)
			}
		}
		return b
	}}
	for _, p := range task.SampleTrain(rng, 10) {
		prompt := core.EncodePrompt(tok, p.Prompt)
		resp := append(tok.Encode(p.Solution), tok.EOS())
		resp = resp[:min(len(resp), mc.MaxLen-len(prompt), cfg.Rollout.MaxResponseTokens)]
		c.prompts, c.responses = append(c.prompts, prompt), append(c.responses, resp)
	}
	if base == "" {
		c.name = "default(random weights)"
	}
	return c
}

// kernelQwen3Config is a tiny Qwen3 (GQA, q/k norms, RoPE, SwiGLU, tied
// embeddings, and Qwen3's head_dim of 128, so heads x head_dim != hidden)
// whose products are big enough to be split across threads and to reach
// every kind of product: widths that are multiples of 32, one (176) that
// is a multiple of 16 only, an odd vocabulary, decode-step attention
// products over a long cache (batched, one row, cache x head_dim above
// the engine's small-product bound) and weight gradients summed over
// more than one depth block (B x T > 256 rows).
const kernelQwen3Config = `{"architectures": ["Qwen3ForCausalLM"], "vocab_size": 203, "hidden_size": 64, "intermediate_size": 176, "head_dim": 128,
	"num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "rms_norm_eps": 1e-6,
	"max_position_embeddings": 128, "rope_theta": 1000000.0, "tie_word_embeddings": true, "eos_token_id": 2}`

// tinyQwen3Case is a random tiny Qwen3 checkpoint (BF16, as Hugging Face
// checkpoints are) with random prompts and responses.
func tinyQwen3Case(t *testing.T) kernelCase {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(kernelQwen3Config), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := hf.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(23, 24))
	var ts []safetensors.Tensor
	shapes := hfParamShapes(c, true)
	for _, n := range sortedKeys(shapes) {
		size := 1
		for _, d := range shapes[n] {
			size *= d
		}
		v := make([]float32, size)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * 0.1)
			if len(shapes[n]) == 1 && strings.HasSuffix(n, ".weight") {
				v[i] += 1 // norm gains near 1
			}
		}
		ts = append(ts, safetensors.BF16Tensor(n, shapes[n], v))
	}
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), ts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { set.Close() })
	kc := kernelCase{name: "qwen3", genTokens: 56, newBackend: func(t *testing.T) *Backend {
		b, err := New(Options{Engine: "cpu", Policy: HFModelConfig(c, 128), ValueHeads: 2, Seed: 1, ActorLR: 1e-3, CriticLR: 1e-3,
			PAD: 0, EOS: 2, HFWeights: set})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}}
	for i := range 8 {
		p, r := randTokens(rng, 1, 3+i, c.Vocab)[0], randTokens(rng, 1, 30-2*i, c.Vocab)[0]
		for j := range r {
			if r[j] == 2 {
				r[j] = 3 // EOS only at the end
			}
		}
		if i%2 == 0 {
			r[len(r)-1] = 2
		}
		kc.prompts, kc.responses = append(kc.prompts, p), append(kc.responses, r)
	}
	return kc
}

// kernelCaseOutputs hashes case c's forward, backward and update outputs
// under names prefixed with c.name, and returns the engine's description.
func kernelCaseOutputs(t *testing.T, h *kernelHasher, c kernelCase) string {
	b := c.newBackend(t)
	seqs := make([]core.Sequence, len(c.prompts))
	for i := range seqs {
		seqs[i] = core.Sequence{Group: i / 2, Prompt: c.prompts[i], Response: c.responses[i]}
	}
	ptr := seqPtrs(seqs)
	// Forward. (The critic's trunk has the policy's shapes; its values
	// come from ScoreValues below.)
	logits, hidden := fullNetOutputs(t, b, b.policy, ptr)
	h.f32(c.name+"/forward/policy/logits", logits)
	h.f32(c.name+"/forward/policy/hidden", hidden)
	var lp1 [][]float64
	for _, temp := range []float64{1, 0.7} {
		lps, ents, err := b.ScoreLogProbs(ptr, temp)
		if err != nil {
			t.Fatal(err)
		}
		if temp == 1 {
			lp1 = lps
		}
		h.f64(fmt.Sprintf("%s/forward/score/logprobs T=%v", c.name, temp), lps)
		h.f64(fmt.Sprintf("%s/forward/score/entropies T=%v", c.name, temp), ents)
	}
	vr := &core.Rollout{Seqs: cloneSeqs(seqs), ValueHeads: b.critic.cfg.ValueK}
	if err := b.ScoreValues(vr); err != nil {
		t.Fatal(err)
	}
	var values [][]float64
	for _, s := range vr.Seqs {
		values = append(values, s.Values)
	}
	h.f64(c.name+"/forward/score/values", values)
	// Seeded sampling with the KV cache: every prompt at once, and one
	// prompt alone (one-row products).
	for _, g := range []struct {
		name string
		req  core.GenerateRequest
	}{
		{"generate", core.GenerateRequest{Prompts: c.prompts, Temperature: 1, MaxTokens: c.genTokens, Seed: 5}},
		{"generate one", core.GenerateRequest{Prompts: c.prompts[:1], Temperature: 0.7, MaxTokens: 16, Seed: 6}},
	} {
		gens, err := b.Generate(g.req)
		if err != nil {
			t.Fatal(err)
		}
		var toks [][]int32
		var glp, gent [][]float64
		for _, g := range gens {
			toks, glp, gent = append(toks, g.Tokens), append(glp, g.LogProbs), append(gent, g.Entropies)
		}
		h.i32(c.name+"/forward/"+g.name+"/tokens", toks)
		h.f64(c.name+"/forward/"+g.name+"/logprobs", glp)
		h.f64(c.name+"/forward/"+g.name+"/entropies", gent)
	}

	// The training batch. Its old log-probs are the policy's own, rounded
	// to 1/64 (so a last-bit difference of this path's forward seldom
	// reaches the update's inputs, and the update is compared on its own),
	// plus noise so ratios differ from 1 and both clip sides fire.
	rng := rand.New(rand.NewPCG(31, 32))
	K := b.critic.cfg.ValueK
	for i := range seqs {
		s := &seqs[i]
		adv := rng.NormFloat64()
		for j := range s.Response {
			s.LogProbs = append(s.LogProbs, math.Round(lp1[i][j]*64)/64+0.2*rng.NormFloat64())
			s.Advantages = append(s.Advantages, adv)
			s.Returns = append(s.Returns, 2*rng.Float64()-1)
			for range K {
				s.HeadMask = append(s.HeadMask, float64(rng.IntN(2)))
			}
		}
	}
	r := &core.Rollout{Seqs: seqs, ValueHeads: K}

	// Backward: the gradients a micro-batched update sums in its
	// accumulators (at the starting weights), with the entropy term in
	// the actor's gradient.
	bg := c.newBackend(t)
	if _, err := bg.UpdateActor(r, core.ActorUpdate{Epochs: 1, Minibatches: 1, ClipLow: 0.2, ClipHigh: 0.2, EntropyCoef: 0.01,
		Temperature: 1, MicroBatchSize: 3}); err != nil {
		t.Fatal(err)
	}
	type namedNet struct {
		name string
		n    *net
	}
	trained := []namedNet{{"actor", bg.policy}}
	if c.trainCritic {
		if _, err := bg.UpdateCritic(r, core.CriticUpdate{Epochs: 1, Minibatches: 1, MicroBatchSize: 3}); err != nil {
			t.Fatal(err)
		}
		trained = append(trained, namedNet{"critic", bg.critic})
	}
	for _, nn := range trained {
		grads := map[string][]float32{}
		for v := range nn.n.ctx.IterVariables() {
			if !isAccum(v) {
				continue
			}
			val, err := v.Value()
			if err != nil {
				t.Fatal(err)
			}
			grads[v.Path()] = tensors.MustCopyFlatData[float32](val)
		}
		if len(grads) == 0 {
			t.Fatalf("%s: the micro-batched %s update left no accumulators", c.name, nn.name)
		}
		for _, k := range sortedKeys(grads) {
			h.f32(c.name+"/backward/"+nn.name+k, grads[k])
		}
	}

	// One update as training makes it (fused; the default loss): metrics,
	// then every weight and Adam moment.
	bu := c.newBackend(t)
	ma, err := bu.UpdateActor(r, core.ActorUpdate{Epochs: 1, Minibatches: 1, ClipLow: 0.2, ClipHigh: 0.2, Temperature: 1})
	if err != nil {
		t.Fatal(err)
	}
	h.metrics(c.name+"/update/metrics", ma)
	if c.trainCritic {
		mc, err := bu.UpdateCritic(r, core.CriticUpdate{Epochs: 1, Minibatches: 1})
		if err != nil {
			t.Fatal(err)
		}
		h.metrics(c.name+"/update/metrics", mc)
	}
	snaps := snapshots(t, bu)
	h.vars(c.name+"/update/actor", snaps["policy"])
	if c.trainCritic {
		h.vars(c.name+"/update/critic", snaps["critic"])
	}
	return b.Engine()
}

// fullNetOutputs runs net n on seqs (laid out as the scorer does) and
// returns its full output [B,T,V] (logits; values [B,T,K] for a critic)
// and final hidden states [B,T,d], padding positions included.
func fullNetOutputs(t *testing.T, b *Backend, n *net, seqs []*core.Sequence) (out, hidden []float32) {
	t.Helper()
	bt, err := b.layout(seqs)
	if err != nil {
		t.Fatal(err)
	}
	e, err := model.NewExec(b.engine, n.ctx.Store(), func(ctx *model.Scope, in []*graph.Node) []*graph.Node {
		h := fullStates(ctx, n.arch, in[0])
		if n.cfg.ValueK > 0 {
			return []*graph.Node{valuesOf(ctx, h), h}
		}
		return []*graph.Node{n.arch.logits(ctx, h), h}
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := run(e, tensors.FromFlatDataAndDimensions(bt.tokens, bt.b, bt.t))
	if err != nil {
		t.Fatal(err)
	}
	out, hidden = tensors.MustCopyFlatData[float32](res[0]), tensors.MustCopyFlatData[float32](res[1])
	for _, r := range res {
		r.FinalizeAll()
	}
	return out, hidden
}
