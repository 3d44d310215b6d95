package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/session"
	"github.com/cde-rl/cde/tasks"
	"github.com/cde-rl/cde/trainer"
)

// headStdProblems is how many prompts per set the Figure 7b measurement
// uses, and headStdSamples the responses per prompt.
const (
	headStdProblems = 64
	headStdSamples  = 2
)

var headStdMu sync.Mutex

// HeadStd is the Figure 7b measurement of one run (RUN/head_std.json): the
// mean over response tokens of the std across critic heads, per prompt set.
type HeadStd struct {
	Heads int                `json:"heads"`
	Sets  []string           `json:"sets"` // "train", then the eval sets in task order
	Std   map[string]float64 `json:"std"`
	InDis map[string]bool    `json:"in_distribution"` // the set's level is among the training levels
}

// measureHeadStd loads the run's final checkpoint, samples responses to
// training prompts and to each of the task's eval sets, scores them with
// the critic and writes RUN/head_std.json. Runs with fewer than two critic
// heads are skipped (their spread is 0 by construction).
func measureHeadStd(ctx context.Context, run string, log zerolog.Logger) error {
	headStdMu.Lock()
	defer headStdMu.Unlock()
	data, err := os.ReadFile(filepath.Join(run, "config.yaml"))
	if err != nil {
		return err
	}
	cfg, err := trainer.LoadConfig(trainer.LoadOptions{Base: data, Env: []string{}})
	if err != nil {
		return err
	}
	ckpt, err := trainer.LatestCheckpoint(run)
	if err != nil || ckpt == "" {
		return fmt.Errorf("%s: no checkpoint (%v)", run, err)
	}
	// The checkpoint says how many critic heads the run had; one written
	// before it recorded them is asked the slow way, by building the run's
	// strategies (plugin processes included).
	heads, known, err := trainer.CheckpointValueHeads(ckpt)
	if err == nil && !known {
		heads, err = criticHeads(cfg)
	}
	if err != nil || heads < 2 {
		return err
	}
	s, err := session.New(cfg, log.Level(zerolog.WarnLevel))
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.Backend.Load(ckpt); err != nil {
		return err
	}
	res := HeadStd{Heads: heads, Std: map[string]float64{}, InDis: map[string]bool{}}
	train := core.EvalSet{Name: "train", Problems: s.Task.SampleTrain(rand.New(rand.NewPCG(cfg.Seed, 7)), headStdProblems)}
	levels := trainLevels(s.Task)
	for i, set := range append([]core.EvalSet{train}, s.Task.EvalSets()...) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		problems := set.Problems
		if len(problems) > headStdProblems {
			problems = problems[:headStdProblems]
		}
		if len(problems) == 0 {
			continue
		}
		v, err := setHeadStd(s, cfg, heads, problems, trainer.Mix(cfg.Seed, 0x7b, uint64(i)))
		if err != nil {
			return fmt.Errorf("%s: %w", set.Name, err)
		}
		res.Sets = append(res.Sets, set.Name)
		res.Std[set.Name] = v
		res.InDis[set.Name] = i == 0 || levels[problems[0].Level]
	}
	out, _ := json.MarshalIndent(res, "", "  ")
	std, _ := json.Marshal(res.Std)
	log.Info().Str("run", run).RawJSON("head_std", std).Msg("critic head std per prompt set")
	return os.WriteFile(filepath.Join(run, HeadStdFile), append(out, '\n'), 0o644)
}

// trainLevels are the difficulty levels of the task's training problems:
// arith's configured levels, the levels in a jsonl task's training file,
// and for another task those of a large deterministic training sample.
func trainLevels(task core.Task) map[int]bool {
	levels := map[int]bool{}
	var problems []core.Problem
	switch t := task.(type) {
	case *tasks.Arith:
		for _, l := range t.Levels {
			levels[l] = true
		}
	case *tasks.JSONL:
		problems = t.Train
	default:
		problems = task.SampleTrain(rand.New(rand.NewPCG(1, 7)), 4096)
	}
	for _, p := range problems {
		levels[p.Level] = true
	}
	return levels
}

// setHeadStd samples headStdSamples responses to each problem and returns
// the critic's head spread over them (core.HeadStd; NaN when none).
func setHeadStd(s *session.Session, cfg *trainer.Config, heads int, problems []core.Problem, seed uint64) (float64, error) {
	tok := s.Task.Tokenizer()
	r := &core.Rollout{ValueHeads: heads}
	var prompts [][]int32
	for gi, p := range problems {
		enc := core.EncodePrompt(tok, p.Prompt)
		for range headStdSamples {
			prompts = append(prompts, enc)
			r.Seqs = append(r.Seqs, core.Sequence{Group: gi, ProblemID: p.ID, Prompt: enc})
		}
	}
	gens, err := s.Backend.Generate(core.GenerateRequest{Prompts: prompts, Temperature: cfg.Rollout.Temperature,
		MaxTokens: cfg.Rollout.MaxResponseTokens, Seed: seed})
	if err != nil {
		return 0, err
	}
	for i, g := range gens {
		r.Seqs[i].Response = g.Tokens
	}
	if err := s.Backend.ScoreValues(r); err != nil {
		return 0, err
	}
	std, ok := core.HeadStd(r)
	if !ok {
		return math.NaN(), nil
	}
	return std, nil
}
