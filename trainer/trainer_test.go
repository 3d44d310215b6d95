package trainer

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
)

// recStrategy implements every hook and records each call in a shared log.
type recStrategy struct {
	name   string
	log    *[]string
	reward float64 // reward bonus of sequence i: reward * (i+1)
	adv    float64 // advantage bonus on every token
	ent    float64 // entropy coefficient from LossTerms
}

func (s *recStrategy) Name() string      { return s.name }
func (s *recStrategy) Needs() core.Needs { return core.Needs{HeadMasks: true} }
func (s *recStrategy) RewardBonus(info core.StepInfo, r *core.Rollout) ([]float64, error) {
	*s.log = append(*s.log, s.name+".reward")
	out := make([]float64, len(r.Seqs))
	for i := range out {
		out[i] = s.reward * float64(i+1)
	}
	return out, nil
}
func (s *recStrategy) AdvantageBonus(info core.StepInfo, r *core.Rollout) ([][]float64, error) {
	*s.log = append(*s.log, s.name+".advantage")
	out := make([][]float64, len(r.Seqs))
	for i := range out {
		out[i] = make([]float64, r.Seqs[i].Len())
		for t := range out[i] {
			out[i][t] = s.adv
		}
	}
	return out, nil
}
func (s *recStrategy) LossTerms(info core.StepInfo) (core.LossTerms, error) {
	*s.log = append(*s.log, s.name+".loss")
	return core.LossTerms{EntropyCoef: s.ent}, nil
}
func (s *recStrategy) HeadMasks(info core.StepInfo, r *core.Rollout) ([][]float64, error) {
	*s.log = append(*s.log, s.name+".masks")
	_, out := r.TokenRows(r.ValueHeads) // T x K entries (core.CheckHeadMasks)
	for i := range out {
		for t := range r.Seqs[i].Len() {
			out[i][t*r.ValueHeads] = 1
		}
	}
	return out, nil
}
func (s *recStrategy) Observe(info core.StepInfo, r *core.Rollout) (map[string]float64, error) {
	*s.log = append(*s.log, s.name+".observe")
	return map[string]float64{s.name + "/observed": float64(info.Step)}, nil
}

// recAlgo: advantage = shaped reward on every token; it needs a critic and
// records what Finalize sees (after the advantage bonuses).
type recAlgo struct {
	log       *[]string
	finalized [][]float64
}

func (a *recAlgo) Name() string      { return "rec" }
func (a *recAlgo) NeedsCritic() bool { return true }
func (a *recAlgo) Advantages(r *core.Rollout) error {
	*a.log = append(*a.log, "algo.advantages")
	for i := range r.Seqs {
		s := &r.Seqs[i]
		s.Advantages = make([]float64, s.Len())
		s.Returns = make([]float64, s.Len())
		for t := range s.Advantages {
			s.Advantages[t] = s.ShapedReward
		}
	}
	return nil
}
func (a *recAlgo) Finalize(r *core.Rollout) error {
	*a.log = append(*a.log, "algo.finalize")
	a.finalized = nil
	for _, s := range r.Seqs {
		a.finalized = append(a.finalized, slices.Clone(s.Advantages))
	}
	return nil
}

// recBackend wraps fakeBackend, logging into the shared log and keeping
// the last actor update and rollout.
type recBackend struct {
	fakeBackend
	log       *[]string
	lastActor core.ActorUpdate
	lastR     *core.Rollout
}

func (b *recBackend) Generate(req core.GenerateRequest) ([]core.Generation, error) {
	*b.log = append(*b.log, "backend.generate")
	return b.fakeBackend.Generate(req)
}
func (b *recBackend) ScoreValues(r *core.Rollout) error {
	*b.log = append(*b.log, "backend.values")
	return b.fakeBackend.ScoreValues(r)
}
func (b *recBackend) UpdateActor(r *core.Rollout, u core.ActorUpdate) (map[string]float64, error) {
	*b.log = append(*b.log, "backend.actor")
	b.lastActor, b.lastR = u, r
	return b.fakeBackend.UpdateActor(r, u)
}
func (b *recBackend) UpdateCritic(r *core.Rollout, u core.CriticUpdate) (map[string]float64, error) {
	*b.log = append(*b.log, "backend.critic")
	for _, s := range r.Seqs {
		if len(s.HeadMask) != s.Len()*r.ValueHeads {
			return nil, fmt.Errorf("head masks not set before the critic update")
		}
	}
	return b.fakeBackend.UpdateCritic(r, u)
}

