package session

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cde-rl/cde/backends/xla"
	"github.com/cde-rl/cde/backends/xla/hf"
	"github.com/cde-rl/cde/backends/xla/hftest"
	"github.com/cde-rl/cde/backends/xla/peft"
	"github.com/cde-rl/cde/backends/xla/safetensors"
	"github.com/cde-rl/cde/trainer"
)

// ParamCount equals the parameters the engine really makes: the
// non-optimiser variables of a saved policy.gob for cde's transformer, and
// the tensors of model.safetensors for a Hugging Face model.
func TestParamCount(t *testing.T) {
	for _, pc := range []xla.ModelConfig{
		{Vocab: 11, Layers: 1, DModel: 8, Heads: 2, MaxLen: 16},
		{Vocab: 101, Layers: 3, DModel: 16, Heads: 4, FF: 24, MaxLen: 40},
	} {
		b, err := xla.New(xla.Options{Engine: "go", Policy: pc, Seed: 1, PAD: 0, EOS: 2})
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := b.Save(dir); err != nil {
			t.Fatal(err)
		}
		b.Close()
		vars, err := xla.ReadSavedVariables(filepath.Join(dir, "policy.gob"))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for name, v := range vars {
			if !strings.HasPrefix(name, "/adam/") {
				n += len(v.Data)
			}
		}
		if got := ParamCount(pc); got != float64(n) {
			t.Errorf("%+v: ParamCount %v, the saved policy has %d", pc, got, n)
		}
	}

	dir := t.TempDir()
	if err := hftest.WriteTinyQwen3(dir, filepath.Join("..", "tokenizer", "testdata", "qwen3"), 2, 1); err != nil {
		t.Fatal(err)
	}
	hc, err := hf.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := safetensors.Open(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var n int64
	for _, name := range st.Names() {
		_, info, err := st.Raw(name)
		if err != nil {
			t.Fatal(err)
		}
		n += info.Elems()
	}
	if got := ParamCount(xla.HFModelConfig(hc, 64)); got != float64(n) {
		t.Errorf("tiny Qwen3: ParamCount %v, model.safetensors holds %d", got, n)
	}
}

// The estimate of a tiny config, term by term, worked out by hand.
func TestEstimateMemoryByHand(t *testing.T) {
	cfg, err := trainer.LoadConfig(trainer.LoadOptions{Env: []string{}, Sets: []string{
		"model.layers=1", "model.d_model=8", "model.heads=2", "model.max_len=16", "rollout.max_response_tokens=8",
		"train.prompts_per_step=2", "rollout.n=2"}})
	if err != nil {
		t.Fatal(err)
	}
	p := xla.ModelConfig{Vocab: 101, Layers: 1, DModel: 8, Heads: 2, MaxLen: 16}
	// V = 101, d = 8, ff = 32, T = 16, 2 heads, 1 layer, 4 rows.
	// params = V d + T d + (4 d^2 + 2 d ff + ff + d + 4 d) + 2 d + d V
	//        = 808 + 128 + (256 + 512 + 32 + 8 + 32) + 16 + 808 = 2600
	// state  = 16 x 2600 = 41,600
	// generation per row: KV 2*1*2*16*8*4 = 2048, prefill 16*(32+32)*4 +
	//   2*16*16*4 = 6144, logits 101*4*4 = 1616, batch 16*40 = 640: 10,448
	//   (4 rows: 41,792; 6 eval rows: 62,688)
	// training, 4 rows: 4*16*(1*(80+64)*4 + 1*2*16*4*2) + 4*16*101*4*3
	//   = 64*832 + 77,568 = 130,816
	e := EstimateMemory(cfg, p, 0, 6)
	// The cpu engine (backend.engine auto) keeps at most 128 MiB of idle
	// buffers: 134,217,728 bytes.
	// columns: 4 rows x 8 tokens x 8 bytes x 9 signals = 2,304.
	want := map[string]float64{"runtime": 64e6, "model state": 41600, "generation of a training batch": 41792,
		"training pass": 130816, "generation of an evaluation": 62688, "cpu engine's idle buffers": 134217728,
		"per-token columns of a step": 2304}
	for _, part := range append(append([]MemoryPart{}, e.Fixed...), e.Passes...) {
		if w, ok := want[part.Name]; !ok || part.Bytes != w {
			t.Errorf("%s: %v bytes, want %v", part.Name, part.Bytes, w)
		}
		delete(want, part.Name)
	}
	if len(want) > 0 {
		t.Errorf("missing terms: %v", want)
	}
	if e.Total() != 64e6+41600+134217728+2304+130816 || e.Largest().Name != "training pass" {
		t.Errorf("total %v, largest %s", e.Total(), e.Largest().Name)
	}
	// A critic doubles the state (plus its heads) and the training pass.
	c := EstimateMemory(cfg, p, 2, 6)
	if c.Fixed[1].Bytes != 41600+16*(2600+8*2) || c.Passes[1].Bytes != 2*130816 {
		t.Errorf("with a critic: state %v, training %v", c.Fixed[1].Bytes, c.Passes[1].Bytes)
	}
	// Two heads add 2K = 4 columns: 4 x 8 x 8 x 13 = 3,328.
	if last := c.Fixed[len(c.Fixed)-1]; last.Name != "per-token columns of a step" || last.Bytes != 3328 {
		t.Errorf("with a critic: %s %v, want the columns at 3328", last.Name, last.Bytes)
	}
	// A shared-memory plugin: the columns (2,304) and the token ids
	// (8 x 4 rows x 16) in its arena, 1.25 x 2,816 = 3,520, and an answer
	// region of 1.25 x 32 tokens x 8 x max(2, 0) = 640: each at least
	// 1 MiB, 2 MiB in all. A plugin on the messages has no region.
	cfg.Strategies = []map[string]any{{"plugin": "./p"}, {"plugin": "./q", "transport": "messages"}, {"name": "ppl"}}
	pl := EstimateMemory(cfg, p, 0, 6)
	if last := pl.Fixed[len(pl.Fixed)-1]; last.Name != "per-token columns of a step, in the plugins' shared memory" || last.Bytes != 2<<20 {
		t.Errorf("with a plugin: %s %v, want the shared memory at %d", last.Name, last.Bytes, 2<<20)
	}
	cfg.Strategies = nil
	// Another engine has no idle-buffer term; rollout.dtype bfloat16 adds
	// 2 bytes a parameter: 5,200.
	cfg.Backend.Engine = "xla:cuda"
	cfg.Rollout.DType = "bfloat16"
	b := EstimateMemory(cfg, p, 0, 6)
	if len(b.Fixed) != 4 || b.Fixed[2].Name != "bfloat16 copies of the weights" || b.Fixed[2].Bytes != 5200 {
		t.Errorf("xla:cuda, bfloat16 generation: fixed terms %v", b.Fixed)
	}
	cfg.Backend.Engine, cfg.Rollout.DType = "auto", "float32"
	// rollout.max_rows = 2 generates 2 of the 4 rows at a time: 2 x 10,448.
	cfg.Rollout.MaxRows = 2
	if g := EstimateMemory(cfg, p, 0, 6).Passes[0]; g.Bytes != 20896 {
		t.Errorf("with rollout.max_rows 2: %s %v bytes, want 20896", g.Name, g.Bytes)
	}
}

// A run over the limit is refused with the estimate and the keys named;
// CDE_MEMORY_LIMIT_GB sets the limit.
func TestCheckMemory(t *testing.T) {
	cfg, err := trainer.LoadConfig(trainer.LoadOptions{Env: []string{}, Sets: []string{"train.prompts_per_step=1000000", "rollout.n=64"}})
	if err != nil {
		t.Fatal(err)
	}
	e := EstimateMemory(cfg, xla.ModelConfig{Vocab: 101, Layers: 2, DModel: 64, Heads: 4, MaxLen: 64}, 0, 0)
	err = CheckMemory(e, 24e9, "this machine's memory")
	if err == nil || !strings.Contains(err.Error(), "a micro-batch of 64000000 rows: train.prompts_per_step x rollout.n = 64000000") ||
		!strings.Contains(err.Error(), "more than 24 GB") || !strings.Contains(err.Error(), MemoryLimitEnv) {
		t.Fatalf("err = %v", err)
	}
	if CheckMemory(e, 0, "no check") != nil || CheckMemory(e, e.Total(), "exactly") != nil {
		t.Fatal("no limit, or a limit equal to the estimate, must pass")
	}
	for _, c := range []struct {
		env  string
		want float64
		bad  bool
	}{{"", 0.9 * MachineMemory(), false}, {"0", 0.9 * MachineMemory(), false}, {"-1", 0, false}, {"2.5", 2.5e9, false}, {"x", 0, true}, {"-2", 0, true}} {
		t.Setenv(MemoryLimitEnv, c.env)
		got, _, err := MemoryLimit()
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("%s=%q: %v, %v; want %v (error %v)", MemoryLimitEnv, c.env, got, err, c.want, c.bad)
		}
	}
	if m := MachineMemory(); m <= 0 || math.IsInf(m, 0) {
		t.Errorf("MachineMemory = %v on Linux", m)
	}
}

