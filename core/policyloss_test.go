package core

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// noSuchLoss is a train.policy_loss no one will register.
const noSuchLoss = "no-such-loss-§"

// lossesTaking lists, as CheckPolicyLoss's errors do, the registered losses
// with a setting: derived from the registry, so that a loss added in-tree
// (one taking ratio_level: sequence, say) does not break the tests below.
func lossesTaking(takes func(PolicyLossDef) bool) string {
	var out []string
	for _, n := range PolicyLosses() {
		if d, _ := LookupPolicyLoss(n); takes(d) {
			out = append(out, n)
		}
	}
	return strings.Join(out, ", ")
}

func takesSequenceRatio(d PolicyLossDef) bool { return d.SequenceRatio }
func takesDualClip(d PolicyLossDef) bool      { return d.DualClip }

// lossBatch is a hand-worked minibatch (clip_low = clip_high = 0.2, old
// log-probs 0, so the ratio is exp(new)):
//
//	s0: T=2, A=+1, rho = 1.5, 0.9: token 0 takes the clipped branch
//	    (-1.2 > -1.5) with rho past 1.2, so pg = -1.2 and no gradient;
//	    token 1 is inside the range: pg = -0.9, d pg/d new = -A*rho = -0.9.
//	s1: T=1, A=-2, rho = 0.5: loss1 = 1.0, loss2 = 2*0.8 = 1.6: clipped,
//	    rho below 0.8: pg = 1.6, no gradient.
//	s2: T=1, A=-1, rho = 4: loss1 = 4 > loss2 = 1.2: pg = 4, gradient
//	    -A*rho = 4; with the dual clip c = 3, pg = min(4, 3) = 3, no gradient.
//
// Sum of pg = -1.2 - 0.9 + 1.6 + 4 = 3.5 (2.5 with c = 3); N = 4 tokens,
// B = 3 sequences; clipped branch at s0 t0 and s1: clipfrac 2/4.
func lossBatch() []LossSeq {
	return []LossSeq{
		{OldLogProbs: []float64{0, 0}, NewLogProbs: []float64{math.Log(1.5), math.Log(0.9)}, Advantages: []float64{1, 1}},
		{OldLogProbs: []float64{0}, NewLogProbs: []float64{math.Log(0.5)}, Advantages: []float64{-2}},
		{OldLogProbs: []float64{0}, NewLogProbs: []float64{math.Log(4)}, Advantages: []float64{-1}},
	}
}

func TestPolicyLossHandWorked(t *testing.T) {
	cases := []struct {
		name string
		o    PolicyLossOptions
		loss float64
		coef [][]float64
	}{
		// 3.5 / 4; coefficients d pg / 4.
		{"token-mean", PolicyLossOptions{AggMode: AggTokenMean}, 0.875, [][]float64{{0, -0.225}, {0}, {1}}},
		// (1/3) * ((-1.2 - 0.9)/2 + 1.6 + 4) = 4.55/3; s0 weights 1/(3*2), s1 and s2 1/3.
		{"seq-mean-token-mean", PolicyLossOptions{AggMode: AggSeqMeanTokenMean}, 4.55 / 3, [][]float64{{0, -0.15}, {0}, {4.0 / 3}}},
		// 3.5 / 3; every token weighs 1/3.
		{"seq-mean-token-sum", PolicyLossOptions{AggMode: AggSeqMeanTokenSum}, 3.5 / 3, [][]float64{{0, -0.3}, {0}, {4.0 / 3}}},
		// 3.5 / (3 * Lmax), Lmax = 4: 3.5/12; every token weighs 1/12.
		{"seq-mean-token-sum-norm", PolicyLossOptions{AggMode: AggSeqMeanTokenSumNorm, MaxResponseTokens: 4}, 3.5 / 12, [][]float64{{0, -0.075}, {0}, {1.0 / 3}}},
		// Dual clip c = 3 caps s2 at 3: 2.5 / 4; s2 passes no gradient.
		{"token-mean dual clip", PolicyLossOptions{AggMode: AggTokenMean, ClipRatioC: 3}, 0.625, [][]float64{{0, -0.225}, {0}, {0}}},
		// c = 5 is above s2's 4: no cap, as without the dual clip.
		{"token-mean dual clip inactive", PolicyLossOptions{AggMode: AggTokenMean, ClipRatioC: 5}, 0.875, [][]float64{{0, -0.225}, {0}, {1}}},
		// Dual clip with seq-mean-token-sum: (2.5)/3.
		{"seq-mean-token-sum dual clip", PolicyLossOptions{AggMode: AggSeqMeanTokenSum, ClipRatioC: 3}, 2.5 / 3, [][]float64{{0, -0.3}, {0}, {0}}},
	}
	for _, c := range cases {
		c.o.ClipLow, c.o.ClipHigh = 0.2, 0.2
		res, err := PolicyLoss(lossBatch(), c.o)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if math.Abs(res.PGLoss-c.loss) > 1e-12 {
			t.Errorf("%s: loss %v, want %v", c.name, res.PGLoss, c.loss)
		}
		if math.Abs(res.ClipFrac-0.5) > 1e-12 {
			t.Errorf("%s: clipfrac %v, want 0.5", c.name, res.ClipFrac)
		}
		for i := range c.coef {
			for tk := range c.coef[i] {
				if math.Abs(res.PGCoef[i][tk]-c.coef[i][tk]) > 1e-12 {
					t.Errorf("%s: coef[%d][%d] = %v, want %v", c.name, i, tk, res.PGCoef[i][tk], c.coef[i][tk])
				}
			}
		}
		if res.KLCoef != nil || res.KL != 0 {
			t.Errorf("%s: KL without reference log-probs: %v %v", c.name, res.KL, res.KLCoef)
		}
	}
}

