package trainer

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
)

// tokenStrategy is a TokenLossHook returning fixed weights: pg[t] and
// kl[t] on token t of every sequence (nil rows when the slice is nil),
// and ent as entropy coefficient; fault breaks its answer.
type tokenStrategy struct {
	name    string
	pg, kl  []float64
	ent     float64
	fault   string
	calls   int
	sawAdvs [][]float64
}

func (s *tokenStrategy) Name() string      { return s.name }
func (s *tokenStrategy) Needs() core.Needs { return core.Needs{} }
func (s *tokenStrategy) TokenLoss(info core.StepInfo, r *core.Rollout) (core.TokenLoss, error) {
	s.calls++
	s.sawAdvs = nil
	for _, q := range r.Seqs {
		s.sawAdvs = append(s.sawAdvs, slices.Clone(q.Advantages))
	}
	rows := func(x []float64) [][]float64 {
		if x == nil {
			return nil
		}
		out := make([][]float64, len(r.Seqs))
		for i := range out {
			out[i] = slices.Clone(x[:r.Seqs[i].Len()])
		}
		return out
	}
	tl := core.TokenLoss{PGWeight: rows(s.pg), AbsKLCoef: rows(s.kl), EntropyCoef: s.ent}
	switch s.fault {
	case "negative":
		tl.PGWeight[1][0] = -1
	case "short":
		tl.AbsKLCoef = tl.AbsKLCoef[:1]
	case "nan":
		tl.EntropyCoef = math.NaN()
	}
	return tl, nil
}

// Two hooks on the fake batch (4 sequences of 2 tokens): PGWeight rows
// multiply ({0, 1} x {0.5, 0.5} = {0, 0.5}), AbsKLCoef rows add (only b
// sets them: {0.25, 0}), entropy coefficients add to train.entropy_coef
// (0.01 + 0.02 + 0.003); the hooks see the finalised advantages. A
// recStrategy with zero bonuses supplies the head masks the fake critic
// wants.
func TestStepTokenLoss(t *testing.T) {
	var log []string
	cfg := fakeConfig(t, 1, 1)
	cfg.Train.EntropyCoef = 0.01
	a := &tokenStrategy{name: "a", pg: []float64{0, 1}, ent: 0.02}
	b := &tokenStrategy{name: "b", pg: []float64{0.5, 0.5}, kl: []float64{0.25, 0}, ent: 0.003}
	be := &recBackend{log: &log}
	algo := &recAlgo{log: &log}
	masker := &recStrategy{name: "masks", log: &log} // recBackend's critic wants head masks
	tr := &Trainer{Cfg: cfg, Task: fakeTask{}, Backend: be, Algo: algo, Strategies: []core.Strategy{masker, a, b}, RunDir: t.TempDir()}
	var err error
	if tr.needs, err = tr.Needs(); err != nil {
		t.Fatal(err)
	}
	m := map[string]float64{}
	if err := tr.Step(0, m); err != nil {
		t.Fatal(err)
	}
	if a.calls != 1 || b.calls != 1 {
		t.Fatalf("calls %d %d, want 1 1", a.calls, b.calls)
	}
	r := be.lastR
	for i, s := range r.Seqs {
		if !slices.Equal(s.PGWeight, []float64{0, 0.5}) || !slices.Equal(s.AbsKLCoef, []float64{0.25, 0}) {
			t.Errorf("seq %d: pg weight %v abs-KL %v, want [0 0.5] [0.25 0]", i, s.PGWeight, s.AbsKLCoef)
		}
		if !slices.Equal(a.sawAdvs[i], algo.finalized[i]) {
			t.Errorf("seq %d: the hook saw advantages %v, finalised %v", i, a.sawAdvs[i], algo.finalized[i])
		}
	}
	if math.Abs(be.lastActor.EntropyCoef-0.033) > 1e-12 {
		t.Errorf("entropy coef %v, want 0.033", be.lastActor.EntropyCoef)
	}
	for k, want := range map[string]float64{"explore/a/pg_weight_mean": 0.5, "explore/b/pg_weight_mean": 0.5,
		"explore/b/abs_kl_coef_mean": 0.125, "explore/a/entropy_coef": 0.02, "explore/b/entropy_coef": 0.003} {
		if got, ok := m[k]; !ok || math.Abs(got-want) > 1e-12 {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, want)
		}
	}
	if _, ok := m["explore/a/abs_kl_coef_mean"]; ok {
		t.Errorf("explore/a/abs_kl_coef_mean reported for a hook without AbsKLCoef")
	}
	// A zero entropy coefficient is not logged.
	a.ent = 0
	m = map[string]float64{}
	if err := tr.Step(0, m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["explore/a/entropy_coef"]; ok {
		t.Errorf("explore/a/entropy_coef reported for a zero coefficient")
	}
	// A second step starts from nil weights again (no hook: nil stays).
	tr.Strategies = []core.Strategy{masker}
	if err := tr.Step(0, map[string]float64{}); err != nil {
		t.Fatal(err)
	}
	for i, s := range be.lastR.Seqs {
		if s.PGWeight != nil || s.AbsKLCoef != nil {
			t.Errorf("seq %d without hooks: %v %v, want nil", i, s.PGWeight, s.AbsKLCoef)
		}
	}
}

func TestStepRejectsBadTokenLoss(t *testing.T) {
	for _, tc := range []struct{ fault, want string }{
		{"negative", "strategies[0] (bad): token loss: PGWeight: sequence 1 token 0: -1 is not a finite weight >= 0"},
		{"short", "strategies[0] (bad): token loss: AbsKLCoef: 1 rows for 4 sequences"},
		{"nan", "strategies[0] (bad): token loss: non-finite entropy coefficient NaN"},
	} {
		var log []string
		bad := &tokenStrategy{name: "bad", pg: []float64{1, 1}, kl: []float64{0, 0}, fault: tc.fault}
		tr := &Trainer{Cfg: fakeConfig(t, 1, 1), Task: fakeTask{}, Backend: &recBackend{log: &log}, Algo: &recAlgo{log: &log},
			Strategies: []core.Strategy{bad}, RunDir: t.TempDir()}
		var err error
		if tr.needs, err = tr.Needs(); err != nil {
			t.Fatal(err)
		}
		if err := tr.Step(0, map[string]float64{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v\nwant %s", tc.fault, err, tc.want)
		}
	}
}