// One step calls the hooks in the order of docs/extending.md ("One training
// step"), sums two reward bonuses, adds advantage bonuses before the
// algorithm's finalisation, sums entropy coefficients into the actor
// update, and reports the metrics.
func TestStepHookOrderAndSums(t *testing.T) {
	var log []string
	cfg := fakeConfig(t, 1, 1)
	cfg.Train.EntropyCoef = 0.01
	a := &recStrategy{name: "a", log: &log, reward: 0.1, adv: 0.5, ent: 0.002}
	b := &recStrategy{name: "b", log: &log, reward: 0.01, adv: 0.25, ent: 0.003}
	be := &recBackend{log: &log}
	algo := &recAlgo{log: &log}
	tr := &Trainer{Cfg: cfg, Task: fakeTask{}, Backend: be, Algo: algo, Strategies: []core.Strategy{a, b}, RunDir: t.TempDir()}
	var err error
	if tr.needs, err = tr.Needs(); err != nil {
		t.Fatal(err)
	}
	m := map[string]float64{}
	if err := tr.Step(0, m); err != nil {
		t.Fatal(err)
	}
	want := []string{"backend.generate", "backend.values", "a.reward", "b.reward", "algo.advantages",
		"a.advantage", "b.advantage", "algo.finalize", "a.loss", "b.loss", "backend.actor",
		"a.masks", "b.masks", "backend.critic", "a.observe", "b.observe"}
	if !slices.Equal(log, want) {
		t.Fatalf("call order\n got %v\nwant %v", log, want)
	}
	r := be.lastR
	for i, s := range r.Seqs {
		bonus := 0.1*float64(i+1) + 0.01*float64(i+1)
		if math.Abs(s.RewardBonus-bonus) > 1e-12 || math.Abs(s.ShapedReward-(s.Reward+bonus)) > 1e-12 {
			t.Fatalf("seq %d: bonus %v shaped %v, want %v and reward + bonus", i, s.RewardBonus, s.ShapedReward, bonus)
		}
		for k, v := range algo.finalized[i] {
			if math.Abs(v-(s.ShapedReward+0.75)) > 1e-12 {
				t.Fatalf("seq %d token %d: Finalize saw advantage %v, want shaped reward + 0.75", i, k, v)
			}
		}
	}
	if math.Abs(be.lastActor.EntropyCoef-0.015) > 1e-12 || math.Abs(m["actor/entropy_coef"]-0.015) > 1e-12 {
		t.Fatalf("entropy coef %v (metric %v), want 0.01 + 0.002 + 0.003", be.lastActor.EntropyCoef, m["actor/entropy_coef"])
	}
	// A strategy with both bonus hooks reports the advantage bonus's mean
	// (written last); every in-tree strategy has one of the two.
	if got := m["explore/a/bonus_mean"]; math.Abs(got-0.5) > 1e-12 {
		t.Fatalf("explore/a/bonus_mean %v, want 0.5", got)
	}
	for _, k := range []string{"actor/loss", "critic/vf_loss", "reward/mean", "reward/acc", "a/observed", "b/observed", "perf/step_s", "explore/b/bonus_mean"} {
		if _, ok := m[k]; !ok {
			t.Errorf("metric %s missing", k)
		}
	}
}

