package xla

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
	"github.com/gomlx/compute"
	"github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
)

// TestActorLossMatchesReference holds the graph's actor loss (actorLoss, the
// function buildActorTrain calls) equal to core.PolicyLoss, the plain-Go
// reference, on random padded batches, for every registered policy loss
// (at its defaults, and at the values of its keys in lossParamCases) x
// loss_agg_mode x ratio_level x dual clip on/off x KL estimator it takes:
// the policy loss, the KL term, the clip fraction, and the gradients of
// both with respect to the current log-probs. The test graph feeds the log-probs in as a parameter
// (in training they come out of the model), so graph.Gradient with respect
// to that parameter is exactly d loss / d new_logprobs[t], the reference's
// PGCoef and KLCoef. Each batch mixes tokens inside and outside the clip
// range, negative and positive advantages, and (in some batches) a
// log-ratio past core.MaxLogRatio, which must pass no gradient. Batches 1
// and 2 carry the strategies' per-token weights (core.TokenLoss): PGWeight
// in {0, 0.5, 1, 2}, and in batch 2 also AbsKLCoef in [0, 1); batches 0 and
// 3 leave them nil (the graph gets 1 and 0).
//
// It runs on both engines a run can use here: GoMLX's pure-Go one and cde's
// own (engines/cpu, the default), and on the conformance reference
// (CDE_CONFORMANCE_REF) when that names another, as the GPU check's
// xla:cuda does.
func TestActorLossMatchesReference(t *testing.T) {
	engines := []string{"go", "cpu"}
	if ref := confRef(); !slices.Contains(engines, ref) {
		engines = append(engines, ref)
	}
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			be, err := NewEngine(engine, testPlugin(engine))
			if err != nil {
				t.Fatal(err)
			}
			defer be.Finalize()
			checkActorLoss(t, be)
		})
	}
}

