package session_test

import (
	"cmp"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/backends/xla"
	"github.com/cde-rl/cde/backends/xla/peft"
	"github.com/cde-rl/cde/session"
	"github.com/cde-rl/cde/trainer"
)

// A LoRA run end to end on a tiny Qwen3: GRPO with the KL term (its
// reference the base, no copy; an entropy bonus moves the weights when
// every reward ties) and PPO with a LoRA critic train and checkpoint the
// adapters only; the run resumes; export writes a PEFT adapter that,
// merged at load (score --adapter), scores exactly as the merged export
// and as score --run.
func TestLoRARun(t *testing.T) {
	model := tinyQwen3(t)
	data := t.TempDir()
	train := `{"question": "John writes 20 pages a day.  How long will it take him to write 3 books that are 400 pages each?", "answer": "#### 60"}
{"question": "Herbert is 10 years younger than Kris. If Kris is 24 years old now, how old will Herbert be next year?", "answer": "#### 15"}
`
	os.WriteFile(filepath.Join(data, "train.jsonl"), []byte(train), 0o644)
	for _, c := range []struct{ name, algo, lora string }{
		{"grpo-kl", "algorithm: {name: grpo}\ntrain: {steps: 2, prompts_per_step: 2, checkpoint_every: 1, kl_coef: 0.05, entropy_coef: 0.01}", ""},
		{"ppo", "algorithm: {name: ppo}\ntrain: {steps: 2, prompts_per_step: 2, checkpoint_every: 1, value_heads: 2}", ""},
		// The base in bfloat16 (the tiny checkpoint is BF16, so the merged
		// export still equals base + adapter exactly), with recompute.
		{"ppo-bf16-base", "algorithm: {name: ppo}\ntrain: {steps: 2, prompts_per_step: 2, checkpoint_every: 1, value_heads: 2, kl_coef: 0.05}", ", base_dtype: bfloat16}, recompute: true"},
	} {
		t.Run(c.name, func(t *testing.T) {
			yaml := `seed: 4
task: {name: math, train: ` + filepath.Join(data, "train.jsonl") + `, tokenizer: ` + model + `}
model: {hf: ` + model + `, max_len: 128, lora: {rank: 4, alpha: 8, target_modules: [v_proj, q_proj, down_proj]` + cmp.Or(c.lora, "}") + `}
rollout: {n: 2, max_response_tokens: 6}
eval: {every: 0, k: 1}
` + c.algo + "\n"
			file := filepath.Join(t.TempDir(), "lora.yaml")
			os.WriteFile(file, []byte(yaml), 0o644)
			cfg, err := trainer.LoadConfig(trainer.LoadOptions{File: file, Env: []string{}, Sets: []string{"train.steps=1"}})
			if err != nil {
				t.Fatal(err)
			}
			if got := session.WithModelOptions(cfg, xla.ModelConfig{}); got.BaseBF16 != (c.lora != "") || got.Recompute != (c.lora != "") {
				t.Fatalf("model options: bfloat16 base %v, recompute %v", got.BaseBF16, got.Recompute)
			}
			run := filepath.Join(t.TempDir(), "run")
			if err := session.Train(context.Background(), session.TrainOptions{Config: cfg, RunDir: run, Log: zerolog.Nop()}); err != nil {
				t.Fatal(err)
			}
			// Resume to step 2, train.steps edited in the run's config.yaml.
			path := filepath.Join(run, "config.yaml")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			edited := strings.Replace(string(b), "steps: 1\n", "steps: 2\n", 1)
			if edited == string(b) {
				t.Fatalf("no \"steps: 1\" in %s:\n%s", path, b)
			}
			os.WriteFile(path, []byte(edited), 0o644)
			if err := session.Train(context.Background(), session.TrainOptions{Resume: run, Log: zerolog.Nop()}); err != nil {
				t.Fatal(err)
			}
			rows := metricRows(t, run)
			if len(rows) < 2 || rows[0]["actor/grad_norm"] == nil || rows[1]["actor/grad_norm"] == nil {
				t.Fatalf("metrics: %v", rows)
			}
			if c.name == "grpo-kl" && rows[0]["actor/kl"] == nil {
				t.Fatalf("no KL metric: %v", rows[0])
			}
			if c.name == "ppo" && rows[0]["critic/vf_loss"] == nil {
				t.Fatalf("no critic metrics: %v", rows[0])
			}
			ck, err := trainer.LatestCheckpoint(run)
			if err != nil || !strings.HasSuffix(ck, "step-000002") {
				t.Fatalf("latest checkpoint %q (%v)", ck, err)
			}
			fi, err := os.Stat(filepath.Join(ck, "policy.gob"))
			if err != nil {
				t.Fatal(err)
			}
			// The base is ~2.4 MB of float32 weights; the adapters of 3
			// modules x 2 layers at rank 4 with their Adam moments are a few KB.
			if fi.Size() > 200_000 {
				t.Fatalf("policy.gob is %d bytes: it holds the frozen weights", fi.Size())
			}
			if _, err := os.Stat(filepath.Join(ck, "reference.gob")); !os.IsNotExist(err) {
				t.Fatalf("a LoRA run saved reference.gob (%v)", err)
			}
			adapter := filepath.Join(t.TempDir(), "adapter")
			if err := session.ExportAdapter(run, -1, adapter, zerolog.Nop()); err != nil {
				t.Fatal(err)
			}
			ad, err := peft.Read(adapter)
			if err != nil {
				t.Fatal(err)
			}
			if ad.Config.Rank != 4 || ad.Config.Alpha != 8 || !slices.Equal(ad.Config.Targets, []string{"q_proj", "v_proj", "down_proj"}) || len(ad.A) != 6 || ad.Config.BaseModel != model {
				t.Fatalf("adapter %+v, %d modules", ad.Config, len(ad.A))
			}
			merged := filepath.Join(t.TempDir(), "merged")
			if err := session.ExportHF(run, -1, merged, "F32", zerolog.Nop()); err != nil {
				t.Fatal(err)
			}
			withAdapter, err := xla.LoadHFAdapter(model, adapter, "cpu", "")
			if err != nil {
				t.Fatal(err)
			}
			defer withAdapter.Close()
			mm, err := xla.LoadHF(merged, "cpu", "")
			if err != nil {
				t.Fatal(err)
			}
			defer mm.Close()
			base, err := xla.LoadHF(model, "cpu", "")
			if err != nil {
				t.Fatal(err)
			}
			defer base.Close()
			seq := []int32{151644, 872, 198, 3838, 374, 220, 17, 10, 17, 30, 151645, 198, 151644, 77091, 198, 17}
			x, err := withAdapter.LogProbs(seq, 10)
			if err != nil {
				t.Fatal(err)
			}
			y, _ := mm.LogProbs(seq, 10)
			z, _ := base.LogProbs(seq, 10)
			if !slices.Equal(x, y) {
				t.Fatalf("base + exported adapter %v, merged export %v", x, y)
			}
			if slices.Equal(x, z) {
				t.Fatal("the trained adapters leave the base's log-probs unchanged")
			}
			md, done, err := session.ModelDir("", run, -1, zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			defer done()
			byRun, err := xla.LoadHF(md, "cpu", "")
			if err != nil {
				t.Fatal(err)
			}
			defer byRun.Close()
			if w, _ := byRun.LogProbs(seq, 10); !slices.Equal(x, w) {
				t.Fatalf("score --run %v, base + adapter %v", w, x)
			}
		})
	}
}