// Evaluations run at step 0, every eval.every steps and after the last;
// a resumed run drops the metrics rows from after its checkpoint and
// writes each step once.
func TestRunEvalCadenceAndResume(t *testing.T) {
	cfg := fakeConfig(t, 5, 2)
	cfg.Eval.Every = 2
	be := &fakeBackend{}
	tr := fakeTrainer(t, cfg, be)
	if err := tr.Run(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if got := metricSteps(t, tr.RunDir); !slices.Equal(got, []int{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("steps %v", got)
	}
	data, _ := os.ReadFile(filepath.Join(tr.RunDir, "metrics.jsonl"))
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	for i, line := range lines {
		hasEval := strings.Contains(line, `"val/v/avg@4"`)
		if hasEval != (i%2 == 0 || i == 5) {
			t.Fatalf("row %d: eval present %v: %s", i, hasEval, line)
		}
	}
	// Resume from step 2's checkpoint (as after a crash at step 3).
	os.RemoveAll(filepath.Join(checkpointRoot(tr.RunDir), "step-000004"))
	os.RemoveAll(filepath.Join(checkpointRoot(tr.RunDir), "step-000005"))
	dir, _, err := ResumeCheckpoint(tr.RunDir)
	if err != nil || filepath.Base(dir) != "step-000002" {
		t.Fatalf("resume from %q (%v)", dir, err)
	}
	be2 := &fakeBackend{}
	tr2 := fakeTrainer(t, cfg, be2)
	tr2.RunDir = tr.RunDir
	start, err := tr2.Restore(dir)
	if err != nil || start != 2 || be2.updates != 2 {
		t.Fatalf("restored step %d, updates %d (%v)", start, be2.updates, err)
	}
	if err := tr2.Run(context.Background(), start); err != nil {
		t.Fatal(err)
	}
	if got := metricSteps(t, tr.RunDir); !slices.Equal(got, []int{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("after resume: steps %v, want each once", got)
	}
	again, _ := os.ReadFile(filepath.Join(tr.RunDir, "metrics.jsonl"))
	if strings.Join(strings.Split(string(again), "\n")[:2], "\n") != strings.Join(lines[:2], "\n") {
		t.Fatal("rows before the checkpoint changed on resume")
	}
}

// A cancelled context writes a checkpoint of the steps done and returns.
func TestRunInterrupted(t *testing.T) {
	cfg := fakeConfig(t, 10, 100)
	tr := fakeTrainer(t, cfg, &fakeBackend{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := tr.Run(ctx, 3); err != context.Canceled {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	dir, _, err := ResumeCheckpoint(tr.RunDir)
	if err != nil || filepath.Base(dir) != "step-000003" {
		t.Fatalf("checkpoint %q (%v), want step-000003", dir, err)
	}
}

// rewardOnly wraps a strategy and declares, as a core.HookProvider, only
// its reward bonus and its observe: the trainer must call those and no
// other of the wrapped strategy's methods (as for a plugin declaring a
// subset of hooks).
type rewardOnly struct{ *recStrategy }

func (w rewardOnly) Hooks() core.Hooks {
	return core.Hooks{RewardBonus: w.RewardBonus, Observe: w.Observe}
}

func TestStepAsksHookProvider(t *testing.T) {
	var log []string
	a := &recStrategy{name: "a", log: &log, reward: 0.1, adv: 0.5, ent: 0.002}
	w := rewardOnly{&recStrategy{name: "w", log: &log, reward: 0.01, adv: 0.25, ent: 0.003}}
	be := &recBackend{log: &log}
	tr := &Trainer{Cfg: fakeConfig(t, 1, 1), Task: fakeTask{}, Backend: be, Algo: &recAlgo{log: &log},
		Strategies: []core.Strategy{a, w}, RunDir: t.TempDir()}
	var err error
	if tr.needs, err = tr.Needs(); err != nil {
		t.Fatal(err)
	}
	if err := tr.Step(0, map[string]float64{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"backend.generate", "backend.values", "a.reward", "w.reward", "algo.advantages",
		"a.advantage", "algo.finalize", "a.loss", "backend.actor",
		"a.masks", "backend.critic", "a.observe", "w.observe"}
	if !slices.Equal(log, want) {
		t.Fatalf("call order\n got %v\nwant %v", log, want)
	}
}