// GSPO, clip 0.05 both sides. sA: log-ratios ln 2 and -ln 2 average to 0,
// s = 1, inside the range: pg = -1 on both tokens, d/d new_t = w*(-A)*s = -w.
// sB: log-ratios 2 ln 1.1 and 0 average to ln 1.1, s = 1.1 > 1.05: clipped,
// pg = -1.05 on both tokens, no gradient. token-mean: (-2 - 2.1)/4 =
// -1.025, w = 1/4. This is GSPO's objective: the mean over the two
// sequences of min(s A, clip(s) A), -(1 + 1.05)/2, with d/d new_t of
// -s_A/2 = -(s_A/T)/2 = -0.25. The token ratio instead clips sB's first
// token (1.21) and keeps the second (1.0): sB's coefficients 0, -0.25.
func TestPolicyLossSequenceRatio(t *testing.T) {
	ln := math.Log
	seqs := []LossSeq{
		{OldLogProbs: []float64{-1, -1}, NewLogProbs: []float64{-1 + ln(2), -1 - ln(2)}, Advantages: []float64{1, 1}},
		{OldLogProbs: []float64{-2, -2}, NewLogProbs: []float64{-2 + 2*ln(1.1), -2}, Advantages: []float64{1, 1}},
	}
	o := PolicyLossOptions{ClipLow: 0.05, ClipHigh: 0.05, RatioLevel: RatioSequence}
	res, err := PolicyLoss(seqs, o)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]float64{{-0.25, -0.25}, {0, 0}}
	if math.Abs(res.PGLoss+1.025) > 1e-12 {
		t.Errorf("sequence: loss %v, want -1.025", res.PGLoss)
	}
	for i := range want {
		for tk := range want[i] {
			if math.Abs(res.PGCoef[i][tk]-want[i][tk]) > 1e-12 {
				t.Errorf("sequence: coef[%d][%d] = %v, want %v", i, tk, res.PGCoef[i][tk], want[i][tk])
			}
		}
	}
	// seq-mean-token-mean: the same here (equal lengths).
	o.AggMode = AggSeqMeanTokenMean
	if res, _ := PolicyLoss(seqs, o); math.Abs(res.PGLoss+1.025) > 1e-12 {
		t.Errorf("sequence, seq-mean-token-mean: loss %v, want -1.025", res.PGLoss)
	}
	o.RatioLevel, o.AggMode = RatioToken, AggTokenMean
	res, _ = PolicyLoss(seqs, o)
	// sA: rho 2 (clipped, -1.05) and 0.5 (A > 0: loss1 = -0.5 > -0.95? no:
	// loss1 = -0.5, loss2 = -0.95, max -0.5, unclipped, gradient -0.5);
	// sB: -1.05 (clipped) and -1: total (-1.05 - 0.5 - 1.05 - 1)/4 = -0.9.
	if math.Abs(res.PGLoss+0.9) > 1e-12 {
		t.Errorf("token: loss %v, want -0.9", res.PGLoss)
	}
	want = [][]float64{{0, -0.125}, {0, -0.25}}
	for i := range want {
		for tk := range want[i] {
			if math.Abs(res.PGCoef[i][tk]-want[i][tk]) > 1e-12 {
				t.Errorf("token: coef[%d][%d] = %v, want %v", i, tk, res.PGCoef[i][tk], want[i][tk])
			}
		}
	}
}

