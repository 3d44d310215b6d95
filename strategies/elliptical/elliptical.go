// Package elliptical implements the elliptical bonus of representation-based
// exploration, registered as strategy "elliptical": Tuyls, Foster et al.
// 2025, "Representation-Based Exploration for Language Models: From
// Test-Time to Post-Training", arXiv 2510.11686; the authors' recipe is
// verl's recipe/rep_exp (elliptical_reward_model_worker.py and its
// elliptical reward manager). A response whose representation points
// where the group's other responses do not is paid more.
//
// Per step, with h_i the mean of response i's last-layer hidden states
// over its tokens (Needs.Pooling "mean"), and P a k x d sparse random
// projection:
//
//	phi_i = P h_i - mean_{j in g} P h_j                 (centred within the prompt's group g)
//	A_g   = lambda I + sum_{j in g} phi_j phi_j^T      (k x k)
//	B_i   = sqrt(phi_i^T A_g^-1 phi_i)                  (form: sqrt; form: leverage drops the sqrt)
//	bonus_i = w_t * beta * B_i,  and 0 for every response of a group with no correct response
//
// As the recipe builds it (the settings its training script runs): the
// states are projected to k dimensions (sparse_dim: 32 for MATH and
// GSM8K, 128 for DAPO in the paper), in float64; each group is centred
// by its own mean and gets a fresh A from lambda I (lambda 0.01) by rank-one
// updates, with no covariance kept across steps (persist_covariance
// false); the projection is drawn anew each step (randomize_sparse_matrix);
// the bonus is the leverage phi^T A^-1 phi of each response with itself
// included; no normalisation; the reward is r + beta * bonus with beta
// 0.01; a group where no response is correct gets no bonus
// (turn_off_elliptical_if_none_correct). The issue that asked for this
// strategy writes the bonus as sqrt(phi^T A^-1 phi), which is our default
// (form: sqrt); form: leverage is the recipe's script.
//
// The projection: P has the distribution of scikit-learn's
// SparseRandomProjection with density "auto", which the recipe calls:
// entries +-sqrt(1/(s k)) with probability s/2 each and 0 otherwise, s =
// 1/sqrt(d). We draw it with our own generator from (projection_seed,
// step), so it is not scikit-learn's draw.
//
// Config keys: sparse_dim (integer 1..1024, default 32), lambda (> 0,
// default 0.01), beta (> 0, default 0.01), form (sqrt | leverage, default
// sqrt), gate_none_correct (default true), projection_seed (integer >= 0,
// default 1), and the entry's weight (a schedule,
// default constant 1), which the trainer applies to what the strategy
// returns.
//
// Metrics (Observe): elliptical/bonus_raw_mean (the mean B_i before beta
// and the weight, over the responses of groups not gated off).
package elliptical

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/cde-rl/cde/core"
)

func init() {
	core.RegisterStrategy("elliptical", New)
}

// Forms are the values of the form key.
var Forms = []string{"sqrt", "leverage"}

// Elliptical is the representation-based bonus. It keeps no state across
// steps.
type Elliptical struct {
	SparseDim       int
	Lambda, Beta    float64
	Form            string
	GateNoneCorrect bool
	ProjectionSeed  uint64
	lastRaw         []float64
	lastGated       []bool
	fixedProjection [][]float64 // tests: used instead of a random draw
}

