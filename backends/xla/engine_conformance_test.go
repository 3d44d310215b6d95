package xla

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/internal/threefry"
	"github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
	"github.com/gomlx/gomlx/ml/model"
)

// Engine conformance: whole graphs (scoring, sampling, the actor / critic /
// supervised train steps with their gradients and Adam updates) must agree
// between cde's own engine ("cpu", under test) and GoMLX's pure-Go engine
// ("go", the reference, labelled "ref" in the logs) to float32 tolerance.
//
//	go test ./backends/xla -run Conformance -v
//
// CDE_CONFORMANCE_REF names another reference engine, with its PJRT plugin
// in CDE_TEST_PJRT_PLUGIN: scripts/gpucheck runs this suite with xla:cuda as
// the reference, so the cpu engine and XLA on a GPU are held to the same
// tolerances.
//
// Every comparison logs, per output or variable, the largest absolute
// difference and the largest difference relative to the tolerance bound
// ("diff/bound" = |a-b| / (abs + rel*max(|a|,|b|)); above 1 fails).
//
// How updates are compared. A train step's result is checked in three
// parts, per variable:
//
//   - the gradient: Adam's moments m and v after the step (m = 0.9 m' +
//     0.1 g, v = 0.999 v' + 0.001 g^2, with g the clipped gradient) agree to
//     a tolerance relative to the variable's largest moment;
//   - Adam itself: each engine's new weights equal w - lr_t m / (sqrt(v) +
//     1e-8) computed on the host from that engine's own m, v and old w;
//   - the weights: the two engines' new weights agree to the weight
//     tolerance, except where the difference is exactly what Adam makes of
//     the (agreeing) moments. Adam divides by sqrt(v): an element whose
//     gradient is at float-noise level (|g| ~ 1e-8 while the variable's
//     largest is ~ 1e-2) moves by lr * g / (|g| + 3e-7) on the first step, so
//     a 1e-9 difference in g becomes ~1e-5 in the weight. Such elements are
//     counted as "amplified" in the log and are not failures.
//
// TestConformanceNoiseFloor grounds the tolerances: it runs the reference
// engine on a feature-permuted copy of the weights (the same function,
// other summation orders) and requires the cpu engine's differences to be
// within a small factor of the reference's own float32 noise.

// Conformance model sizes: small enough that the go engine runs each graph
// in milliseconds, big enough to exercise every op (two layers, two heads,
// FF = 4 d, K = 4 value heads).
const (
	confVocab = 24
	confHeads = 4 // value heads K
	confEOS   = 2
	confPAD   = 0
)

// confScales are the weight-init scales the tests run at: the default
// (near-uniform predictions) and a large one (peaked softmaxes, attention
// scores of several units, LayerNorm far from identity).
var confScales = []float64{0.02, 0.4}

// confRef is the reference engine: "go", or CDE_CONFORMANCE_REF.
func confRef() string { return cmp.Or(os.Getenv("CDE_CONFORMANCE_REF"), "go") }

func confOptions(engine string, initStd float64) Options {
	return Options{Engine: engine, PJRTPlugin: testPlugin(engine), Policy: ModelConfig{Vocab: confVocab, Layers: 2, DModel: 32, Heads: 2, MaxLen: 32, InitStd: initStd},
		ValueHeads: confHeads, Seed: 11, ActorLR: 3e-3, CriticLR: 3e-3, PAD: confPAD, EOS: confEOS}
}

// confPair builds the backend under test and the reference from the same
// options (so the same seed and host-side initial weights).
func confPair(t *testing.T, initStd float64) (cpuB, goB *Backend) {
	t.Helper()
	var err error
	if cpuB, err = New(confOptions("cpu", initStd)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cpuB.Close() })
	if goB, err = New(confOptions(confRef(), initStd)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { goB.Close() })
	if cpuB.engineName != "cpu" || goB.engineName == "cpu" {
		t.Fatalf("engines: %q and %q", cpuB.engineName, goB.engineName)
	}
	return cpuB, goB
}

// eachScale runs f as a subtest per init scale, on a fresh pair of backends.
func eachScale(t *testing.T, f func(t *testing.T, cpuB, goB *Backend)) {
	for _, std := range confScales {
		t.Run(fmt.Sprintf("std=%v", std), func(t *testing.T) {
			cpuB, goB := confPair(t, std)
			f(t, cpuB, goB)
		})
	}
}

// fwdTol is the tolerance of forward outputs (logits, hidden states,
// log-probs, values). At the large init scale the residual stream and the
// attention scores are several units, and float32 rounding reaches ~1e-5 in
// the logits on the reference engine alone (TestConformanceNoiseFloor
// measures it: go against itself on permuted weights differs by ~6e-6).
func fwdTol(b *Backend) tol {
	if b.opts.Policy.InitStd >= 0.1 {
		return tol{abs: 5e-5, rel: 5e-5}
	}
	return tol{abs: 1e-5, rel: 1e-5}
}

// tol is a mixed absolute / relative tolerance: a and b agree when
// |a-b| <= abs + rel*max(|a|,|b|).
type tol struct{ abs, rel float64 }

func (tl tol) ratio(a, b float64) float64 {
	d := math.Abs(a - b)
	if d == 0 {
		return 0
	}
	return d / (tl.abs + tl.rel*math.Max(math.Abs(a), math.Abs(b)))
}

// diffStats summarises the element-wise comparison of two arrays.
type diffStats struct {
	n        int
	maxAbs   float64
	maxRatio float64 // max |a-b| / bound
	worst    int     // index of maxRatio
	a, b     float64 // values at worst
	nBad     int     // elements over the bound
}