// One token, log pi = 0 and log pi_ref = ln 2 (log r = ln 2):
// k1 = -ln 2, d/d new = 1; k2 = (ln 2)^2/2, d/d new = -ln 2;
// k3 = 2 - ln 2 - 1 = 1 - ln 2, d/d new = 1 - 2 = -1.
func TestPolicyLossKLEstimators(t *testing.T) {
	l2 := math.Ln2
	for _, c := range []struct {
		est      string
		kl, dNew float64
	}{{"k1", -l2, 1}, {"k2", l2 * l2 / 2, -l2}, {"k3", 1 - l2, -1}} {
		seqs := []LossSeq{{OldLogProbs: []float64{0}, NewLogProbs: []float64{0}, RefLogProbs: []float64{l2}, Advantages: []float64{0}}}
		res, err := PolicyLoss(seqs, PolicyLossOptions{ClipLow: 0.2, ClipHigh: 0.2, KLEstimator: c.est})
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(res.KL-c.kl) > 1e-12 || math.Abs(res.KLCoef[0][0]-c.dNew) > 1e-12 {
			t.Errorf("%s: KL %v coef %v, want %v %v", c.est, res.KL, res.KLCoef[0][0], c.kl, c.dNew)
		}
	}
}

func TestPolicyLossErrors(t *testing.T) {
	good := lossBatch()
	for _, c := range []struct {
		seqs []LossSeq
		o    PolicyLossOptions
		want string
	}{
		{nil, PolicyLossOptions{}, "no sequences"},
		{[]LossSeq{{OldLogProbs: []float64{0}, NewLogProbs: []float64{0, 0}, Advantages: []float64{1, 1}}}, PolicyLossOptions{}, "sequence 0"},
		{good, PolicyLossOptions{AggMode: "mean"}, `train.loss_agg_mode "mean"`},
		{good, PolicyLossOptions{RatioLevel: "group"}, `train.ratio_level "group"`},
		{good, PolicyLossOptions{AggMode: AggSeqMeanTokenSumNorm}, "max_response_tokens"},
	} {
		if _, err := PolicyLoss(c.seqs, c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", c.o, err, c.want)
		}
	}
}

