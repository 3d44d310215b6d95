package trainer

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
	"github.com/rs/zerolog"
)

// fakeTok maps bytes to ids 3.. (0 PAD, 1 BOS, 2 EOS).
type fakeTok struct{}

func (fakeTok) Encode(s string) []int32 {
	out := make([]int32, len(s))
	for i := range len(s) {
		out[i] = int32(s[i]) + 3
	}
	return out
}
func (fakeTok) Decode(ids []int32) string {
	var b strings.Builder
	for _, id := range ids {
		if id >= 3 {
			b.WriteByte(byte(id - 3))
		}
	}
	return b.String()
}
func (fakeTok) VocabSize() int { return 259 }
func (fakeTok) BOS() int32     { return 1 }
func (fakeTok) EOS() int32     { return 2 }
func (fakeTok) PAD() int32     { return 0 }

// fakeVerifier: correct when the response equals the answer.
type fakeVerifier struct{}

func (fakeVerifier) Verify(p core.Problem, response string) (float64, bool) {
	if response == p.Answer {
		return 1, true
	}
	return 0, false
}

type fakeTask struct{}

func (fakeTask) Name() string              { return "fake" }
func (fakeTask) Tokenizer() core.Tokenizer { return fakeTok{} }
func (fakeTask) Verifier() core.Verifier   { return fakeVerifier{} }
func (fakeTask) SampleTrain(rng *rand.Rand, n int) []core.Problem {
	out := make([]core.Problem, n)
	for i := range out {
		d := rng.IntN(10)
		out[i] = core.Problem{ID: strconv.Itoa(d), Prompt: strconv.Itoa(d), Answer: strconv.Itoa(d)}
	}
	return out
}
func (fakeTask) EvalSets() []core.EvalSet {
	return []core.EvalSet{{Name: "v", Problems: []core.Problem{{ID: "a", Prompt: "1", Answer: "1"}}}}
}

// fakeBackend answers each prompt with one byte drawn from the seed; its
// whole state is one number, `updates`, which every actor update bumps and
// which Save/Load round-trip. nanAtUpdate makes that update report a NaN
// loss.
type fakeBackend struct {
	updates     int
	nanAtUpdate int // 1-based; 0 never
	// gradNorm gives actor/grad_norm of update u (1-based); nil: 1.
	gradNorm    func(u int) float64
	calls       []string
	genRequests []core.GenerateRequest
}

func (b *fakeBackend) Engine() string { return "fake" }
func (b *fakeBackend) Generate(req core.GenerateRequest) ([]core.Generation, error) {
	b.calls = append(b.calls, "generate")
	b.genRequests = append(b.genRequests, req)
	rng := rand.New(rand.NewPCG(req.Seed, uint64(b.updates)))
	out := make([]core.Generation, len(req.Prompts))
	for i := range out {
		tok := int32('0'+rng.IntN(10)) + 3
		out[i] = core.Generation{Tokens: []int32{tok, 2}, LogProbs: []float64{-0.5, -0.1}, Entropies: []float64{1, 0.5}}
	}
	return out, nil
}
func (b *fakeBackend) ScoreValues(r *core.Rollout) error {
	b.calls = append(b.calls, "values")
	for i := range r.Seqs {
		r.Seqs[i].Values = make([]float64, r.Seqs[i].Len()*max(r.ValueHeads, 1))
	}
	return nil
}
func (b *fakeBackend) UpdateActor(r *core.Rollout, u core.ActorUpdate) (map[string]float64, error) {
	b.calls = append(b.calls, "actor")
	b.updates++
	loss := float64(b.updates)
	if b.updates == b.nanAtUpdate {
		loss = math.NaN()
	}
	norm := 1.0
	if b.gradNorm != nil {
		norm = b.gradNorm(b.updates)
	}
	return map[string]float64{"actor/loss": loss, "actor/grad_norm": norm}, nil
}
func (b *fakeBackend) UpdateCritic(r *core.Rollout, u core.CriticUpdate) (map[string]float64, error) {
	b.calls = append(b.calls, "critic")
	return map[string]float64{"critic/vf_loss": 0}, nil
}
func (b *fakeBackend) Save(dir string) error {
	return os.WriteFile(filepath.Join(dir, "policy.txt"), []byte(strconv.Itoa(b.updates)), 0o644)
}
func (b *fakeBackend) Load(dir string) error {
	data, err := os.ReadFile(filepath.Join(dir, "policy.txt"))
	if err != nil {
		return err
	}
	b.updates, err = strconv.Atoi(string(data))
	return err
}
func (b *fakeBackend) Close() error { return nil }

// meanAlgo: advantage = reward - group mean, on every token.
type meanAlgo struct{}

func (meanAlgo) Name() string      { return "mean" }
func (meanAlgo) NeedsCritic() bool { return false }
func (meanAlgo) Advantages(r *core.Rollout) error {
	sums, counts := map[int]float64{}, map[int]float64{}
	for _, s := range r.Seqs {
		sums[s.Group] += s.ShapedReward
		counts[s.Group]++
	}
	for i := range r.Seqs {
		s := &r.Seqs[i]
		a := s.ShapedReward - sums[s.Group]/counts[s.Group]
		s.Advantages = make([]float64, s.Len())
		for t := range s.Advantages {
			s.Advantages[t] = a
		}
	}
	return nil
}
func (meanAlgo) Finalize(r *core.Rollout) error { return nil }

func fakeConfig(t testing.TB, steps, every int) *Config {
	t.Helper()
	cfg, err := LoadConfig(LoadOptions{Env: []string{}, Sets: []string{
		"train.steps=" + strconv.Itoa(steps), "train.checkpoint_every=" + strconv.Itoa(every),
		"train.keep_checkpoints=3", "train.prompts_per_step=2", "rollout.n=2", "eval.every=0"}})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func fakeTrainer(t *testing.T, cfg *Config, be *fakeBackend) *Trainer {
	t.Helper()
	return &Trainer{Cfg: cfg, Task: fakeTask{}, Backend: be, Algo: meanAlgo{}, RunDir: t.TempDir(), Log: zerolog.Nop()}
}

func metricSteps(t *testing.T, runDir string) []int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(runDir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var steps []int
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		var n int
		if _, err := fmt.Sscanf(line, `{"step":%d`, &n); err != nil {
			t.Fatalf("bad metrics line %q", line)
		}
		steps = append(steps, n)
	}
	return steps
}

var _ = context.Background
