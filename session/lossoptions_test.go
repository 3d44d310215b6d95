package session_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/session"
	"github.com/cde-rl/cde/trainer"
)

// Every policy-loss option of the train section runs through a real
// training step on the GoMLX backend: dynamic sampling, GSPO's sequence
// ratio with the dual clip and seq-mean-token-sum-norm, the overlong
// punishment and the KL as a reward penalty (whose reference policy
// session.Train freezes); then the KL as a k2 loss term with
// seq-mean-token-mean. The metrics each adds are written.
func TestTrainWithLossOptions(t *testing.T) {
	for _, c := range []struct {
		name, train string
		want        []string
	}{
		{"reward-side", `train: {steps: 2, prompts_per_step: 4, checkpoint_every: 2, ratio_level: sequence, clip_low: 0.01,
        clip_high: 0.02, clip_ratio_c: 3, loss_agg_mode: seq-mean-token-sum-norm, kl_mode: reward, kl_coef: 0.1,
        kl_estimator: k1, overlong: {buffer: 4}, dynamic_sampling: {enabled: true, max_extra_batches: 1}}`,
			[]string{"train/dropped_groups", "train/extra_batches", "train/kept_groups", "reward/overlong_penalty", "reward/kl_penalty",
				"train/generated_responses", "train/generated_responses_total", "rollout/entropy", "kept/rollout/entropy", "kept/reward/acc"}},
		{"kl-loss", `train: {steps: 2, prompts_per_step: 4, checkpoint_every: 2, loss_agg_mode: seq-mean-token-mean, kl_coef: 0.1, kl_estimator: k2}`,
			[]string{"actor/kl", "actor/pg_loss", "train/generated_responses", "train/generated_responses_total"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "cfg.yaml")
			text := strings.Replace(tiny, "train: {steps: 3, prompts_per_step: 4, checkpoint_every: 2}", c.train, 1)
			if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := trainer.LoadConfig(trainer.LoadOptions{File: file, Env: []string{}})
			if err != nil {
				t.Fatal(err)
			}
			run := filepath.Join(t.TempDir(), "run")
			if err := session.Train(context.Background(), session.TrainOptions{Config: cfg, RunDir: run, Log: zerolog.Nop()}); err != nil {
				t.Fatal(err)
			}
			rows := metricRows(t, run)
			for _, k := range c.want {
				if rows[0][k] == nil || rows[1][k] == nil {
					t.Errorf("metric %s missing: %v", k, rows[0])
				}
			}
		})
	}
}

// grpo_passk with rollout.n below algorithm.k is refused when the run is
// built, naming both keys.
func TestPassKNeedsEnoughResponses(t *testing.T) {
	cfg, err := trainer.LoadConfig(trainer.LoadOptions{Env: []string{}, Sets: []string{"algorithm.name=grpo_passk", "algorithm.k=8", "rollout.n=4",
		`model.checkpoint=""`}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = session.New(cfg, zerolog.Nop())
	if err == nil || !strings.Contains(err.Error(), "rollout.n = 4 is less than algorithm.k = 8") {
		t.Fatalf("got %v", err)
	}
	cfg.Rollout.N = 8
	if err := session.CheckAlgorithmFits(cfg, mustAlgo(t, cfg)); err != nil {
		t.Fatalf("rollout.n = k: %v", err)
	}
}

func mustAlgo(t *testing.T, cfg *trainer.Config) core.Algorithm {
	t.Helper()
	a, err := session.BuildAlgorithm(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