// Token weights (TokenLoss) on lossBatch, token-mean (N = 4, w = 1/4),
// clip 0.2:
//
//	PGWeight s0 = {0, 2}: token 0 (pg -1.2) drops out, token 1 counts
//	twice: 2 * -0.9 = -1.8, coefficient 2 * -0.9 / 4 = -0.45.
//	AbsKLCoef s1 = {0.5}: new - old = ln 0.5 < 0, so the term is
//	0.5 * ln 2 and its derivative 0.5 * -1; s1's pg 1.6 has no gradient:
//	coefficient (0 + 0.5 * -1)/4 = -0.125.
//	s2 unweighted: pg 4, coefficient 1.
//
// loss = (-1.8 + 1.6 + 0.5 ln 2 + 4)/4 = (3.8 + 0.5 ln 2)/4. clipfrac is
// unweighted: 2/4.
func TestPolicyLossTokenWeights(t *testing.T) {
	seqs := lossBatch()
	seqs[0].PGWeight = []float64{0, 2}
	seqs[1].AbsKLCoef = []float64{0.5}
	res, err := PolicyLoss(seqs, PolicyLossOptions{ClipLow: 0.2, ClipHigh: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	if want := (3.8 + 0.5*math.Ln2) / 4; math.Abs(res.PGLoss-want) > 1e-12 {
		t.Errorf("loss %v, want %v", res.PGLoss, want)
	}
	want := [][]float64{{0, -0.45}, {-0.125}, {1}}
	for i := range want {
		for tk := range want[i] {
			if math.Abs(res.PGCoef[i][tk]-want[i][tk]) > 1e-12 {
				t.Errorf("coef[%d][%d] = %v, want %v", i, tk, res.PGCoef[i][tk], want[i][tk])
			}
		}
	}
	if math.Abs(res.ClipFrac-0.5) > 1e-12 {
		t.Errorf("clipfrac %v, want 0.5", res.ClipFrac)
	}
	// At new = old the absolute value's derivative is 0.
	res, _ = PolicyLoss([]LossSeq{{OldLogProbs: []float64{-1}, NewLogProbs: []float64{-1}, Advantages: []float64{0}, AbsKLCoef: []float64{3}}}, PolicyLossOptions{ClipLow: 0.2, ClipHigh: 0.2})
	if res.PGLoss != 0 || res.PGCoef[0][0] != 0 {
		t.Errorf("abs-KL at new = old: loss %v coef %v, want 0 0", res.PGLoss, res.PGCoef[0][0])
	}
	bad := lossBatch()
	bad[2].PGWeight = []float64{1, 1}
	if _, err := PolicyLoss(bad, PolicyLossOptions{}); err == nil || !strings.Contains(err.Error(), "sequence 2") {
		t.Errorf("a weight row of the wrong length: %v", err)
	}
}

// CISPO and GMPO worked by hand (clip_low 0.2, clip_high 0.28).
//
// CISPO, token-mean, one sequence: new - old = log 1.5, log 0.9 with A =
// 2, -1. Token 1: rho 1.5 is clipped to 1.28: pg = -1.28 * 2 * log 1.5,
// gradient -2.56 (kept, not zeroed as PPO would), clipped. Token 2: rho
// 0.9 is inside: pg = -0.9 * (-1) * log 0.9, gradient 0.9. Token-mean
// halves both.
//
// GMPO, two sequences. Sequence 1, A = 1, 1, log-ratios 0.5 and -0.1:
// 0.5 is clipped to 0.28 (the pessimistic side for A > 0), -0.1 is kept:
// mean 0.09, pg = -e^0.09, d pg / d new = (0, -e^0.09 / 2). Sequence 2, A
// = -1, -1, log-ratios -0.5 and 0.1: -0.5 is clipped to -0.2 (pessimistic
// for A < 0), 0.1 kept: mean -0.05, pg = e^-0.05, gradient (0, e^-0.05 /
// 2). The loss is the mean over the two sequences; 2 of 4 tokens clipped.
func TestCISPOAndGMPOByHand(t *testing.T) {
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-12 }
	l15, l09 := math.Log(1.5), math.Log(0.9)
	res, err := PolicyLoss([]LossSeq{{OldLogProbs: []float64{0, 0}, NewLogProbs: []float64{l15, l09}, Advantages: []float64{2, -1}}},
		PolicyLossOptions{ClipLow: 0.2, ClipHigh: 0.28, Loss: LossCISPO})
	if err != nil {
		t.Fatal(err)
	}
	if !near(res.PGLoss, (-1.28*2*l15+-0.9*-1*l09)/2) || !near(res.PGCoef[0][0], -1.28) || !near(res.PGCoef[0][1], 0.45) || res.ClipFrac != 0.5 {
		t.Errorf("cispo: %+v", res)
	}
	gm := []LossSeq{
		{OldLogProbs: []float64{0, 0}, NewLogProbs: []float64{0.5, -0.1}, Advantages: []float64{1, 1}},
		{OldLogProbs: []float64{0, 0}, NewLogProbs: []float64{-0.5, 0.1}, Advantages: []float64{-1, -1}},
	}
	for _, agg := range LossAggModes { // GMPO's mean over sequences whatever loss_agg_mode says
		res, err = PolicyLoss(gm, PolicyLossOptions{ClipLow: 0.2, ClipHigh: 0.28, Loss: LossGMPO, AggMode: agg, MaxResponseTokens: 4})
		if err != nil {
			t.Fatal(err)
		}
		e1, e2 := math.Exp(0.09), math.Exp(-0.05)
		if !near(res.PGLoss, (-e1+e2)/2) || res.PGCoef[0][0] != 0 || !near(res.PGCoef[0][1], -e1/4) ||
			res.PGCoef[1][0] != 0 || !near(res.PGCoef[1][1], e2/4) || res.ClipFrac != 0.5 {
			t.Errorf("gmpo %s: %+v", agg, res)
		}
	}
	for _, c := range []struct {
		o    PolicyLossOptions
		seqs []LossSeq
		want string
	}{
		{PolicyLossOptions{Loss: LossCISPO, RatioLevel: RatioSequence}, gm, "ratio_level sequence (GSPO) is not a setting of this loss (losses that take it: " + lossesTaking(takesSequenceRatio) + ")"},
		{PolicyLossOptions{Loss: LossGMPO, ClipRatioC: 3}, gm, "clip_ratio_c (the dual clip) is not a setting of this loss (losses that take it: " + lossesTaking(takesDualClip) + ")"},
		{PolicyLossOptions{Loss: noSuchLoss}, gm, `train.policy_loss "` + noSuchLoss + `": unknown`},
		{PolicyLossOptions{Loss: LossGMPO}, []LossSeq{{OldLogProbs: []float64{0}, NewLogProbs: []float64{0}, Advantages: []float64{1}, PGWeight: []float64{1}}},
			"gmpo is a sequence-level loss"},
	} {
		if _, err := PolicyLoss(c.seqs, c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
}

// The registry: the built-in losses registered and the list sorted, a
// duplicate or malformed registration refused, an unknown name refused
// naming the known ones, and each setting refused by the losses that do not
// take it, naming those that do. The lists come from the registry, so a new
// loss does not break this test; that ppo takes both settings and cispo and
// gmpo neither is checked by name.
func TestPolicyLossRegistry(t *testing.T) {
	names := PolicyLosses()
	if !slices.IsSorted(names) {
		t.Errorf("PolicyLosses() = %v, not sorted", names)
	}
	for _, c := range []struct {
		name           string
		seqRatio, dual bool
	}{{LossPPO, true, true}, {LossCISPO, false, false}, {LossGMPO, false, false}} {
		if d, ok := LookupPolicyLoss(c.name); !ok || d.SequenceRatio != c.seqRatio || d.DualClip != c.dual {
			t.Errorf("built-in loss %s: registered %v, SequenceRatio %v, DualClip %v; want true, %v, %v (PolicyLosses() = %v)",
				c.name, ok, d.SequenceRatio, d.DualClip, c.seqRatio, c.dual, names)
		}
	}
	fixed := func(d PolicyLossDef) PolicyLossFactory { return func(*Params) (PolicyLossDef, error) { return d, nil } }
	for _, c := range []struct {
		name string
		f    PolicyLossFactory
		keys []string
		want string
	}{
		{LossPPO, fixed(PolicyLossDef{Token: ppoToken}), nil, "registered twice"},
		{"neither", fixed(PolicyLossDef{}), nil, "want exactly one of Token and Sequence"},
		{"both", fixed(PolicyLossDef{Token: ppoToken, Sequence: gmpoSequence}), nil, "want exactly one of Token and Sequence"},
		{"nil factory", nil, nil, "nil factory"},
		{"key twice", fixed(PolicyLossDef{Token: ppoToken, Values: map[string]float64{"a": 1}}), []string{"a", "a"}, `key "a" declared twice or empty`},
		{"empty key", fixed(PolicyLossDef{Token: ppoToken, Values: map[string]float64{"": 1}}), []string{""}, `key "" declared twice or empty`},
		{"fails at defaults", func(p *Params) (PolicyLossDef, error) {
			p.Fail("a", "no default")
			return PolicyLossDef{Token: ppoToken, Values: map[string]float64{"a": 0}}, p.Err()
		}, []string{"a"}, "its factory fails at its defaults: config: train.policy_loss_params.a: no default"},
		{"reads undeclared", func(p *Params) (PolicyLossDef, error) {
			return PolicyLossDef{Token: ppoToken, Values: map[string]float64{"a": p.Float("a", 1)}}, p.Err()
		}, nil, `its factory reads key "a", which it does not declare`},
		{"value missing", fixed(PolicyLossDef{Token: ppoToken}), []string{"a"}, "its factory's Values have keys [], its declared keys are [a]"},
		{"value undeclared", fixed(PolicyLossDef{Token: ppoToken, Values: map[string]float64{"a": 1, "b": 2}}), []string{"a"},
			"its factory's Values have keys [a b], its declared keys are [a]"},
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), c.want) {
					t.Errorf("RegisterPolicyLoss(%s): panic %v, want %q", c.name, r, c.want)
				}
			}()
			RegisterPolicyLoss(c.name, c.f, c.keys...)
		}()
		if _, ok := LookupPolicyLoss(c.name); ok && c.name != LossPPO {
			t.Errorf("RegisterPolicyLoss(%s) panicked but registered it", c.name)
		}
	}
	for _, c := range []struct {
		loss, level string
		dual        float64
		want        string
	}{
		{"", RatioSequence, 3, ""},
		{LossPPO, RatioSequence, 3, ""},
		{noSuchLoss, RatioToken, 0, `train.policy_loss "` + noSuchLoss + `": unknown (known: ` + strings.Join(names, ", ") + ")"},
		{LossCISPO, RatioSequence, 0, "train.policy_loss cispo: train.ratio_level sequence (GSPO) is not a setting of this loss (losses that take it: " + lossesTaking(takesSequenceRatio) + ")"},
		{LossGMPO, RatioToken, 3, "train.policy_loss gmpo: train.clip_ratio_c (the dual clip) is not a setting of this loss (losses that take it: " + lossesTaking(takesDualClip) + ")"},
	} {
		err := CheckPolicyLoss(c.loss, c.level, c.dual)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("CheckPolicyLoss(%q, %s, %v) = %v, want %q", c.loss, c.level, c.dual, err, c.want)
		}
	}
}