// New builds the strategy from a `strategies:` entry; it works with any
// algorithm.
func New(p *core.Params, _ core.Algorithm) (core.Strategy, error) {
	s := &Elliptical{
		SparseDim:       p.Int("sparse_dim", 32),
		Lambda:          p.Float("lambda", 0.01),
		Beta:            p.Float("beta", 0.01),
		Form:            p.OneOf("form", "sqrt", Forms...),
		GateNoneCorrect: p.Bool("gate_none_correct", true),
	}
	p.Check(s.SparseDim >= 1 && s.SparseDim <= 1024, "sparse_dim", "must be in 1..1024, got %d", s.SparseDim)
	p.Check(s.Lambda > 0 && !math.IsInf(s.Lambda, 0), "lambda", "must be a finite number > 0, got %v", s.Lambda)
	p.Check(s.Beta > 0 && !math.IsInf(s.Beta, 0), "beta", "must be a finite number > 0, got %v", s.Beta)
	seed := p.Int("projection_seed", 1)
	p.Check(seed >= 0, "projection_seed", "must be >= 0, got %d", seed)
	s.ProjectionSeed = uint64(max(seed, 0))
	if err := p.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

// Name returns "elliptical".
func (s *Elliptical) Name() string { return "elliptical" }

// Needs asks for the mean-pooled last-layer hidden states and, with
// gate_none_correct, the verifier's verdicts (the gate reads them).
func (s *Elliptical) Needs() core.Needs {
	return core.Needs{Pooling: "mean", Correct: s.GateNoneCorrect}
}

// Projection is the k x d sparse random projection of a step (see the
// package doc), drawn from (seed, step).
func Projection(seed uint64, step, k, d int) [][]float64 {
	rng := rand.New(rand.NewPCG(seed, 0xe11*uint64(step+1)))
	density := 1 / math.Sqrt(float64(d))
	v := math.Sqrt(1 / (density * float64(k)))
	p := make([][]float64, k)
	for i := range p {
		p[i] = make([]float64, d)
		for j := range p[i] {
			if u := rng.Float64(); u < density/2 {
				p[i][j] = v
			} else if u < density {
				p[i][j] = -v
			}
		}
	}
	return p
}

// RewardBonus returns w_t * beta * B_i for every response (0 in a group
// gated off).
func (s *Elliptical) RewardBonus(info core.StepInfo, r *core.Rollout) ([]float64, error) {
	out := make([]float64, len(r.Seqs))
	s.lastRaw, s.lastGated = make([]float64, len(r.Seqs)), make([]bool, len(r.Seqs))
	if len(r.Seqs) == 0 {
		return out, nil
	}
	d := len(r.Seqs[0].Embedding)
	for i := range r.Seqs {
		h := r.Seqs[i].Embedding
		if len(h) == 0 || len(h) != d {
			return nil, fmt.Errorf("elliptical: sequence %d: embedding of length %d (want %d > 0: the backend must pool hidden states by mean)", i, len(h), d)
		}
		for j, x := range h {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, fmt.Errorf("elliptical: sequence %d: embedding[%d] = %v is not finite", i, j, x)
			}
		}
	}
	proj := s.fixedProjection
	if proj == nil {
		proj = Projection(s.ProjectionSeed, info.Step, s.SparseDim, d)
	}
	for _, g := range r.Groups() {
		anyCorrect := false
		for _, i := range g {
			anyCorrect = anyCorrect || r.Seqs[i].Correct
		}
		if s.GateNoneCorrect && !anyCorrect {
			for _, i := range g {
				s.lastGated[i] = true
			}
			continue
		}
		phis := make([][]float64, len(g))
		for k, i := range g {
			phis[k] = matVec(proj, r.Seqs[i].Embedding)
		}
		raw := Bonuses(phis, s.Lambda, s.Form == "leverage")
		for k, i := range g {
			s.lastRaw[i] = raw[k]
			out[i] = s.Beta * raw[k]
		}
	}
	return out, nil
}

// Bonuses is B_i of the package doc for one group's projected states
// (before centring): they are centred by their mean, A = lambda I +
// sum phi phi^T is inverted by rank-one (Sherman-Morrison) updates from
// I/lambda, as the recipe does, and B_i = phi_i^T A^-1 phi_i (leverage) or
// its square root.
func Bonuses(phis [][]float64, lambda float64, leverage bool) []float64 {
	n := len(phis)
	if n == 0 {
		return nil
	}
	k := len(phis[0])
	mean := make([]float64, k)
	for _, p := range phis {
		for j, x := range p {
			mean[j] += x / float64(n)
		}
	}
	c := make([][]float64, n)
	for i, p := range phis {
		c[i] = make([]float64, k)
		for j := range p {
			c[i][j] = p[j] - mean[j]
		}
	}
	inv := make([][]float64, k)
	for i := range inv {
		inv[i] = make([]float64, k)
		inv[i][i] = 1 / lambda
	}
	for _, x := range c {
		// A^-1 <- A^-1 - (A^-1 x)(A^-1 x)^T / (1 + x^T A^-1 x); A^-1 is
		// symmetric, so x^T A^-1 = (A^-1 x)^T.
		ax := matVec(inv, x)
		den := 1 + dot(x, ax)
		for a := range k {
			for b := range k {
				inv[a][b] -= ax[a] * ax[b] / den
			}
		}
	}
	out := make([]float64, n)
	for i, x := range c {
		q := max(dot(x, matVec(inv, x)), 0)
		if !leverage {
			q = math.Sqrt(q)
		}
		out[i] = q
	}
	return out
}

func matVec(m [][]float64, v []float64) []float64 {
	out := make([]float64, len(m))
	for i, row := range m {
		out[i] = dot(row, v)
	}
	return out
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// Observe reports the mean raw bonus over the responses not gated off.
func (s *Elliptical) Observe(info core.StepInfo, r *core.Rollout) (map[string]float64, error) {
	sum, n := 0.0, 0
	for i, raw := range s.lastRaw {
		if i < len(s.lastGated) && !s.lastGated[i] {
			sum += raw
			n++
		}
	}
	m := map[string]float64{}
	if n > 0 {
		m["elliptical/bonus_raw_mean"] = sum / float64(n)
	}
	return m, nil
}