func compareSlices[F float32 | float64](a, b []F, tl tol) diffStats {
	d := diffStats{n: len(a), worst: -1}
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		if math.IsNaN(x) || math.IsNaN(y) || math.IsInf(x, 0) || math.IsInf(y, 0) {
			if !(x == y) {
				d.nBad++
				d.maxRatio = math.Inf(1)
				d.worst, d.a, d.b = i, x, y
			}
			continue
		}
		d.maxAbs = math.Max(d.maxAbs, math.Abs(x-y))
		r := tl.ratio(x, y)
		if r > 1 {
			d.nBad++
		}
		if r > d.maxRatio || d.worst < 0 {
			d.maxRatio, d.worst, d.a, d.b = r, i, x, y
		}
	}
	return d
}

func (d diffStats) String() string {
	return fmt.Sprintf("n=%-5d max|diff|=%-9.3g diff/bound=%-9.3g worst[%d]: cpu %.8g ref %.8g", d.n, d.maxAbs, d.maxRatio, d.worst, d.a, d.b)
}

// checkSlices compares one named array and reports it.
func checkSlices[F float32 | float64](t *testing.T, what string, a, b []F, tl tol) diffStats {
	t.Helper()
	if len(a) != len(b) {
		t.Errorf("%s: %d values on cpu, %d on ref", what, len(a), len(b))
		return diffStats{}
	}
	d := compareSlices(a, b, tl)
	t.Logf("%-34s %s", what, d)
	if d.nBad > 0 {
		t.Errorf("%s: %d of %d values differ beyond %+v: %s", what, d.nBad, d.n, tl, d)
	}
	return d
}