func checkActorLoss(t *testing.T, be compute.Backend) {
	rng := rand.New(rand.NewPCG(7, 15))
	const B, T, Lmax = 4, 8, 10
	for batch := range 4 {
		// Random lengths 1..T (one row of length T), float32-exact inputs.
		lens := []int{T, 1 + rng.IntN(T), 1 + rng.IntN(T), 1 + rng.IntN(T)}
		mask := make([]float32, B*T)
		adv, oldLP, newLP, refLP := make([]float32, B*T), make([]float32, B*T), make([]float32, B*T), make([]float32, B*T)
		pgW, absKL := make([]float32, B*T), make([]float32, B*T)
		seqs := make([]core.LossSeq, B)
		spread := []float64{0.3, 0.05, 0.6, 0.2}[batch]
		for i := range B {
			seqA := rng.NormFloat64() // an outcome advantage for half the rows, per-token for the rest
			if batch == 3 && i == 0 {
				seqA = -1 // row 0 of batch 3: every log-ratio past the clamp, A < 0 (the unclipped branch)
			}
			s := core.LossSeq{}
			for tk := range lens[i] {
				p := i*T + tk
				mask[p] = 1
				a := seqA
				if i%2 == 1 {
					a = rng.NormFloat64()
				}
				adv[p] = float32(a)
				oldLP[p] = float32(-3 * rng.Float64())
				newLP[p] = float32(float64(oldLP[p]) + spread*rng.NormFloat64())
				refLP[p] = float32(float64(newLP[p]) + 0.5*rng.NormFloat64())
				if batch == 3 && i == 0 {
					newLP[p] = oldLP[p] + 25
				}
				if batch == 3 && tk == 0 {
					newLP[p] = oldLP[p] + float32([]float64{25, -25, 30, -21}[i]) // past the clamp
					refLP[p] = newLP[p] - 22
				}
				s.Advantages = append(s.Advantages, float64(adv[p]))
				s.OldLogProbs = append(s.OldLogProbs, float64(oldLP[p]))
				s.NewLogProbs = append(s.NewLogProbs, float64(newLP[p]))
				s.RefLogProbs = append(s.RefLogProbs, float64(refLP[p]))
				pgW[p] = 1
				if batch == 1 || batch == 2 {
					pgW[p] = float32([]float64{0, 0.5, 1, 2}[rng.IntN(4)])
					s.PGWeight = append(s.PGWeight, float64(pgW[p]))
				}
				if batch == 2 {
					absKL[p] = float32(rng.Float64())
					s.AbsKLCoef = append(s.AbsKLCoef, float64(absKL[p]))
				}
			}
			// Padding holds garbage that must not leak in.
			for tk := lens[i]; tk < T; tk++ {
				p := i*T + tk
				adv[p], oldLP[p], newLP[p], refLP[p], pgW[p], absKL[p] = 5, -1, -90, 3, 7, 9
			}
			seqs[i] = s
		}
		for _, lc := range lossCases(t) {
			loss, params, def := lc.loss, lc.params, lc.def
			for _, agg := range core.LossAggModes {
				for _, level := range []string{core.RatioToken, core.RatioSequence} {
					for _, dual := range []float64{0, 3} {
						for _, est := range core.KLEstimators {
							// Only the ratio level and dual clip the loss takes
							// (cispo, gmpo and sapo: the token ratio, no dual
							// clip); no token weights (batches 1 and 2) for a
							// sequence loss (gmpo); one KL estimator is
							// enough past ppo.
							if level == core.RatioSequence && !def.SequenceRatio || dual != 0 && !def.DualClip ||
								def.Sequence != nil && (batch == 1 || batch == 2) || loss != core.LossPPO && est != "k3" {
								continue
							}
							name := fmt.Sprintf("batch%d/%s%s/%s/%s/c=%v/%s", batch, loss, paramsLabel(params), agg, level, dual, est)
							u := core.ActorUpdate{ClipLow: 0.2, ClipHigh: 0.28, ClipRatioC: dual, LossAggMode: agg, PolicyLoss: loss,
								PolicyLossParams: params, RatioLevel: level, MaxResponseTokens: Lmax, KLEstimator: est, KLCoef: 0.1, Temperature: 1}
							if level == core.RatioSequence {
								u.ClipLow, u.ClipHigh = 0.03, 0.04 // GSPO's ranges are narrow (the paper: 3e-4, 4e-4)
							}
							hyper := make([]float32, hNum)
							if err := actorHyper(hyper, u); err != nil {
								t.Fatal(err)
							}
							want, err := core.PolicyLoss(seqs, core.PolicyLossOptions{ClipLow: u.ClipLow, ClipHigh: u.ClipHigh,
								ClipRatioC: dual, AggMode: agg, RatioLevel: level, MaxResponseTokens: Lmax, KLEstimator: est, Loss: loss, LossParams: params})
							if err != nil {
								t.Fatal(err)
							}
							out := graph.MustExecOnceN(be, func(in []*graph.Node) []*graph.Node {
								logp, mask, adv, oldLP, refLP, pgW, absKL, hyper := in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7]
								a := actorLoss(logp, graph.ZerosLike(logp), mask, adv, oldLP, refLP, pgW, absKL, hyper, loss)
								return []*graph.Node{a.pg, a.kl, a.clipFrac, graph.Gradient(a.pg, logp)[0], graph.Gradient(a.kl, logp)[0]}
							}, tensors.FromFlatDataAndDimensions(newLP, B, T), tensors.FromFlatDataAndDimensions(mask, B, T),
								tensors.FromFlatDataAndDimensions(adv, B, T), tensors.FromFlatDataAndDimensions(oldLP, B, T),
								tensors.FromFlatDataAndDimensions(refLP, B, T), tensors.FromFlatDataAndDimensions(pgW, B, T),
								tensors.FromFlatDataAndDimensions(absKL, B, T), tensors.FromFlatDataAndDimensions(hyper, hNum))
							got := make([][]float32, len(out))
							for k, o := range out {
								got[k] = tensors.MustCopyFlatData[float32](o)
							}
							close := func(g float32, w float64) bool {
								return math.Abs(float64(g)-w) <= 2e-4*(1+math.Abs(w))
							}
							for k, w := range []float64{want.PGLoss, want.KL, want.ClipFrac} {
								if !close(got[k][0], w) {
									t.Errorf("%s: %s = %v, reference %v", name, []string{"pg_loss", "kl", "clipfrac"}[k], got[k][0], w)
								}
							}
							for i := range B {
								for tk := range T {
									p := i*T + tk
									wPG, wKL := 0.0, 0.0
									if tk < lens[i] {
										wPG, wKL = want.PGCoef[i][tk], want.KLCoef[i][tk]
									}
									if !close(got[3][p], wPG) || !close(got[4][p], wKL) {
										t.Errorf("%s: seq %d token %d: d pg/d logp = %v, d kl/d logp = %v; reference %v, %v",
											name, i, tk, got[3][p], got[4][p], wPG, wKL)
									}
								}
							}
						}
					}
				}
			}
		}
	}
}