// LoRAParamCount equals the adapters the backend makes, and the LoRA
// state term is worked out by hand: the frozen weights once, 16 bytes per
// adapter parameter, the critic's adapters and heads, no reference copy.
func TestEstimateMemoryLoRA(t *testing.T) {
	dir := t.TempDir()
	if err := hftest.WriteTinyQwen3(dir, filepath.Join("..", "tokenizer", "testdata", "qwen3"), 2, 1); err != nil {
		t.Fatal(err)
	}
	hc, err := hf.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	p := xla.HFModelConfig(hc, 64)
	p.LoRA = &peft.Config{Rank: 3, Alpha: 6, Targets: []string{"q_proj", "o_proj", "up_proj"}}
	b, err := xla.New(xla.Options{Engine: "cpu", Policy: p, Seed: 1, PAD: 0, EOS: 1, HFWeights: set})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "a")
	if err := b.ExportAdapter(out, ""); err != nil {
		t.Fatal(err)
	}
	b.Close()
	ad, err := peft.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for m := range ad.A {
		n += len(ad.A[m]) + len(ad.B[m])
	}
	// By hand: r (in + out) per module per layer, with d = hidden,
	// q = heads x head_dim, ff = intermediate.
	d, q, ff := hc.Hidden, hc.Heads*hc.HeadDim, hc.Intermediate
	byHand := hc.Layers * 3 * ((d + q) + (q + d) + (d + ff))
	if got := LoRAParamCount(p); got != float64(n) || n != byHand {
		t.Fatalf("LoRAParamCount %v, the backend made %d, by hand %d", got, n, byHand)
	}
	cfg, err := trainer.LoadConfig(trainer.LoadOptions{Env: []string{}, Sets: []string{"model.hf=" + dir, "model.lora.rank=3", "train.kl_coef=0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	params := ParamCount(p)
	e := EstimateMemory(cfg, p, 0, 0)
	if want := 4*params + 16*float64(n); e.Fixed[1].Bytes != want {
		t.Errorf("LoRA policy state %v, want %v", e.Fixed[1].Bytes, want)
	}
	c := EstimateMemory(cfg, p, 2, 0)
	if want := 4*params + 16*float64(n) + 16*(float64(n)+float64(d*2)); c.Fixed[1].Bytes != want {
		t.Errorf("LoRA policy and critic state %v, want %v", c.Fixed[1].Bytes, want)
	}
	p.BaseBF16 = true // model.lora.base_dtype: bfloat16
	if want := 2*params + 16*float64(n); EstimateMemory(cfg, p, 0, 0).Fixed[1].Bytes != want {
		t.Errorf("LoRA policy state with a bfloat16 base %v, want %v", EstimateMemory(cfg, p, 0, 0).Fixed[1].Bytes, want)
	}
	full := EstimateMemory(cfg, xla.HFModelConfig(hc, 64), 2, 0)
	if full.Fixed[1].Bytes != 16*params+16*(params+float64(d*2))+4*params {
		t.Errorf("full fine-tuning state %v", full.Fixed[1].Bytes)
	}
}

// With rollout.servers the training batch is generated elsewhere: no
// generation term for it (its rescoring goes in training-pass parts).
func TestEstimateMemoryServers(t *testing.T) {
	cfg, err := trainer.LoadConfig(trainer.LoadOptions{Env: []string{}, Sets: []string{"rollout.servers=[http://127.0.0.1:8000]", "rollout.weight_sync.dir=sync"}})
	if err != nil {
		t.Fatal(err)
	}
	p := xla.ModelConfig{Vocab: 101, Layers: 2, DModel: 64, Heads: 4, MaxLen: 64}
	for _, part := range EstimateMemory(cfg, p, 0, 0).Passes {
		if part.Name == "generation of a training batch" {
			t.Fatalf("with rollout.servers: %+v", part)
		}
	}
	local, _ := trainer.LoadConfig(trainer.LoadOptions{Env: []string{}})
	if e := EstimateMemory(local, p, 0, 0); e.Passes[0].Name != "generation of a training batch" {
		t.Fatalf("in-process generation: passes %+v", e.Passes)
	}
}

// model.recompute keeps every block's input and one block's activations,
// and the head's logits for one chunk of positions: the training term of
// the hand-worked config, with 2 layers instead of 1.
func TestEstimateMemoryRecompute(t *testing.T) {
	cfg, err := trainer.LoadConfig(trainer.LoadOptions{Env: []string{}, Sets: []string{
		"model.layers=2", "model.d_model=8", "model.heads=2", "model.max_len=16", "rollout.max_response_tokens=8",
		"train.prompts_per_step=2", "rollout.n=2"}})
	if err != nil {
		t.Fatal(err)
	}
	p := xla.ModelConfig{Vocab: 101, Layers: 2, DModel: 8, Heads: 2, MaxLen: 16}
	// Without: 4*16*(2*(80+64)*4 + 2*2*16*4*2) + 4*16*101*4*3 = 64*1664 + 77,568 = 184,064.
	// With: 4*16*(2*8*4 + (80+64)*4 + 2*16*4*2) + 77,568 = 64*896 + 77,568 = 134,912.
	plain := EstimateMemory(cfg, p, 0, 0)
	p.Recompute = true
	re := EstimateMemory(cfg, p, 0, 0)
	if plain.Passes[1].Bytes != 184064 || re.Passes[1].Bytes != 134912 {
		t.Fatalf("training pass %v without recompute (want 184064), %v with (want 134912)", plain.Passes[1].Bytes, re.Passes[1].Bytes)
	}
	// The head's logits terms for one chunk: 64*896 + 3*1000 = 60,344.
	defer func(old int) { xla.TrainChunkBytes = old }(xla.TrainChunkBytes)
	xla.TrainChunkBytes = 1000
	if got := EstimateMemory(cfg, p, 0, 0).Passes[1].Bytes; got != 60344 {
		t.Fatalf("training pass with recompute and 1000-byte chunks: %v, want 60344", got)
	}
}
