// Package adaptiveentropy implements adaptive entropy control toward a
// target entropy, registered as strategy "adaptive_entropy" (Skywork-OR1:
// He et al. 2025, "Skywork Open Reasoner 1 Technical Report", arXiv
// 2505.22312, section on adaptive entropy control): the entropy bonus's
// coefficient follows the policy's entropy, rising while it is below the
// target and falling while it is above, and the bonus is on only while the
// entropy is below the target.
//
// The rule, with e_k the mean token entropy of step k's batch (over every
// valid token, Sequence.Entropies: the sampling distribution's, under
// rollout.temperature, before the step's update) and c_k the controller's
// coefficient (c_0 = init). With gate: current, the gate reads the step's
// own batch:
//
//	alpha_k = c_k if e_k <= target, else 0     (this step's coefficient)
//	c_{k+1} = clip(c_k + delta, min_coef, max_coef)   if e_k < target
//	c_{k+1} = clip(c_k - delta, min_coef, max_coef)   if e_k > target
//	c_{k+1} = c_k                                     if e_k = target
//
// With gate: previous (the default), the rule of the authors' released trainer
// (SkyworkAI/Skywork-OR1, verl/trainer/ppo/core_algos.py EntController and
// its use in ray_trainer.py): the controller is updated after each step's
// actor update with the entropy measured there, so step k's gate is the
// previous step's measurement:
//
//	alpha_k = c_k if e_{k-1} < target, else 0   (alpha_0 = c_0)
//	c_{k+1} = clip(c_k + delta, min_coef, max_coef)   if e_k < target
//	c_{k+1} = clip(c_k - delta, min_coef, max_coef)   otherwise
//
// The c sequences of the two gates agree except when some e_k equals the
// target exactly. (The authors' trainer measures e during the actor update,
// token-mean over the batch; at the first, on-policy minibatch that is the
// batch's sampling entropy, which cde uses.)
//
// The token-loss hook returns EntropyCoef = alpha_k (core.TokenLoss),
// added to train.entropy_coef: the actor loss gets -alpha_k times the
// aggregated entropy. The state is saved in checkpoints (core.Stateful).
// Calling the hook twice for one step gives the same answer and updates c
// once.
//
// Metrics: explore/adaptive_entropy/entropy_coef (alpha_k, when not 0, by
// the trainer), explore/adaptive_entropy/next_coef and batch_entropy
// (Observe).
//
// Config keys: target (number > 0, default 0.2), delta (number > 0, default
// 0.0001), init (number, default 0), min_coef (number >= 0, default 0),
// max_coef (number >= min_coef, default 0.005), gate (previous | current,
// default previous); init must lie in [min_coef, max_coef]. The defaults
// are the values of every training script in the authors' repository
// (or1_scripts/train/{7b,32b}_{8k,16k,32k}.sh: TGT_ENTROPY 0.2,
// DELTA_ENT_COEF 0.0001, ENTROPY_COEFF 0.0, MIN_ENT_COEF 0, MAX_ENT_COEF
// 0.005). An earlier 7B script there (or1_script/train/run_ds_7b.sh, April
// 2025) used delta 0.001, init 0.005 and max 0.5.
package adaptiveentropy

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/cde-rl/cde/core"
)

func init() {
	core.RegisterStrategy("adaptive_entropy", New)
}

// Adaptive is the entropy controller. It is Stateful (the coefficient c
// and the step it was last updated for) and an Observer. Not safe for
// concurrent use.
type Adaptive struct {
	Target, Delta, Init, MinCoef, MaxCoef float64
	// Previous selects gate: previous (the authors' trainer's timing).
	Previous bool

	state state
}

type state struct {
	// Coef is c for the next step not yet seen; Prev and Step are c before
	// the last update and the step of that update (-1: none), so a repeated
	// call for that step recomputes from Prev. Off is gate: previous's
	// switch for the next step (the last e was >= target); PrevOff is Off
	// before the last update. Both are false at the start.
	Coef    float64 `json:"coef"`
	Prev    float64 `json:"prev"`
	Step    int     `json:"step"`
	Off     bool    `json:"off,omitempty"`
	PrevOff bool    `json:"prev_off,omitempty"`
}