// lossParamCases are, for every policy loss with keys
// (train.policy_loss_params), values other than its defaults, every key
// moved off its default in each, under which TestActorLossMatchesReference
// holds the graph equal to the reference besides the defaults: a graph
// reading a constant, or the wrong key, in place of a key's value fails
// it. SAPO's two cases put tau_pos below and above tau_neg.
var lossParamCases = map[string][]map[string]any{
	core.LossSAPO: {{"tau_pos": 0.3, "tau_neg": 2.5}, {"tau_pos": 4, "tau_neg": 0.5}},
}

// lossCase is one policy loss and keys TestActorLossMatchesReference
// runs it with.
type lossCase struct {
	loss   string
	params map[string]any     // train.policy_loss_params; nil: the defaults
	def    core.PolicyLossDef // at the defaults
}

// lossCases are every registered loss at its defaults (params nil), and
// each with keys at its lossParamCases too. A case leaving a key at its
// default is an error (a loss with keys and no case is
// TestEveryPolicyLossHasAGraph's).
func lossCases(t *testing.T) []lossCase {
	var out []lossCase
	for _, loss := range core.PolicyLosses() {
		def, _ := core.LookupPolicyLoss(loss)
		out = append(out, lossCase{loss, nil, def})
		keys, _ := core.PolicyLossKeys(loss)
		for _, c := range lossParamCases[loss] {
			d, err := core.NewPolicyLoss(loss, core.NewParams(core.PolicyLossParamsKey, c))
			if err != nil {
				t.Fatalf("lossParamCases[%s] %v: %v", loss, c, err)
			}
			for _, k := range keys {
				if float32(d.Values[k]) == float32(def.Values[k]) {
					t.Errorf("lossParamCases[%s] %v leaves %s at its default %v", loss, c, k, def.Values[k])
				}
			}
			out = append(out, lossCase{loss, c, def})
		}
	}
	return out
}

// paramsLabel is a loss's keys for a case's name: "" at the defaults,
// else "(k=v,...)" in key order.
func paramsLabel(params map[string]any) string {
	if params == nil {
		return ""
	}
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(params)) {
		kv = append(kv, fmt.Sprintf("%s=%v", k, params[k]))
	}
	return "(" + strings.Join(kv, ",") + ")"
}

// noSuchLoss is a train.policy_loss no one will register.
const noSuchLoss = "no-such-loss-§"

// lossesTaking lists the registered losses with a setting, as the config's
// errors name them: from the registry, so that a new loss breaks no
// expectation here.
func lossesTaking(takes func(core.PolicyLossDef) bool) string {
	var out []string
	for _, n := range core.PolicyLosses() {
		if d, _ := core.LookupPolicyLoss(n); takes(d) {
			out = append(out, n)
		}
	}
	return strings.Join(out, ", ")
}