// checkStats compares the metrics maps an update returns.
func checkStats(t *testing.T, what string, a, b map[string]float64, tl tol) {
	t.Helper()
	keys := make([]string, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(a) != len(b) || len(a) == 0 {
		t.Errorf("%s: metrics %v on cpu, %v on ref", what, a, b)
	}
	for _, k := range keys {
		y, ok := b[k]
		if !ok {
			t.Errorf("%s: metric %s missing on ref", what, k)
			continue
		}
		x := a[k]
		r := tl.ratio(x, y)
		t.Logf("%s %-18s cpu %-12.8g ref %-12.8g |diff| %-9.3g diff/bound %.3g", what, k, x, y, math.Abs(x-y), r)
		if !(r <= 1) {
			t.Errorf("%s: %s = %.8g on cpu, %.8g on ref (beyond %+v)", what, k, x, y, tl)
		}
	}
}

// snapshots reads every variable (weights and Adam moments) of the policy
// and critic.
func snapshots(t *testing.T, b *Backend) map[string]checkpoint {
	t.Helper()
	out := map[string]checkpoint{}
	for name, n := range map[string]*net{"policy": b.policy, "critic": b.critic} {
		if n == nil {
			continue
		}
		ck, err := n.snapshot()
		if err != nil {
			t.Fatal(err)
		}
		out[name] = ck
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// checkIdentical requires bit-identical variables and Adam step counts.
func checkIdentical(t *testing.T, label string, a, b map[string]checkpoint) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: nets %v vs %v", label, sortedKeys(a), sortedKeys(b))
	}
	for _, name := range sortedKeys(a) {
		ca, cb := a[name], b[name]
		if ca.AdamStep != cb.AdamStep || len(ca.Vars) != len(cb.Vars) {
			t.Errorf("%s %s: Adam step %d vs %d, %d vs %d variables", label, name, ca.AdamStep, cb.AdamStep, len(ca.Vars), len(cb.Vars))
		}
		n := 0
		for _, k := range sortedKeys(ca.Vars) {
			va, vb := ca.Vars[k], cb.Vars[k]
			if !slices.Equal(va.Dims, vb.Dims) || !slices.Equal(va.Data, vb.Data) {
				t.Errorf("%s %s%s: not bit-identical (%s)", label, name, k, compareSlices(va.Data, vb.Data, tol{}))
			}
			n += len(va.Data)
		}
		t.Logf("%s %s: %d variables, %d values bit-identical", label, name, len(ca.Vars), n)
	}
}

// updateTols are the tolerances of one train step's comparison.
type updateTols struct {
	// moment compares m and v; its abs is a fraction of the variable's
	// largest |moment| on the reference engine.
	moment tol
	weight tol
}

// adamSelf is the tolerance of an engine's Adam arithmetic against the
// host's float64 evaluation of the same formula on its float32 inputs.
var adamSelf = tol{abs: 1e-8, rel: 1e-6}

// adamLR is the bias-corrected step size the backend feeds step t.
func adamLR(lr float64, t int) float64 {
	return float64(float32(lr * math.Sqrt(1-math.Pow(adamBeta2, float64(t))) / (1 - math.Pow(adamBeta1, float64(t)))))
}

// checkUpdate compares one train step (pre -> post on each engine; the pre
// states may already differ slightly after earlier steps) for every net.
// lrs gives each updated net's base learning rate; other nets must be left
// untouched. See the file comment for the three parts of the check.
func checkUpdate(t *testing.T, label string, lrs map[string]float64, preC, preG, postC, postG map[string]checkpoint, ut updateTols) {
	t.Helper()
	for _, name := range sortedKeys(postC) {
		pc, pg, qc, qg := preC[name], preG[name], postC[name], postG[name]
		lr, updated := lrs[name]
		if !updated {
			checkIdentical(t, label+" untouched (cpu)", map[string]checkpoint{name: pc}, map[string]checkpoint{name: qc})
			checkIdentical(t, label+" untouched (ref)", map[string]checkpoint{name: pg}, map[string]checkpoint{name: qg})
			continue
		}
		if qc.AdamStep != pc.AdamStep+1 || qg.AdamStep != pg.AdamStep+1 || qc.AdamStep != qg.AdamStep {
			t.Fatalf("%s %s: Adam steps cpu %d -> %d, ref %d -> %d; want one step on each", label, name, pc.AdamStep, qc.AdamStep, pg.AdamStep, qg.AdamStep)
		}
		lrt := adamLR(lr, qc.AdamStep)
		totalAmp := 0
		for _, k := range sortedKeys(qc.Vars) {
			if strings.HasPrefix(k, "/adam") {
				continue
			}
			mk, vk := "/adam/m"+k+"/m", "/adam/v"+k+"/v"
			w0c, w0g := pc.Vars[k].Data, pg.Vars[k].Data
			w1c, w1g := qc.Vars[k].Data, qg.Vars[k].Data
			mc, mg, vc, vg := qc.Vars[mk].Data, qg.Vars[mk].Data, qc.Vars[vk].Data, qg.Vars[vk].Data
			if len(mc) != len(w1c) || len(vg) != len(w1g) || len(w1c) != len(w1g) {
				t.Fatalf("%s %s%s: %d weights, moments %d / %d (cpu), %d weights (ref)", label, name, k, len(w1c), len(mc), len(vc), len(w1g))
			}
			what := label + " " + name + k
			// 1. Gradients, through the moments.
			var scaleM, scaleV float64
			for i := range mg {
				scaleM = math.Max(scaleM, math.Abs(float64(mg[i])))
				scaleV = math.Max(scaleV, math.Abs(float64(vg[i])))
			}
			dm := compareSlices(mc, mg, tol{abs: ut.moment.abs * scaleM, rel: ut.moment.rel})
			dv := compareSlices(vc, vg, tol{abs: ut.moment.abs * scaleV, rel: ut.moment.rel})
			if dm.nBad > 0 {
				t.Errorf("%s: Adam m (gradient) differs at %d of %d elements beyond %+v of max|m| %.3g: %s", what, dm.nBad, dm.n, ut.moment, scaleM, dm)
			}
			if dv.nBad > 0 {
				t.Errorf("%s: Adam v (squared gradient) differs at %d of %d elements beyond %+v of max|v| %.3g: %s", what, dv.nBad, dv.n, ut.moment, scaleV, dv)
			}
			// 2. Adam on each engine.
			step := func(m, v []float32, i int) float64 {
				return lrt * float64(m[i]) / (math.Sqrt(float64(v[i])) + adamEps)
			}
			selfMax := [2]float64{}
			for e, st := range [2]struct{ w0, w1, m, v []float32 }{{w0c, w1c, mc, vc}, {w0g, w1g, mg, vg}} {
				for i := range st.w1 {
					want := float64(st.w0[i]) - step(st.m, st.v, i)
					r := adamSelf.ratio(float64(st.w1[i]), want)
					selfMax[e] = math.Max(selfMax[e], r)
					if r > 1 {
						t.Errorf("%s[%d] on %s: Adam gives %.9g from w %.9g, m %.6g, v %.6g (lr_t %.6g); host computes %.9g",
							what, i, [2]string{"cpu", "ref"}[e], st.w1[i], st.w0[i], st.m[i], st.v[i], lrt, want)
						break
					}
				}
			}
			// 3. Weights, allowing what Adam makes of the moments'
			// difference (and of the old weights' difference).
			dw := compareSlices(w1c, w1g, ut.weight)
			amp, ampWorst := 0, -1
			for i := range w1c {
				if ut.weight.ratio(float64(w1c[i]), float64(w1g[i])) <= 1 {
					continue
				}
				d := math.Abs(float64(w1c[i]) - float64(w1g[i]))
				explained := math.Abs(float64(w0c[i])-float64(w0g[i])) + math.Abs(step(mc, vc, i)-step(mg, vg, i))
				slack := 2 * (adamSelf.abs + adamSelf.rel*math.Abs(float64(w1g[i])))
				if d <= explained*(1+1e-3)+slack {
					amp++
					if ampWorst < 0 || d > math.Abs(float64(w1c[ampWorst])-float64(w1g[ampWorst])) {
						ampWorst = i
					}
					continue
				}
				t.Errorf("%s[%d]: weight cpu %.9g ref %.9g (|diff| %.3g beyond %+v) not explained by Adam on the moments (m %.6g / %.6g, v %.6g / %.6g: %.3g)",
					what, i, w1c[i], w1g[i], d, ut.weight, mc[i], mg[i], vc[i], vg[i], explained)
			}
			totalAmp += amp
			line := fmt.Sprintf("%-44s w max|diff| %-9.3g d/b %-8.3g | m max|diff| %-9.3g d/b %-8.3g | v max|diff| %-9.3g d/b %-8.3g | adam self d/b cpu %.2g ref %.2g",
				what, dw.maxAbs, dw.maxRatio, dm.maxAbs, dm.maxRatio, dv.maxAbs, dv.maxRatio, selfMax[0], selfMax[1])
			if amp > 0 {
				i := ampWorst
				line += fmt.Sprintf(" | %d amplified, worst [%d]: w %.7g / %.7g from m %.3g / %.3g (max|m| %.3g)", amp, i, w1c[i], w1g[i], mc[i], mg[i], scaleM)
			}
			t.Log(line)
		}
		t.Logf("%s %s: Adam step %d, lr_t %.6g, %d weight elements beyond %+v explained by Adam amplification", label, name, qc.AdamStep, lrt, totalAmp, ut.weight)
	}
}

// confSequences is a fixed batch of prompt ++ response sequences with
// varied lengths (ragged padding; some sequences fill more than one
// 8-position bucket).
func confSequences(n int, seed uint64) []core.Sequence {
	rng := rand.New(rand.NewPCG(seed, 77))
	seqs := make([]core.Sequence, n)
	for i := range seqs {
		p := make([]int32, 2+rng.IntN(5))
		p[0] = 1
		for j := 1; j < len(p); j++ {
			p[j] = int32(3 + rng.IntN(confVocab-3))
		}
		r := make([]int32, 1+rng.IntN(9))
		for j := range r {
			r[j] = int32(3 + rng.IntN(confVocab-3))
		}
		if i%2 == 0 {
			r[len(r)-1] = confEOS
		}
		seqs[i] = core.Sequence{Group: i / 2, Prompt: p, Response: r}
	}
	return seqs
}

func cloneSeqs(seqs []core.Sequence) []core.Sequence {
	out := make([]core.Sequence, len(seqs))
	for i, s := range seqs {
		out[i] = core.Sequence{Group: s.Group, Prompt: slices.Clone(s.Prompt), Response: slices.Clone(s.Response)}
	}
	return out
}

func seqPtrs(seqs []core.Sequence) []*core.Sequence {
	out := make([]*core.Sequence, len(seqs))
	for i := range seqs {
		out[i] = &seqs[i]
	}
	return out
}

func flat(x [][]float64) []float64 {
	var out []float64
	for _, r := range x {
		out = append(out, r...)
	}
	return out
}

// fullOutputs runs net n's trunk on seqs (laid out as the scorer does) and
// returns the logits [B,T,V] (the values [B,T,K] for the critic) and the
// final hidden states [B,T,d], with the mask of real (non-padding)
// positions [B,T].
func fullOutputs(t *testing.T, b *Backend, n *net, seqs []*core.Sequence) (out, hidden []float32, real []bool) {
	t.Helper()
	bt, err := b.layout(seqs)
	if err != nil {
		t.Fatal(err)
	}
	e, err := model.NewExec(b.engine, n.ctx.Store(), func(ctx *model.Scope, in []*graph.Node) []*graph.Node {
		h := hiddenStates(ctx, n.cfg, in[0])
		if n.cfg.ValueK > 0 {
			return []*graph.Node{valuesOf(ctx, h), h}
		}
		return []*graph.Node{logitsOf(ctx, h), h}
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := run(e, tensors.FromFlatDataAndDimensions(bt.tokens, bt.b, bt.t))
	if err != nil {
		t.Fatal(err)
	}
	out = tensors.MustCopyFlatData[float32](res[0])
	hidden = tensors.MustCopyFlatData[float32](res[1])
	for _, r := range res {
		r.FinalizeAll()
	}
	real = make([]bool, bt.b*bt.t)
	for i, s := range seqs {
		for j := range len(s.Prompt) + len(s.Response) {
			real[i*bt.t+j] = true
		}
	}
	return out, hidden, real
}

// keepReal keeps the per-position blocks of x (width w) at real positions
// (want) or at padding positions (!want). Padding positions go through the
// same graph and are compared too, but separately, so a difference there is
// reported as such.
func keepReal(x []float32, w int, real []bool, want bool) []float32 {
	var out []float32
	for p, ok := range real {
		if ok == want {
			out = append(out, x[p*w:(p+1)*w]...)
		}
	}
	return out
}

// TestConformanceInitialWeights: the host-side initialisation gives
// bit-identical weights on both engines, in memory and saved; a checkpoint
// written by one engine loads bit-identically into the other.
func TestConformanceInitialWeights(t *testing.T) {
	eachScale(t, func(t *testing.T, cpuB, goB *Backend) {
		checkIdentical(t, "init", snapshots(t, cpuB), snapshots(t, goB))
		dirC, dirG := filepath.Join(t.TempDir(), "cpu"), filepath.Join(t.TempDir(), "go")
		if err := cpuB.Save(dirC); err != nil {
			t.Fatal(err)
		}
		if err := goB.Save(dirG); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"policy", "critic"} {
			var a, b checkpoint
			if err := readGob(filepath.Join(dirC, name+".gob"), &a); err != nil {
				t.Fatal(err)
			}
			if err := readGob(filepath.Join(dirG, name+".gob"), &b); err != nil {
				t.Fatal(err)
			}
			checkIdentical(t, "saved", map[string]checkpoint{name: a}, map[string]checkpoint{name: b})
		}
		// Train the go engine's policy a little, save, load into cpu.
		seqs := confSequences(4, 9)
		for range 2 {
			if _, err := goB.SupervisedStep(seqPtrs(seqs), 1e-2); err != nil {
				t.Fatal(err)
			}
		}
		if err := goB.Save(dirG); err != nil {
			t.Fatal(err)
		}
		if err := cpuB.Load(dirG); err != nil {
			t.Fatal(err)
		}
		checkIdentical(t, "cross-loaded", snapshots(t, cpuB), snapshots(t, goB))
	})
}

// trainedPair is a pair of backends with the same non-initial weights:
// twenty supervised steps on the go engine, transferred by checkpoint.
func trainedPair(t *testing.T) (cpuB, goB *Backend) {
	t.Helper()
	cpuB, goB = confPair(t, 0.02)
	seqs := confSequences(8, 9)
	for range 20 {
		if _, err := goB.SupervisedStep(seqPtrs(seqs), 1e-2); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	if err := goB.Save(dir); err != nil {
		t.Fatal(err)
	}
	if err := cpuB.Load(dir); err != nil {
		t.Fatal(err)
	}
	return cpuB, goB
}

// TestConformanceForward: full logits, hidden states, per-token log-probs
// and entropies (at two temperatures) and the K value heads agree, at both
// init scales and on trained weights.
func TestConformanceForward(t *testing.T) {
	eachScale(t, checkForward)
	t.Run("trained", func(t *testing.T) {
		cpuB, goB := trainedPair(t)
		checkForward(t, cpuB, goB)
	})
}

func checkForward(t *testing.T, cpuB, goB *Backend) {
	seqs := confSequences(6, 1)
	ptr := seqPtrs(seqs)
	fwd := fwdTol(cpuB)
	d := cpuB.policy.cfg.DModel
	for _, nn := range []struct {
		name, out string
		cn, gn    *net
		width     int
	}{{"policy", "logits", cpuB.policy, goB.policy, confVocab}, {"critic", "values", cpuB.critic, goB.critic, confHeads}} {
		oc, hc, real := fullOutputs(t, cpuB, nn.cn, ptr)
		og, hg, _ := fullOutputs(t, goB, nn.gn, ptr)
		checkSlices(t, nn.name+" "+nn.out+" (real positions)", keepReal(oc, nn.width, real, true), keepReal(og, nn.width, real, true), fwd)
		checkSlices(t, nn.name+" "+nn.out+" (padding)", keepReal(oc, nn.width, real, false), keepReal(og, nn.width, real, false), fwd)
		checkSlices(t, nn.name+" hidden (real positions)", keepReal(hc, d, real, true), keepReal(hg, d, real, true), fwd)
		checkSlices(t, nn.name+" hidden (padding)", keepReal(hc, d, real, false), keepReal(hg, d, real, false), fwd)
	}
	for _, temp := range []float64{1, 0.6} {
		lc, ec, err := cpuB.ScoreLogProbs(ptr, temp)
		if err != nil {
			t.Fatal(err)
		}
		lg, eg, err := goB.ScoreLogProbs(ptr, temp)
		if err != nil {
			t.Fatal(err)
		}
		checkSlices(t, fmt.Sprintf("ScoreLogProbs log-probs T=%v", temp), flat(lc), flat(lg), fwd)
		checkSlices(t, fmt.Sprintf("ScoreLogProbs entropies T=%v", temp), flat(ec), flat(eg), fwd)
	}
	rc, rg := &core.Rollout{Seqs: cloneSeqs(seqs)}, &core.Rollout{Seqs: cloneSeqs(seqs)}
	if err := cpuB.ScoreValues(rc); err != nil {
		t.Fatal(err)
	}
	if err := goB.ScoreValues(rg); err != nil {
		t.Fatal(err)
	}
	var vc, vg []float64
	for i := range seqs {
		vc = append(vc, rc.Seqs[i].Values...)
		vg = append(vg, rg.Seqs[i].Values...)
	}
	checkSlices(t, "ScoreValues", vc, vg, fwd)
}

// confRollout is an actor / critic training batch: log-probs from the
// reference engine's scorer, perturbed so ratios differ from 1 and both
// clip sides fire; random per-sequence advantages; random returns and a
// bootstrap head mask.
func confRollout(t *testing.T, b *Backend, n int) *core.Rollout {
	t.Helper()
	seqs := confSequences(n, 2)
	lps, _, err := b.ScoreLogProbs(seqPtrs(seqs), 1)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range seqs {
		s := &seqs[i]
		s.LogProbs = make([]float64, len(s.Response))
		s.Advantages = make([]float64, len(s.Response))
		s.Returns = make([]float64, len(s.Response))
		s.HeadMask = make([]float64, len(s.Response)*confHeads)
		adv := rng.NormFloat64()
		for j := range s.Response {
			s.LogProbs[j] = lps[i][j] + 0.3*rng.NormFloat64()
			s.Advantages[j] = adv
			s.Returns[j] = 2*rng.Float64() - 1
			for k := range confHeads {
				s.HeadMask[j*confHeads+k] = float64(rng.IntN(2))
			}
		}
	}
	return &core.Rollout{Seqs: seqs, ValueHeads: confHeads}
}

var (
	stepStats = tol{abs: 1e-5, rel: 1e-4}
	stepTols  = updateTols{moment: tol{abs: 1e-5, rel: 1e-4}, weight: tol{abs: 1e-5, rel: 1e-4}}
)

// TestConformanceActorStep: one PPO step (entropy bonus and k3 KL on, with
// the reference a perturbed copy of the policy, so every term of the loss
// has a gradient) from identical weights on an identical rollout gives the
// same metrics, gradients and updated weights.
func TestConformanceActorStep(t *testing.T) {
	eachScale(t, func(t *testing.T, cpuB, goB *Backend) {
		r := confRollout(t, goB, 8)
		// The reference: the initial policy after one supervised step
		// (on the go engine, copied to cpu), then the policy is restored.
		init := t.TempDir()
		if err := goB.Save(init); err != nil {
			t.Fatal(err)
		}
		if _, err := goB.SupervisedStep(seqPtrs(r.Seqs), 3e-2); err != nil {
			t.Fatal(err)
		}
		if err := goB.FreezeReference(); err != nil {
			t.Fatal(err)
		}
		withRef := t.TempDir()
		if err := goB.Save(withRef); err != nil {
			t.Fatal(err)
		}
		for _, b := range []*Backend{cpuB, goB} {
			if err := b.Load(withRef); err != nil {
				t.Fatal(err)
			}
			if err := b.Load(init); err != nil { // policy back to init; the reference stays
				t.Fatal(err)
			}
		}
		preC, preG := snapshots(t, cpuB), snapshots(t, goB)
		checkIdentical(t, "before", preC, preG)
		u := core.ActorUpdate{Epochs: 1, Minibatches: 1, ClipLow: 0.2, ClipHigh: 0.28, EntropyCoef: 0.01, KLCoef: 0.05, Temperature: 0.9, Seed: 4}
		mc, err := cpuB.UpdateActor(r, u)
		if err != nil {
			t.Fatal(err)
		}
		mg, err := goB.UpdateActor(r, u)
		if err != nil {
			t.Fatal(err)
		}
		if mg["actor/pg_clipfrac"] == 0 || mg["actor/kl"] == 0 {
			t.Errorf("rollout does not exercise clipping and KL: %v", mg)
		}
		checkStats(t, "actor", mc, mg, stepStats)
		checkUpdate(t, "actor step", map[string]float64{"policy": cpuB.opts.ActorLR}, preC, preG, snapshots(t, cpuB), snapshots(t, goB), stepTols)
	})
}

// TestConformanceCriticStep: one masked-MSE step of the K-head critic.
func TestConformanceCriticStep(t *testing.T) {
	eachScale(t, func(t *testing.T, cpuB, goB *Backend) {
		r := confRollout(t, goB, 8)
		preC, preG := snapshots(t, cpuB), snapshots(t, goB)
		u := core.CriticUpdate{Epochs: 1, Minibatches: 1, Seed: 9}
		mc, err := cpuB.UpdateCritic(r, u)
		if err != nil {
			t.Fatal(err)
		}
		mg, err := goB.UpdateCritic(r, u)
		if err != nil {
			t.Fatal(err)
		}
		checkStats(t, "critic", mc, mg, stepStats)
		checkUpdate(t, "critic step", map[string]float64{"critic": cpuB.opts.CriticLR}, preC, preG, snapshots(t, cpuB), snapshots(t, goB), stepTols)
	})
}

// TestConformanceSupervisedStep: one supervised cross-entropy step.
func TestConformanceSupervisedStep(t *testing.T) {
	eachScale(t, func(t *testing.T, cpuB, goB *Backend) {
		seqs := confSequences(8, 3)
		preC, preG := snapshots(t, cpuB), snapshots(t, goB)
		const lr = 3e-3
		lc, err := cpuB.SupervisedStep(seqPtrs(seqs), lr)
		if err != nil {
			t.Fatal(err)
		}
		lg, err := goB.SupervisedStep(seqPtrs(seqs), lr)
		if err != nil {
			t.Fatal(err)
		}
		checkStats(t, "sft", map[string]float64{"sft/nll": lc}, map[string]float64{"sft/nll": lg}, stepStats)
		checkUpdate(t, "sft step", map[string]float64{"policy": lr}, preC, preG, snapshots(t, cpuB), snapshots(t, goB), stepTols)
	})
}

// TestConformanceActorSteps: three UpdateActor calls in sequence (the k3 KL
// to the frozen initial policy grows from 0) stay close. After the first
// step the engines start from slightly different weights, so the
// tolerances are looser; each step is still checked as above (the weight
// allowance then includes the old weights' difference). Finally the two
// policies are compared through the scorer, and a two-minibatch call (two
// Adam steps inside one call) is compared on its metrics and the scorer.
func TestConformanceActorSteps(t *testing.T) {
	eachScale(t, func(t *testing.T, cpuB, goB *Backend) {
		r := confRollout(t, goB, 8)
		for _, b := range []*Backend{cpuB, goB} {
			if err := b.FreezeReference(); err != nil {
				t.Fatal(err)
			}
		}
		loose := updateTols{moment: tol{abs: 1e-4, rel: 1e-3}, weight: tol{abs: 1e-4, rel: 1e-3}}
		looseStats := tol{abs: 1e-5, rel: 1e-3}
		for step := range 3 {
			preC, preG := snapshots(t, cpuB), snapshots(t, goB)
			u := core.ActorUpdate{Epochs: 1, Minibatches: 1, ClipLow: 0.2, ClipHigh: 0.28, EntropyCoef: 0.01, KLCoef: 0.05, Temperature: 1, Seed: uint64(10 + step)}
			mc, err := cpuB.UpdateActor(r, u)
			if err != nil {
				t.Fatal(err)
			}
			mg, err := goB.UpdateActor(r, u)
			if err != nil {
				t.Fatal(err)
			}
			label := fmt.Sprintf("actor step %d", step+1)
			checkStats(t, label, mc, mg, looseStats)
			checkUpdate(t, label, map[string]float64{"policy": cpuB.opts.ActorLR}, preC, preG, snapshots(t, cpuB), snapshots(t, goB), loose)
		}
		u := core.ActorUpdate{Epochs: 1, Minibatches: 2, ClipLow: 0.2, ClipHigh: 0.28, EntropyCoef: 0.01, KLCoef: 0.05, Temperature: 1, Seed: 20}
		mc, err := cpuB.UpdateActor(r, u)
		if err != nil {
			t.Fatal(err)
		}
		mg, err := goB.UpdateActor(r, u)
		if err != nil {
			t.Fatal(err)
		}
		checkStats(t, "actor 2 minibatches", mc, mg, looseStats)
		ptr := seqPtrs(r.Seqs)
		lc, _, err := cpuB.ScoreLogProbs(ptr, 1)
		if err != nil {
			t.Fatal(err)
		}
		lg, _, err := goB.ScoreLogProbs(ptr, 1)
		if err != nil {
			t.Fatal(err)
		}
		checkSlices(t, "log-probs after 5 Adam steps", flat(lc), flat(lg), tol{abs: 1e-4, rel: 1e-4})
	})
}

// TestConformanceGenerate: prefill + KV-cache decode with the same seeds
// gives the same tokens, log-probs, entropies and pooled embeddings
// (several temperatures and poolings, a single-prompt batch, and a request
// that fills the cache to MaxLen).
//
// The Gumbel noise is drawn on the host, so the tokens can differ only
// where two perturbed scores lp[a]+g[a] and lp[b]+g[b] are within float
// noise of each other. On a token mismatch the test reconstructs that
// step's noise, recomputes the gap on the reference engine and fails only
// if it is not a near-tie; the rest of that row is then not compared (its
// prefixes differ).
func TestConformanceGenerate(t *testing.T) {
	eachScale(t, checkGenerate)
	t.Run("trained", func(t *testing.T) {
		cpuB, goB := trainedPair(t)
		checkGenerate(t, cpuB, goB)
	})
}

func checkGenerate(t *testing.T, cpuB, goB *Backend) {
	prompts := [][]int32{{1, 5, 6}, {1, 7}, {1, 8, 9, 10, 11, 12}, {1, 4}, {1, 20, 3}}
	fwd := fwdTol(cpuB)
	for _, tc := range []struct {
		prompts   [][]int32
		temp      float64
		maxTokens int
		seed      uint64
		pooling   string
	}{
		{prompts, 1.0, 12, 3, "mean"},
		{prompts, 0.7, 12, 4, "last"},
		{prompts, 1.5, 12, 5, "second_last"},
		{prompts[2:3], 1.0, 10, 6, "mean"},
		{[][]int32{{1, 3, 4, 5}, {1, 6, 7, 8}}, 2.0, 28, 7, ""}, // P + MaxTokens = MaxLen
	} {
		req := core.GenerateRequest{Prompts: tc.prompts, Temperature: tc.temp, MaxTokens: tc.maxTokens, Seed: tc.seed, Pooling: tc.pooling}
		gc, err := cpuB.Generate(req)
		if err != nil {
			t.Fatal(err)
		}
		gg, err := goB.Generate(req)
		if err != nil {
			t.Fatal(err)
		}
		label := fmt.Sprintf("B=%d T=%v seed=%d", len(tc.prompts), tc.temp, tc.seed)
		var lpc, lpg, enc, eng []float64
		nTok, nTie := 0, 0
		for i := range tc.prompts {
			a, b := gc[i], gg[i]
			n := min(len(a.Tokens), len(b.Tokens))
			same := n
			for j := range n {
				if a.Tokens[j] != b.Tokens[j] {
					same = j
					break
				}
			}
			lpc, lpg = append(lpc, a.LogProbs[:same]...), append(lpg, b.LogProbs[:same]...)
			enc, eng = append(enc, a.Entropies[:same]...), append(eng, b.Entropies[:same]...)
			nTok += same
			if same < n {
				nTie++
				gap := tieGap(t, goB, req, i, b.Tokens[:same], a.Tokens[same], b.Tokens[same])
				t.Logf("%s row %d: token %d differs (cpu %d, ref %d); perturbed-score gap on ref %.3g", label, i, same, a.Tokens[same], b.Tokens[same], gap)
				if gap > 1e-4 {
					t.Errorf("%s row %d token %d: cpu chose %d, ref chose %d, but their perturbed scores on ref are %.3g apart (not a tie)",
						label, i, same, a.Tokens[same], b.Tokens[same], gap)
				}
				continue
			}
			if len(a.Tokens) != len(b.Tokens) || a.Truncated != b.Truncated {
				t.Errorf("%s row %d: cpu %v (truncated %v), ref %v (truncated %v)", label, i, a.Tokens, a.Truncated, b.Tokens, b.Truncated)
				continue
			}
			if tc.pooling != "" {
				checkSlices(t, fmt.Sprintf("%s row %d %s embedding", label, i, tc.pooling), a.Embedding, b.Embedding, fwd)
			}
		}
		t.Logf("%s: %d tokens identical, %d rows cut at a near-tie", label, nTok, nTie)
		if nTie > 1 {
			t.Errorf("%s: %d rows diverged at near-ties; more than chance", label, nTie)
		}
		checkSlices(t, label+" log-probs", lpc, lpg, fwd)
		checkSlices(t, label+" entropies", enc, eng, fwd)
	}
}

// tieGap recomputes on b the Gumbel-perturbed scores of tokens x and y at
// response step len(prefix) of row `row` of req, and returns their gap.
func tieGap(t *testing.T, b *Backend, req core.GenerateRequest, row int, prefix []int32, x, y int32) float64 {
	t.Helper()
	V := b.policy.cfg.Vocab
	g := make([]float32, V) // as Generate draws it: response row, token len(prefix)
	k0, k1 := threefry.RowKey(req.Seed, uint32(row))
	threefry.Fill(g, nil, [][2]uint32{{k0, k1}}, uint32(len(prefix)), V)
	s := &core.Sequence{Prompt: req.Prompts[row], Response: append(slices.Clone(prefix), x)}
	logits, _, _ := fullOutputs(t, b, b.policy, []*core.Sequence{s})
	p := len(s.Prompt) - 1 + len(prefix)
	at := logits[p*V : (p+1)*V]
	// log-softmax(logits / T) differs from logits / T by a per-position
	// constant, which cancels in the gap.
	score := func(k int32) float64 { return float64(at[k])/req.Temperature + float64(g[k]) }
	return math.Abs(score(x) - score(y))
}

// The noise floor. A transformer is invariant (in exact arithmetic) under
// a permutation of its residual features, of its feed-forward units and of
// the features within each head (the same for q and k; another for v and
// wo's rows): only the order of every matmul's and LayerNorm's summations
// changes. Running the reference engine on a permuted copy of the weights
// therefore measures float32 noise of the reference engine against itself;
// the cpu engine's difference from the reference should be of the same
// order.

// confPerm is one such permutation of a model's features.
type confPerm struct {
	d, f, qk, v []int // residual, feed-forward, q/k head features, v head features
}

func randPerm(rng *rand.Rand, c ModelConfig) confPerm {
	dh := c.DModel / c.Heads
	head := func(s []int) []int {
		out := make([]int, c.DModel)
		for h := range c.Heads {
			for j := range dh {
				out[h*dh+j] = h*dh + s[j]
			}
		}
		return out
	}
	return confPerm{d: rng.Perm(c.DModel), f: rng.Perm(c.ff()), qk: head(rng.Perm(dh)), v: head(rng.Perm(dh))}
}

func invPerm(p []int) []int {
	out := make([]int, len(p))
	for i, v := range p {
		out[v] = i
	}
	return out
}

func (p confPerm) inverse() confPerm {
	return confPerm{d: invPerm(p.d), f: invPerm(p.f), qk: invPerm(p.qk), v: invPerm(p.v)}
}

// permuteAxis returns data (of shape dims) with new[..., j, ...] =
// old[..., perm[j], ...] along axis.
func permuteAxis(data []float32, dims []int, axis int, perm []int) []float32 {
	inner := 1
	for _, d := range dims[axis+1:] {
		inner *= d
	}
	n := dims[axis]
	out := make([]float32, len(data))
	for o := 0; o < len(data); o += n * inner {
		for j := range n {
			copy(out[o+j*inner:o+(j+1)*inner], data[o+perm[j]*inner:o+(perm[j]+1)*inner])
		}
	}
	return out
}

// axesOf says which permutation applies to each axis of a model variable
// (nil: none).
func (p confPerm) axesOf(name string) [][]int {
	base := name
	if strings.HasPrefix(name, "/adam/") {
		base = name[len("/adam/m"):strings.LastIndex(name, "/")]
	}
	switch leaf := base[strings.LastIndex(base, "/")+1:]; {
	case base == "/embed/tokens" || base == "/embed/positions":
		return [][]int{nil, p.d}
	case base == "/lm/w" || base == "/value/w":
		return [][]int{p.d, nil}
	case base == "/value/b":
		return [][]int{nil}
	case leaf == "wq" || leaf == "wk":
		return [][]int{p.d, p.qk}
	case leaf == "wv":
		return [][]int{p.d, p.v}
	case leaf == "wo":
		return [][]int{p.v, p.d}
	case leaf == "w1":
		return [][]int{p.d, p.f}
	case leaf == "w2":
		return [][]int{p.f, p.d}
	case leaf == "b1":
		return [][]int{p.f}
	default: // LayerNorm gains and biases, b2
		return [][]int{p.d}
	}
}

func (p confPerm) apply(ck checkpoint) checkpoint {
	out := ck
	out.Vars = map[string]savedTensor{}
	for name, st := range ck.Vars {
		data := st.Data
		for axis, perm := range p.axesOf(name) {
			if perm != nil {
				data = permuteAxis(data, st.Dims, axis, perm)
			}
		}
		out.Vars[name] = savedTensor{Dims: st.Dims, Data: data}
	}
	return out
}

// permutedGo is a go-engine backend holding goB's weights permuted by p.
func permutedGo(t *testing.T, goB *Backend, p confPerm, initStd float64) *Backend {
	t.Helper()
	pb, err := New(confOptions("go", initStd))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pb.Close() })
	snap := snapshots(t, goB)
	if err := pb.policy.restore(p.apply(snap["policy"]), "permuted policy"); err != nil {
		t.Fatal(err)
	}
	if err := pb.critic.restore(p.apply(snap["critic"]), "permuted critic"); err != nil {
		t.Fatal(err)
	}
	return pb
}

// floorFactor bounds the cpu engine's difference from the reference by the
// reference's own float noise (max over the compared values).
const floorFactor = 10

// checkAgainstFloor logs cpu-vs-go next to go-vs-go(permuted) and fails if
// the former exceeds floorFactor times the latter (plus one float32 ulp of
// the values' scale, for outputs the permutation leaves exact).
func checkAgainstFloor[F float32 | float64](t *testing.T, what string, c, g, gp []F) {
	t.Helper()
	dc := compareSlices(c, g, tol{abs: 1, rel: 0})
	dp := compareSlices(gp, g, tol{abs: 1, rel: 0})
	scale := 0.0
	for _, v := range g {
		scale = math.Max(scale, math.Abs(float64(v)))
	}
	bound := floorFactor*dp.maxAbs + scale*0x1p-23
	t.Logf("%-34s cpu-vs-go max|diff| %-9.3g  go-vs-go(permuted) %-9.3g  ratio %.3g", what, dc.maxAbs, dp.maxAbs, dc.maxAbs/dp.maxAbs)
	if !(dc.maxAbs <= bound) {
		t.Errorf("%s: cpu differs from ref by up to %.3g, %.3g times ref's own float noise %.3g (at [%d]: cpu %.8g ref %.8g)",
			what, dc.maxAbs, dc.maxAbs/dp.maxAbs, dp.maxAbs, dc.worst, dc.a, dc.b)
	}
}

// TestConformanceNoiseFloor compares the forward outputs' cpu-vs-go
// differences with the reference's float noise (see above).
func TestConformanceNoiseFloor(t *testing.T) {
	for _, std := range confScales {
		t.Run(fmt.Sprintf("std=%v", std), func(t *testing.T) {
			cpuB, goB := confPair(t, std)
			p := randPerm(rand.New(rand.NewPCG(3, 3)), goB.policy.cfg)
			pb := permutedGo(t, goB, p, std)
			seqs := confSequences(6, 1)
			ptr := seqPtrs(seqs)
			d := goB.policy.cfg.DModel
			for _, nn := range []struct {
				name, out     string
				cn, gn, pn    *net
				width, hWidth int
			}{{"policy", "logits", cpuB.policy, goB.policy, pb.policy, confVocab, d}, {"critic", "values", cpuB.critic, goB.critic, pb.critic, confHeads, d}} {
				oc, hc, _ := fullOutputs(t, cpuB, nn.cn, ptr)
				og, hg, _ := fullOutputs(t, goB, nn.gn, ptr)
				op, hp, _ := fullOutputs(t, pb, nn.pn, ptr)
				hp = permuteAxis(hp, []int{len(hp) / d, d}, 1, invPerm(p.d))
				checkAgainstFloor(t, nn.name+" "+nn.out, oc, og, op)
				checkAgainstFloor(t, nn.name+" hidden", hc, hg, hp)
			}
			lc, ec, err := cpuB.ScoreLogProbs(ptr, 0.6)
			if err != nil {
				t.Fatal(err)
			}
			lg, eg, err := goB.ScoreLogProbs(ptr, 0.6)
			if err != nil {
				t.Fatal(err)
			}
			lp, ep, err := pb.ScoreLogProbs(ptr, 0.6)
			if err != nil {
				t.Fatal(err)
			}
			checkAgainstFloor(t, "ScoreLogProbs log-probs", flat(lc), flat(lg), flat(lp))
			checkAgainstFloor(t, "ScoreLogProbs entropies", flat(ec), flat(eg), flat(ep))

			// One supervised step: the permuted model's new weights and
			// moments, permuted back, against the reference's.
			sft := confSequences(8, 3)
			for _, b := range []*Backend{cpuB, goB, pb} {
				if _, err := b.SupervisedStep(seqPtrs(sft), 3e-3); err != nil {
					t.Fatal(err)
				}
			}
			sc, sg := snapshots(t, cpuB)["policy"], snapshots(t, goB)["policy"]
			sp := p.inverse().apply(snapshots(t, pb)["policy"])
			for _, k := range sortedKeys(sg.Vars) {
				if strings.HasPrefix(k, "/adam/m") {
					checkAgainstFloor(t, "sft gradient (Adam m) "+strings.TrimPrefix(k, "/adam/m"), sc.Vars[k].Data, sg.Vars[k].Data, sp.Vars[k].Data)
				}
			}
		})
	}
}

// testPlugin is the PJRT plugin the tests give an xla:* engine:
// CDE_TEST_PJRT_PLUGIN (empty: the standard search).
func testPlugin(engine string) string {
	if strings.HasPrefix(engine, "xla:") {
		return os.Getenv("CDE_TEST_PJRT_PLUGIN")
	}
	return ""
}