// lossesDeclaring lists the registered losses declaring key, as the
// config's errors name them (from the registry, so a new loss breaks no
// expectation here).
func lossesDeclaring(key string) string {
	var out []string
	for _, n := range PolicyLosses() {
		if keys, _ := PolicyLossKeys(n); slices.Contains(keys, key) {
			out = append(out, n)
		}
	}
	return strings.Join(out, ", ")
}

// A loss's keys (train.policy_loss_params) are read strictly by its
// factory: its declared keys and their defaults, the values it resolved,
// and every refusal naming the key, whether through NewPolicyLoss or
// PolicyLoss's LossParams.
func TestPolicyLossParams(t *testing.T) {
	if keys, ok := PolicyLossKeys(LossSAPO); !ok || !slices.Equal(keys, []string{"tau_neg", "tau_pos"}) {
		t.Errorf("PolicyLossKeys(sapo) = %v, %v", keys, ok)
	}
	for _, n := range []string{LossPPO, LossCISPO, LossGMPO} {
		if keys, ok := PolicyLossKeys(n); !ok || len(keys) != 0 {
			t.Errorf("PolicyLossKeys(%s) = %v, %v; want none", n, keys, ok)
		}
	}
	if _, ok := PolicyLossKeys(noSuchLoss); ok {
		t.Errorf("PolicyLossKeys(%q) found", noSuchLoss)
	}
	// The defaults, as docs/config.md states them, and values set.
	if d, _ := LookupPolicyLoss(LossSAPO); d.Values["tau_pos"] != 1 || d.Values["tau_neg"] != 1.05 || len(d.Values) != 2 {
		t.Errorf("sapo's defaults: %v, want tau_pos 1, tau_neg 1.05", d.Values)
	}
	d, err := NewPolicyLoss(LossSAPO, NewParams(PolicyLossParamsKey, map[string]any{"tau_pos": 0.5, "tau_neg": "2.5"}))
	if err != nil || d.Values["tau_pos"] != 0.5 || d.Values["tau_neg"] != 2.5 {
		t.Errorf("sapo at 0.5, 2.5: %v, %v", d.Values, err)
	}
	d, err = NewPolicyLoss(LossSAPO, NewParams(PolicyLossParamsKey, map[string]any{"tau_neg": 3}))
	if err != nil || d.Values["tau_pos"] != 1 || d.Values["tau_neg"] != 3 {
		t.Errorf("sapo with tau_neg 3 only: %v, %v", d.Values, err)
	}
	if d, err := NewPolicyLoss("", NewParams(PolicyLossParamsKey, nil)); err != nil || d.Token == nil || !d.DualClip {
		t.Errorf(`NewPolicyLoss("") is not ppo: %+v, %v`, d, err)
	}

	pre := "config: " + PolicyLossParamsKey + "."
	for _, c := range []struct {
		loss   string
		params map[string]any
		want   string
	}{
		{LossSAPO, map[string]any{"tau_pos": 0}, pre + "tau_pos: must be in [0.01, 100], got 0"},
		{LossSAPO, map[string]any{"tau_pos": 0.0099}, pre + "tau_pos: must be in [0.01, 100], got 0.0099"},
		{LossSAPO, map[string]any{"tau_neg": 100.5}, pre + "tau_neg: must be in [0.01, 100], got 100.5"},
		{LossSAPO, map[string]any{"tau_neg": -1}, pre + "tau_neg: must be in [0.01, 100], got -1"},
		{LossSAPO, map[string]any{"tau_neg": "warm"}, pre + "tau_neg: want a number, got \"warm\" (a string)"},
		{LossSAPO, map[string]any{"tau_pos": math.Inf(1)}, pre + "tau_pos: must be finite"},
		{LossSAPO, map[string]any{"tau": 1}, pre + "tau: unknown key (the keys of sapo: tau_neg, tau_pos)"},
		{LossPPO, map[string]any{"tau_pos": 1}, pre + "tau_pos: not a key of ppo (it belongs to " + lossesDeclaring("tau_pos") + ")"},
		{"", map[string]any{"bogus": 1}, pre + "bogus: unknown key (the keys of ppo: none)"},
		{LossCISPO, map[string]any{"tau_neg": 1}, pre + "tau_neg: not a key of cispo (it belongs to " + lossesDeclaring("tau_neg") + ")"},
		{LossGMPO, map[string]any{"clip": 0.4}, pre + "clip: unknown key (the keys of gmpo: none)"},
		{noSuchLoss, nil, `train.policy_loss "` + noSuchLoss + `": unknown`},
	} {
		p := NewParams(PolicyLossParamsKey, c.params)
		if _, err := NewPolicyLoss(c.loss, p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewPolicyLoss(%q, %v) = %v, want %q", c.loss, c.params, err, c.want)
		}
		if c.loss != noSuchLoss && (p.Err() == nil || !strings.Contains(p.Err().Error(), c.want)) {
			t.Errorf("NewPolicyLoss(%q, %v) recorded %v on its Params, want %q", c.loss, c.params, p.Err(), c.want)
		}
		seqs := []LossSeq{{OldLogProbs: []float64{0}, NewLogProbs: []float64{0}, Advantages: []float64{1}}}
		if _, err := PolicyLoss(seqs, PolicyLossOptions{Loss: c.loss, LossParams: c.params}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("PolicyLoss(%q, %v) = %v, want %q", c.loss, c.params, err, c.want)
		}
	}

	// A factory whose keys change the kind of loss it builds is refused
	// when it is built from them.
	const shifty = "test-shifting-kind-§"
	if _, done := LookupPolicyLoss(shifty); !done { // -count=2
		registerShifty(shifty)
	}
	if _, err := NewPolicyLoss(shifty, NewParams(PolicyLossParamsKey, map[string]any{"seq": 1})); err == nil || !strings.Contains(err.Error(), "a loss of another kind") {
		t.Errorf("a factory changing the kind of its loss: %v", err)
	}
}

func registerShifty(name string) {
	RegisterPolicyLoss(name, func(p *Params) (PolicyLossDef, error) {
		if p.Int("seq", 0) == 1 {
			return PolicyLossDef{Sequence: gmpoSequence, Values: map[string]float64{"seq": 1}}, p.Err()
		}
		return PolicyLossDef{Token: cispoToken, Values: map[string]float64{"seq": 0}}, p.Err()
	}, "seq")
}