// actorHyper puts each option in its slot, one-hot where it chooses, and
// refuses a value the config would have refused, naming the key.
func TestActorHyper(t *testing.T) {
	h := make([]float32, hNum)
	if err := actorHyper(h, core.ActorUpdate{ClipLow: 0.1, ClipHigh: 0.3, ClipRatioC: 3, LossAggMode: core.AggSeqMeanTokenSumNorm,
		RatioLevel: core.RatioSequence, MaxResponseTokens: 16, KLEstimator: "k2", KLCoef: 0.5, EntropyCoef: 0.01, Temperature: 2}); err != nil {
		t.Fatal(err)
	}
	want := map[int]float32{hInvTemp: 0.5, hClipLow: 0.1, hClipHigh: 0.3, hEntCoef: 0.01, hKLCoef: 0.5, hClipRatioC: 3,
		hAggSeqMeanTokenSumNorm: 1, hMaxResponseTokens: 16, hSeqRatio: 1, hKLk2: 1}
	for i := range hNum {
		if h[i] != want[i] {
			t.Errorf("slot %d = %v, want %v", i, h[i], want[i])
		}
	}
	// A loss's keys go to their slots in key order, at the values
	// core.NewPolicyLoss resolves: set, or the loss's defaults.
	for _, c := range []struct {
		params map[string]any
		want   []float32 // tau_neg, tau_pos
	}{{map[string]any{"tau_pos": 0.3, "tau_neg": 2.5}, []float32{2.5, 0.3}}, {nil, []float32{1.05, 1}}, {map[string]any{"tau_pos": 4}, []float32{1.05, 4}}} {
		h = make([]float32, hNum)
		if err := actorHyper(h, core.ActorUpdate{PolicyLoss: core.LossSAPO, PolicyLossParams: c.params, Temperature: 1}); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(h[hLossParams:hLossParams+2], c.want) || slices.ContainsFunc(h[hLossParams+2:], func(x float32) bool { return x != 0 }) {
			t.Errorf("sapo %v: loss-key slots %v, want %v then zeros", c.params, h[hLossParams:], c.want)
		}
	}
	// Empty names are the defaults: token-mean, token ratio, k3.
	h = make([]float32, hNum)
	if err := actorHyper(h, core.ActorUpdate{Temperature: 1}); err != nil || h[hAggTokenMean] != 1 || h[hSeqRatio] != 0 || h[hKLk3] != 1 || h[hMaxResponseTokens] != 1 {
		t.Errorf("defaults: %v %v", h, err)
	}
	for _, c := range []struct {
		u    core.ActorUpdate
		want string
	}{
		{core.ActorUpdate{ClipRatioC: 0.5}, "train.clip_ratio_c = 0.5"},
		{core.ActorUpdate{LossAggMode: "sum"}, `train.loss_agg_mode: unknown value "sum"`},
		{core.ActorUpdate{LossAggMode: core.AggSeqMeanTokenSumNorm}, "rollout.max_response_tokens >= 1"},
		{core.ActorUpdate{RatioLevel: "group"}, `train.ratio_level: unknown value "group"`},
		{core.ActorUpdate{KLEstimator: "k4"}, `train.kl_estimator: unknown value "k4"`},
		{core.ActorUpdate{PolicyLoss: core.LossCISPO, RatioLevel: core.RatioSequence}, "train.policy_loss cispo: train.ratio_level sequence (GSPO) is not a setting of this loss (losses that take it: " +
			lossesTaking(func(d core.PolicyLossDef) bool { return d.SequenceRatio }) + ")"},
		{core.ActorUpdate{PolicyLoss: core.LossGMPO, ClipRatioC: 3}, "train.policy_loss gmpo: train.clip_ratio_c (the dual clip) is not a setting of this loss (losses that take it: " +
			lossesTaking(func(d core.PolicyLossDef) bool { return d.DualClip }) + ")"},
		{core.ActorUpdate{PolicyLoss: noSuchLoss}, `train.policy_loss "` + noSuchLoss + `": unknown`},
		{core.ActorUpdate{PolicyLoss: core.LossSAPO, PolicyLossParams: map[string]any{"tau_neg": 0}},
			"config: train.policy_loss_params.tau_neg: must be in [0.01, 100], got 0"},
		{core.ActorUpdate{PolicyLoss: core.LossSAPO, PolicyLossParams: map[string]any{"temperature": 1}},
			"config: train.policy_loss_params.temperature: unknown key (the keys of sapo: tau_neg, tau_pos)"},
		{core.ActorUpdate{PolicyLossParams: map[string]any{"tau_pos": 1}}, "config: train.policy_loss_params.tau_pos: not a key of ppo (it belongs to "},
	} {
		c.u.Temperature = 1
		if err := actorHyper(make([]float32, hNum), c.u); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", c.u, err, c.want)
		}
	}
}

// Every policy loss core registers has a graph here, and no graph lacks a
// reference: TestActorLossMatchesReference then covers each, a loss with
// keys at its lossParamCases too (which it must have). A graph reading a
// key its loss does not declare stops at the read.
func TestEveryPolicyLossHasAGraph(t *testing.T) {
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), `policy loss ppo reads key "tau"`) {
				t.Errorf("an undeclared key: %v", r)
			}
		}()
		lossIn{loss: core.LossPPO}.param("tau")
	}()
	for _, loss := range core.PolicyLosses() {
		if keys, _ := core.PolicyLossKeys(loss); len(keys) > 0 && len(lossParamCases[loss]) == 0 {
			t.Errorf("policy loss %s has keys %v and no lossParamCases entry (backends/xla/policyloss_test.go): the parity test would run it at its defaults only", loss, keys)
		}
	}
	graphs, refs := graphLossNames(), core.PolicyLosses()
	for _, name := range refs {
		if !slices.Contains(graphs, name) {
			t.Errorf("policy loss %s has a reference (core) and no graph (backends/xla/loss_%s.go: registerGraphLoss)", name, name)
		}
	}
	for _, name := range graphs {
		if !slices.Contains(refs, name) {
			t.Errorf("policy loss %s has a graph and no reference (core/loss_%s.go: core.RegisterPolicyLoss)", name, name)
		}
	}
	b := tinyBackend(t, 0)
	if _, err := b.policy.actorExec(actorKey{loss: noSuchLoss}); err == nil || !strings.Contains(err.Error(), `train.policy_loss "`+noSuchLoss+`": this backend has no graph`) {
		t.Errorf("unknown loss: %v", err)
	}
}
