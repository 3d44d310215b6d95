package trainer

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
)

func TestTrainConfigLossKeys(t *testing.T) {
	cfg, err := LoadConfig(LoadOptions{Env: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	tc := cfg.Train
	if tc.LossAggMode != core.AggTokenMean || tc.RatioLevel != core.RatioToken || tc.KLEstimator != "k3" || tc.KLMode != "loss" ||
		tc.ClipRatioC != 0 || tc.DynamicSampling != (DynamicSamplingConfig{false, 4}) || tc.Overlong != (OverlongConfig{0, 1}) {
		t.Errorf("defaults: %+v", tc)
	}
	for _, c := range []struct{ set, want string }{
		{"train.clip_ratio_c=1", "train.clip_ratio_c: must be 0 (off) or > 1, got 1"},
		{"train.clip_ratio_c=-3", "train.clip_ratio_c: must be 0 (off) or > 1"},
		{"train.loss_agg_mode=sum", `train.loss_agg_mode: unknown value "sum" (known: token-mean, seq-mean-token-mean, seq-mean-token-sum, seq-mean-token-sum-norm)`},
		{"train.ratio_level=group", `train.ratio_level: unknown value "group"`},
		{"train.kl_estimator=k4", `train.kl_estimator: unknown value "k4" (known: k1, k2, k3)`},
		{"train.kl_mode=both", `train.kl_mode: unknown value "both" (known: loss, reward)`},
		{"train.dynamic_sampling.max_extra_batches=-1", "train.dynamic_sampling.max_extra_batches: must be in [0, 1000]"},
		{"train.dynamic_sampling.enabled=maybe", "train.dynamic_sampling.enabled: want true or false"},
		{"train.dynamic_sampling.tries=3", "train.dynamic_sampling.tries: unknown key"},
		{"train.overlong.buffer=48", "train.overlong.buffer: must be in [0, rollout.max_response_tokens = 48), got 48"},
		{"train.overlong.buffer=-1", "train.overlong.buffer: must be in [0, rollout.max_response_tokens"},
		{"train.overlong.penalty=-1", "train.overlong.penalty: must be in [0, 100]"},
		{"train.overlong.factor=1", "train.overlong.factor: unknown key"},
	} {
		_, err := LoadConfig(LoadOptions{Env: []string{}, Sets: []string{c.set}})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--set %s: got %v, want %q", c.set, err, c.want)
		}
	}
	for _, ok := range []string{"train.clip_ratio_c=3", "train.clip_ratio_c=0", "train.loss_agg_mode=seq-mean-token-sum-norm",
		"train.ratio_level=sequence", "train.kl_estimator=k1", "train.kl_mode=reward", "train.overlong.buffer=47",
		"train.dynamic_sampling.enabled=true"} {
		if _, err := LoadConfig(LoadOptions{Env: []string{}, Sets: []string{ok}}); err != nil {
			t.Errorf("--set %s: %v", ok, err)
		}
	}
}

// Dynamic sampling on the fake task: a response is correct when it is the
// prompt's digit (a 1 in 10 draw), so most groups of 2 are all wrong and
// dropped; batches are drawn until prompts_per_step varied groups are kept.
func TestCollectDynamicSampling(t *testing.T) {
	collectAt := func(step int, sets ...string) (*core.Rollout, map[string]float64) {
		t.Helper()
		cfg, err := LoadConfig(LoadOptions{Env: []string{}, Sets: append([]string{"train.steps=50",
			"train.prompts_per_step=2", "rollout.n=2", "eval.every=0"}, sets...)})
		if err != nil {
			t.Fatal(err)
		}
		tr := fakeTrainer(t, cfg, &fakeBackend{})
		m := map[string]float64{}
		r, _, err := tr.Collect(step, m)
		if err != nil {
			t.Fatal(err)
		}
		return r, m
	}
	collect := func(sets ...string) (*core.Rollout, map[string]float64) { return collectAt(3, sets...) }
	plain, pm := collect()
	if len(plain.Seqs) != 4 || len(pm) != 1 || pm["train/generated_responses"] != 4 {
		t.Fatalf("without dynamic sampling: %d sequences, metrics %v (want only train/generated_responses 4)", len(plain.Seqs), pm)
	}
	r, m := collect("train.dynamic_sampling.enabled=true", "train.dynamic_sampling.max_extra_batches=200")
	if m["train/kept_groups"] != 2 || len(r.Seqs) != 4 {
		t.Fatalf("kept %v groups, %d sequences; metrics %v", m["train/kept_groups"], len(r.Seqs), m)
	}
	// Every batch drawn has 2 groups: kept + dropped groups fill the batches
	// drawn, less the varied groups of the last batch left unused (at most 1).
	drawn := 2 * (1 + m["train/extra_batches"])
	if used := m["train/dropped_groups"] + 2; used != drawn && used != drawn-1 {
		t.Errorf("dropped %v + kept 2 in %v drawn groups", m["train/dropped_groups"], drawn)
	}
	if m["train/extra_batches"] == 0 {
		t.Errorf("the fake task should need extra batches at this seed; metrics %v", m)
	}
	if m["train/generated_responses"] != 2*drawn {
		t.Errorf("train/generated_responses %v, want 2 responses x %v groups drawn", m["train/generated_responses"], drawn)
	}
	keep, dropped := KeepInformativeGroups(r)
	if dropped != 0 || len(keep) != 2 || r.Seqs[0].Group != 0 || r.Seqs[2].Group != 1 {
		t.Errorf("kept groups are not all varied or not renumbered: %+v", r.Seqs)
	}
	// Deterministic given the seed.
	again, m2 := collect("train.dynamic_sampling.enabled=true", "train.dynamic_sampling.max_extra_batches=200")
	if m["perf/gen_tokens_per_s"] <= 0 {
		t.Errorf("perf/gen_tokens_per_s = %v", m["perf/gen_tokens_per_s"])
	}
	delete(m, "perf/gen_tokens_per_s") // a timing
	delete(m2, "perf/gen_tokens_per_s")
	if !reflect.DeepEqual(again, r) || !reflect.DeepEqual(m, m2) {
		t.Errorf("two collects of the same step differ")
	}
	// No extra batch allowed and nothing kept: the first batch as drawn.
	none, m0 := collect("train.dynamic_sampling.enabled=true", "train.dynamic_sampling.max_extra_batches=0")
	if m0["train/extra_batches"] != 0 {
		t.Errorf("extra batches %v with a cap of 0", m0["train/extra_batches"])
	}
	if m0["train/kept_groups"] == 0 && !reflect.DeepEqual(none, plain) {
		t.Errorf("nothing kept: want the first batch as drawn")
	}
	// Equal minibatches: 3 prompts x 2 responses in 3 minibatches takes 0 or
	// 3 groups (2g must divide by 3). Find steps where 1 or 2 varied groups
	// come from the one batch allowed: they are cut to none, and the step
	// trains on the first batch as drawn.
	cut := 0
	for step := range 40 {
		sets := []string{"train.prompts_per_step=3", "train.minibatches=3", "train.dynamic_sampling.enabled=true",
			"train.dynamic_sampling.max_extra_batches=0"}
		r, m := collectAt(step, sets...)
		raw, _ := collectAt(step, sets[:2]...)
		varied, _ := KeepInformativeGroups(raw)
		if n := len(varied); n == 1 || n == 2 {
			cut++
			if m["train/kept_groups"] != 0 || !reflect.DeepEqual(r, raw) {
				t.Errorf("step %d: %d varied groups: kept %v, want the first batch as drawn", step, n, m["train/kept_groups"])
			}
		} else if m["train/kept_groups"] != float64(n) {
			t.Errorf("step %d: %d varied groups, kept %v", step, n, m["train/kept_groups"])
		}
	}
	if cut == 0 {
		t.Errorf("no step had 1 or 2 varied groups: the minibatch cut is untested")
	}
}

// refBackend is fakeBackend with a reference policy whose log-prob of every
// token is 0, and a record of the actor update asked for.
type refBackend struct {
	fakeBackend
	got core.ActorUpdate
	r   *core.Rollout
}

func (b *refBackend) ReferenceLogProbs(r *core.Rollout, temp float64) ([][]float64, error) {
	out := make([][]float64, len(r.Seqs))
	for i := range out {
		out[i] = make([]float64, r.Seqs[i].Len())
	}
	return out, nil
}

func (b *refBackend) UpdateActor(r *core.Rollout, u core.ActorUpdate) (map[string]float64, error) {
	b.got, b.r = u, r
	return b.fakeBackend.UpdateActor(r, u)
}

// kl_mode: reward subtracts kl_coef * sum_t k1 from the reward and sends
// no KL to the actor loss. The fake responses have log-probs -0.5 and -0.1
// and the reference 0: k1 = log pi_old - log pi_ref = -0.5 + -0.1 = -0.6
// summed, so the penalty is -0.5 * -0.6 = +0.3.
func TestStepKLInReward(t *testing.T) {
	cfg, err := LoadConfig(LoadOptions{Env: []string{}, Sets: []string{"train.steps=2", "train.prompts_per_step=2", "rollout.n=2",
		"eval.every=0", "train.kl_mode=reward", "train.kl_coef=0.5", "train.kl_estimator=k1", "train.loss_agg_mode=seq-mean-token-sum",
		"train.clip_ratio_c=3", "train.ratio_level=sequence"}})
	if err != nil {
		t.Fatal(err)
	}
	be := &refBackend{}
	tr := &Trainer{Cfg: cfg, Task: fakeTask{}, Backend: be, Algo: meanAlgo{}, RunDir: t.TempDir()}
	m := map[string]float64{}
	if err := tr.Step(0, m); err != nil {
		t.Fatal(err)
	}
	if be.got.KLCoef != 0 || be.got.LossAggMode != core.AggSeqMeanTokenSum || be.got.ClipRatioC != 3 ||
		be.got.RatioLevel != core.RatioSequence || be.got.KLEstimator != "k1" || be.got.MaxResponseTokens != 48 {
		t.Errorf("actor update %+v", be.got)
	}
	for i, s := range be.r.Seqs {
		if d := s.ShapedReward - s.Reward; d < 0.3-1e-12 || d > 0.3+1e-12 {
			t.Errorf("sequence %d: shaped %v reward %v: want +0.3", i, s.ShapedReward, s.Reward)
		}
	}
	if v := m["reward/kl_penalty"]; v < 0.3-1e-12 || v > 0.3+1e-12 {
		t.Errorf("reward/kl_penalty = %v, want 0.3", v)
	}
	// A backend without a reference policy is refused by key.
	tr.Backend = &fakeBackend{}
	if err := tr.Step(0, map[string]float64{}); err == nil || !strings.Contains(err.Error(), "train.kl_mode: reward") {
		t.Errorf("no ReferenceScorer: %v", err)
	}
}

// partBackend is refBackend whose reference log-probs and values name the
// sequence they belong to (its first response token), and which records
// how many sequences each scoring call got.
type partBackend struct {
	refBackend
	refSizes, valueSizes []int
}

func (b *partBackend) ReferenceLogProbs(r *core.Rollout, temp float64) ([][]float64, error) {
	b.refSizes = append(b.refSizes, len(r.Seqs))
	out := make([][]float64, len(r.Seqs))
	for i, s := range r.Seqs {
		out[i] = make([]float64, s.Len())
		for t := range out[i] {
			out[i][t] = -float64(s.Response[0]) / 1000
		}
	}
	return out, nil
}

func (b *partBackend) ScoreValues(r *core.Rollout) error {
	b.valueSizes = append(b.valueSizes, len(r.Seqs))
	for i := range r.Seqs {
		s := &r.Seqs[i]
		s.Values = make([]float64, 2*s.Len())
		for t := range s.Len() {
			s.Values[2*t], s.Values[2*t+1] = float64(s.Response[0]), float64(r.ValueHeads)
		}
	}
	return nil
}

// The trainer scores values and reference log-probs in parts of an actor
// minibatch, or of train.micro_batch_size when smaller, and every
// sequence gets its own rows back.
func TestStepScoresInParts(t *testing.T) {
	for _, c := range []struct {
		sets  []string
		sizes []int
	}{
		{nil, []int{6}},
		{[]string{"train.minibatches=2"}, []int{3, 3}},
		{[]string{"train.minibatches=2", "train.micro_batch_size=2"}, []int{2, 2, 2}},
		{[]string{"train.micro_batch_size=4"}, []int{4, 2}},
		{[]string{"train.micro_batch_size=8"}, []int{6}},
	} {
		sets := append([]string{"train.steps=1", "train.prompts_per_step=2", "rollout.n=3", "eval.every=0",
			"train.kl_mode=reward", "train.kl_coef=0.5", "train.kl_estimator=k1"}, c.sets...)
		cfg, err := LoadConfig(LoadOptions{Env: []string{}, Sets: sets})
		if err != nil {
			t.Fatal(err)
		}
		be := &partBackend{}
		tr := &Trainer{Cfg: cfg, Task: fakeTask{}, Backend: be, Algo: meanAlgo{}, RunDir: t.TempDir(), needs: core.Needs{ValueHeads: 2}}
		if err := tr.Step(0, map[string]float64{}); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(be.refSizes, c.sizes) || !slices.Equal(be.valueSizes, c.sizes) {
			t.Errorf("%v: reference parts %v, value parts %v, want %v", c.sets, be.refSizes, be.valueSizes, c.sizes)
		}
		for i, s := range be.r.Seqs {
			for tk := range s.Len() {
				if s.RefLogProbs[tk] != -float64(s.Response[0])/1000 || s.Values[2*tk] != float64(s.Response[0]) || s.Values[2*tk+1] != 2 {
					t.Fatalf("%v: sequence %d token %d: reference %v, values %v: not its own rows", c.sets, i, tk, s.RefLogProbs[tk], s.ValueRow(tk))
				}
			}
		}
	}
}