// New builds Adaptive from a `strategies:` entry; it works with any algorithm.
func New(p *core.Params, _ core.Algorithm) (core.Strategy, error) {
	s := &Adaptive{Target: p.Float("target", 0.2), Delta: p.Float("delta", 0.0001), Init: p.Float("init", 0),
		MinCoef: p.Float("min_coef", 0), MaxCoef: p.Float("max_coef", 0.005),
		Previous: p.OneOf("gate", "previous", "previous", "current") == "previous"}
	p.Check(s.Target > 0, "target", "must be > 0, got %v", s.Target)
	p.Check(s.Delta > 0, "delta", "must be > 0, got %v", s.Delta)
	p.Check(s.MinCoef >= 0, "min_coef", "must be >= 0, got %v", s.MinCoef)
	p.Check(s.MaxCoef >= s.MinCoef, "max_coef", "must be >= min_coef (%v), got %v", s.MinCoef, s.MaxCoef)
	p.Check(s.Init >= s.MinCoef && s.Init <= s.MaxCoef, "init", "must be in [min_coef, max_coef] = [%v, %v], got %v", s.MinCoef, s.MaxCoef, s.Init)
	if err := p.Err(); err != nil {
		return nil, err
	}
	s.state = state{Coef: s.Init, Prev: s.Init, Step: -1}
	return s, nil
}

// Name returns "adaptive_entropy".
func (s *Adaptive) Name() string { return "adaptive_entropy" }

// Needs asks for the per-token entropies.
func (s *Adaptive) Needs() core.Needs { return core.Needs{Entropies: true} }

// Coef is the controller's current c (for the next step).
func (s *Adaptive) Coef() float64 { return s.state.Coef }

// TokenLoss returns EntropyCoef = alpha_k and advances c (see the package doc).
func (s *Adaptive) TokenLoss(info core.StepInfo, r *core.Rollout) (core.TokenLoss, error) {
	sum, n := 0.0, 0
	for i := range r.Seqs {
		q := &r.Seqs[i]
		if len(q.Entropies) != q.Len() {
			return core.TokenLoss{}, fmt.Errorf("sequence %d: %d entropies for %d tokens", i, len(q.Entropies), q.Len())
		}
		for _, h := range q.Entropies {
			sum += h
			n++
		}
	}
	if n == 0 {
		return core.TokenLoss{}, fmt.Errorf("no tokens: the batch's entropy is undefined")
	}
	e := sum / float64(n)
	c, off := s.state.Coef, s.state.Off
	if info.Step == s.state.Step {
		c, off = s.state.Prev, s.state.PrevOff // a repeated call for the step just updated
	}
	alpha := 0.0
	if s.Previous && !off || !s.Previous && e <= s.Target {
		alpha = c
	}
	next := c
	switch {
	case e < s.Target:
		next = c + s.Delta
	case e > s.Target || s.Previous:
		next = c - s.Delta
	}
	s.state = state{Coef: math.Min(math.Max(next, s.MinCoef), s.MaxCoef), Prev: c, Step: info.Step,
		Off: s.Previous && e >= s.Target, PrevOff: off}
	return core.TokenLoss{EntropyCoef: alpha}, nil
}

// Observe reports the controller after the step:
// explore/adaptive_entropy/next_coef (c for the next step) and
// explore/adaptive_entropy/batch_entropy (e_k, the step's mean token
// entropy, when the batch has tokens with entropies).
func (s *Adaptive) Observe(_ core.StepInfo, r *core.Rollout) (map[string]float64, error) {
	m := map[string]float64{"explore/adaptive_entropy/next_coef": s.state.Coef}
	sum, n := 0.0, 0
	for i := range r.Seqs {
		for _, h := range r.Seqs[i].Entropies {
			sum += h
			n++
		}
	}
	if n > 0 {
		m["explore/adaptive_entropy/batch_entropy"] = sum / float64(n)
	}
	return m, nil
}

// SaveState returns the controller's state as JSON.
func (s *Adaptive) SaveState() ([]byte, error) { return json.Marshal(s.state) }

// LoadState restores a state written by SaveState.
func (s *Adaptive) LoadState(data []byte) error {
	var st state
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("adaptive_entropy: state: %w", err)
	}
	for _, x := range []float64{st.Coef, st.Prev} {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("adaptive_entropy: state: coefficient %v is not finite", x)
		}
	}
	s.state = st
	return nil
}

// Unweighted marks that the strategy takes no `weight:` (core.Unweighted).
func (s *Adaptive) Unweighted() {}
