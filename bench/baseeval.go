package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/session"
	"github.com/cde-rl/cde/trainer"
)

// BaseArm names the base policy's evaluation in a bench with base_eval:
// RunDir(dir, BaseArm, seed) holds, per seed, metrics.jsonl with one row
// (step 0) and the per-problem eval details, like an arm-seed's step-0
// evaluation, made once instead of in every arm.
const BaseArm = "base"

// checkSharedBase checks that every arm of a base_eval bench starts from
// the same base policy and evaluates the same way as the first arm, so one
// evaluation per seed is every arm's step 0.
func (s *Spec) checkSharedBase(dir string) error {
	if !s.BaseEval || len(s.Arms) == 0 || len(s.Seeds) == 0 {
		return nil
	}
	first, err := s.ArmConfig(dir, s.Arms[0], s.Seeds[0])
	if err != nil {
		return err
	}
	// Whether an arm also evaluates at its own start does not matter.
	evalOf := func(c *trainer.Config) trainer.EvalConfig { e := c.Eval; e.AtStart = false; return e }
	want, _ := json.Marshal([]any{evalOf(first), first.Task})
	for _, a := range s.Arms[1:] {
		cfg, err := s.ArmConfig(dir, a, s.Seeds[0])
		if err != nil {
			return err
		}
		got, _ := json.Marshal([]any{evalOf(cfg), cfg.Task})
		if session.BaseKey(cfg) != session.BaseKey(first) || cfg.Model.Checkpoint != first.Model.Checkpoint || !bytes.Equal(got, want) {
			return fmt.Errorf("bench %s: base_eval: arm %s has another base policy, task or eval config than arm %s; one base evaluation cannot stand for both", s.File, a.Name, s.Arms[0].Name)
		}
	}
	return nil
}

// evalBase evaluates the base policy for one seed, with the first arm's
// config (eval draws depend on the seed and step 0, as in an arm that
// evaluates at its start), and marks it done.
func evalBase(ctx context.Context, spec *Spec, dir string, seed uint64, out io.Writer, log zerolog.Logger) error {
	run := RunDir(dir, BaseArm, seed)
	if _, err := os.Stat(filepath.Join(run, DoneFile)); err == nil {
		return nil
	}
	t0 := time.Now()
	cfg, err := spec.ArmConfig(dir, spec.Arms[0], seed)
	if err != nil {
		return err
	}
	base, err := session.ResolveBase(ctx, cfg, log, session.Output{W: out})
	if err != nil {
		return err
	}
	// With model.hf and model.checkpoint auto the arms start from the
	// Hugging Face model's own weights, which the session loads itself.
	ownWeights := base == "" && cfg.Model.Checkpoint == "auto" && cfg.Model.HF != ""
	if base == "" && !ownWeights {
		return fmt.Errorf("bench: base_eval: the arms start from random weights (model.checkpoint \"\"); there is no base policy to evaluate")
	}
	s, err := session.New(cfg, log)
	if err != nil {
		return err
	}
	defer s.Close()
	if ownWeights {
		base = cfg.Model.HF + " (its own weights)"
	} else if err := s.LoadPolicy(base); err != nil {
		return err
	}
	if err := os.RemoveAll(run); err != nil {
		return err
	}
	if err := os.MkdirAll(run, 0o755); err != nil {
		return err
	}
	s.Trainer.RunDir = run
	fmt.Fprintf(out, "bench: evaluating the base policy %s for seed %d\n", base, seed)
	m := map[string]any{"step": 0}
	vals := map[string]float64{}
	// With the samples of the arms' final evaluation (eval.final_k), which
	// the base row is compared with.
	if err := s.Trainer.EvaluateFinal(0, vals); err != nil {
		return err
	}
	for k, v := range vals {
		m[k] = v
	}
	line, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := core.WriteFileAtomic(filepath.Join(run, "metrics.jsonl"), append(line, '\n')); err != nil {
		return err
	}
	done, _ := json.MarshalIndent(doneMark{Finished: time.Now().UTC().Format(time.RFC3339), Seconds: time.Since(t0).Seconds()}, "", "  ")
	return core.WriteFileAtomic(filepath.Join(run, DoneFile), done)
}
