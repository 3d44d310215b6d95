package session

import (
	"fmt"
	"math"
	"sort"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/core"
)

// ShapeOutput is what `cde-run shape` prints as JSON (DESIGN section 4).
type ShapeOutput struct {
	Sequences []ShapeSeq         `json:"sequences"`
	Metrics   map[string]float64 `json:"metrics"`
}

type ShapeSeq struct {
	RewardBonus    float64   `json:"reward_bonus"`
	ShapedReward   float64   `json:"shaped_reward"`
	Advantages     []float64 `json:"advantages"`
	AdvantageBonus []float64 `json:"advantage_bonus"`
	Returns        []float64 `json:"returns"`
}

// Shape applies cfg's algorithm and strategies to a recorded batch r (read
// from path, which errors name), as one training step would: reward bonuses,
// advantages, advantage bonuses, finalisation. It checks that r carries
// every field they need, and that the results are finite.
func Shape(cfg *core.Config, r *core.Rollout, path string, log zerolog.Logger) (ShapeOutput, error) {
	var o ShapeOutput
	algo, err := BuildAlgorithm(cfg)
	if err != nil {
		return o, err
	}
	strats, err := BuildStrategies(cfg, algo, log)
	if err != nil {
		return o, err
	}
	defer func() {
		for _, s := range strats {
			if c, ok := s.(core.Closer); ok {
				c.Close()
			}
		}
	}()
	tr := &core.Trainer{Cfg: cfg, Algo: algo, Strategies: strats}
	if _, err := tr.Needs(); err != nil {
		return o, err
	}
	var needs core.Needs
	if algo.NeedsCritic() {
		needs.ValueHeads = 1
	}
	for _, s := range strats {
		needs, _ = needs.Merge(s.Needs())
	}
	if err := checkNeeds(r, needs, path); err != nil {
		return o, err
	}
	r.Algorithm = algo.Name()
	if r.TotalSteps <= 0 {
		r.TotalSteps = cfg.Train.Steps
		if r.Step >= r.TotalSteps {
			return o, fmt.Errorf("%s: step: %d: must be < train.steps (%d) of the config, which stands in for the file's missing total_steps", path, r.Step, r.TotalSteps)
		}
	}
	m := map[string]float64{}
	info := core.StepInfo{Step: r.Step, TotalSteps: r.TotalSteps, Algorithm: algo.Name(), Seed: cfg.Seed}
	if err := tr.Shape(info, r, m); err != nil {
		return o, err
	}
	o.Metrics = m
	for i := range r.Seqs {
		s := &r.Seqs[i]
		o.Sequences = append(o.Sequences, ShapeSeq{RewardBonus: s.RewardBonus, ShapedReward: s.ShapedReward,
			Advantages: s.Advantages, AdvantageBonus: s.AdvantageBonus, Returns: s.Returns})
	}
	if err := checkFinite(o); err != nil {
		return o, fmt.Errorf("%s: %w (the inputs are too large for float64: rewards, values or log-probs near 1e308?)", path, err)
	}
	return o, nil
}

// checkFinite names the first output number that is NaN or infinite (JSON
// cannot carry it): finite inputs can still overflow, e.g. a reward of
// 1e308 minus a value of -1e308.
func checkFinite(o ShapeOutput) error {
	bad := func(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) }
	for i, s := range o.Sequences {
		for _, f := range []struct {
			name string
			x    float64
		}{{"reward_bonus", s.RewardBonus}, {"shaped_reward", s.ShapedReward}} {
			if bad(f.x) {
				return fmt.Errorf("sequences[%d].%s = %v: not finite", i, f.name, f.x)
			}
		}
		for _, f := range []struct {
			name string
			xs   []float64
		}{{"advantages", s.Advantages}, {"advantage_bonus", s.AdvantageBonus}, {"returns", s.Returns}} {
			for t, x := range f.xs {
				if bad(x) {
					return fmt.Errorf("sequences[%d].%s[%d] = %v: not finite", i, f.name, t, x)
				}
			}
		}
	}
	keys := make([]string, 0, len(o.Metrics))
	for k := range o.Metrics {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if bad(o.Metrics[k]) {
			return fmt.Errorf("metrics[%q] = %v: not finite", k, o.Metrics[k])
		}
	}
	return nil
}

// checkNeeds reports a rollout field a strategy or the algorithm needs but
// the file lacks.
func checkNeeds(r *core.Rollout, n core.Needs, path string) error {
	for i, s := range r.Seqs {
		if n.Entropies && s.Entropies == nil {
			return fmt.Errorf("%s: sequences[%d].entropies: required by the configured strategies", path, i)
		}
		if n.ValueHeads > 0 && s.Values == nil {
			return fmt.Errorf("%s: sequences[%d].values: required (the algorithm or a strategy reads critic values)", path, i)
		}
		if n.ValueHeads > 1 && len(s.Values) > 0 && len(s.Values[0]) < n.ValueHeads {
			return fmt.Errorf("%s: sequences[%d].values: %d heads, the config asks for %d", path, i, len(s.Values[0]), n.ValueHeads)
		}
		if n.Pooling != "" && s.Embedding == nil {
			return fmt.Errorf("%s: sequences[%d].embedding: required by a strategy with pooling %q", path, i, n.Pooling)
		}
	}
	return nil
}
