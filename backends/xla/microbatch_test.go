package xla

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
)

func TestMicroBatches(t *testing.T) {
	for _, c := range []struct {
		n, size int
		want    [][2]int
	}{
		{6, 0, [][2]int{{0, 6}}},
		{6, 6, [][2]int{{0, 6}}},
		{6, 9, [][2]int{{0, 6}}},
		{6, 2, [][2]int{{0, 2}, {2, 4}, {4, 6}}},
		{6, 4, [][2]int{{0, 4}, {4, 6}}},
		{3, 1, [][2]int{{0, 1}, {1, 2}, {2, 3}}},
	} {
		if got := microBatches(c.n, c.size); !slices.Equal(got, c.want) {
			t.Errorf("microBatches(%d, %d) = %v, want %v", c.n, c.size, got, c.want)
		}
	}
}

// microCompare runs one update on two fresh tiny backends, whole and
// micro-batched, and compares what the step wrote: the Adam moments m and
// v (functions of the gradient alone: the micro-batched gradient is the
// same sum added in another order, so they agree to float32 rounding),
// the weights, and the metrics.
func microCompare(t *testing.T, heads int, update func(b *Backend, r *core.Rollout, micro int) (map[string]float64, error), micro int) {
	t.Helper()
	run := func(micro int) (map[string]float64, map[string]checkpoint) {
		b := tinyBackend(t, heads)
		if err := b.FreezeReference(); err != nil {
			t.Fatal(err)
		}
		m, err := update(b, confRollout(t, b, 6), micro)
		if err != nil {
			t.Fatal(err)
		}
		return m, snapshots(t, b)
	}
	mWhole, wWhole := run(0)
	mMicro, wMicro := run(micro)
	for name, ck := range wWhole {
		for _, k := range sortedKeys(ck.Vars) {
			a, b := ck.Vars[k].Data, wMicro[name].Vars[k].Data
			if len(a) != len(b) {
				t.Fatalf("%s%s: %d vs %d values", name, k, len(a), len(b))
			}
			scale := 0.0
			for _, x := range a {
				scale = math.Max(scale, math.Abs(float64(x)))
			}
			// Moments: 1e-4 of the variable's largest moment. Weights: 1%
			// of lr (1e-2). Adam's step lr g/(|g| + eps) turns a rounding
			// difference in a gradient near eps (1e-8) into a visible one
			// (1.4e-5 seen); the moments are where the gradient is checked.
			tl := tol{abs: 1e-4 * scale, rel: 1e-4}
			if !strings.HasPrefix(k, "/adam") {
				tl = tol{abs: 1e-4, rel: 0}
			}
			if d := compareSlices(a, b, tl); d.maxRatio > 1 {
				t.Errorf("%s%s: whole vs micro-batched differ: %s", name, k, d)
			}
		}
	}
	if len(mWhole) != len(mMicro) {
		t.Fatalf("metrics %v whole, %v micro-batched", sortedKeys(mWhole), sortedKeys(mMicro))
	}
	for k, v := range mWhole {
		if d := math.Abs(mMicro[k] - v); d > 1e-5*(1+math.Abs(v)) {
			t.Errorf("metric %s: %v whole, %v micro-batched", k, v, mMicro[k])
		}
	}
}

// A micro-batched actor update is the whole minibatch's update: its
// micro-batches' losses use the minibatch's denominators in every
// aggregation mode, so the summed gradients and the metrics are the
// minibatch's. Six responses in micro-batches of 4 and 2 (uneven, each
// padded to its own length) or 2, 2 and 2 per minibatch.
func TestMicroBatchedActorUpdateIsTheWholeUpdate(t *testing.T) {
	for _, c := range []struct {
		name  string
		u     core.ActorUpdate
		micro int
	}{
		{"token-mean", core.ActorUpdate{ClipLow: 0.2, ClipHigh: 0.28}, 4},
		{"seq-mean-token-mean kl entropy", core.ActorUpdate{ClipLow: 0.2, ClipHigh: 0.2, LossAggMode: core.AggSeqMeanTokenMean, KLCoef: 0.1, EntropyCoef: 0.01}, 2},
		{"seq-mean-token-sum gspo", core.ActorUpdate{ClipLow: 3e-4, ClipHigh: 4e-4, LossAggMode: core.AggSeqMeanTokenSum, RatioLevel: core.RatioSequence}, 4},
		{"seq-mean-token-sum-norm dual clip k1", core.ActorUpdate{ClipLow: 0.2, ClipHigh: 0.2, ClipRatioC: 3, LossAggMode: core.AggSeqMeanTokenSumNorm, MaxResponseTokens: 8, KLCoef: 0.05, KLEstimator: "k1"}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			microCompare(t, 0, func(b *Backend, r *core.Rollout, micro int) (map[string]float64, error) {
				u := c.u
				u.Epochs, u.Minibatches, u.Temperature, u.Seed, u.MicroBatchSize = 1, 1, 0.9, 3, micro
				return b.UpdateActor(r, u)
			}, c.micro)
		})
	}
	t.Run("two minibatches, two epochs", func(t *testing.T) {
		microCompare(t, 0, func(b *Backend, r *core.Rollout, micro int) (map[string]float64, error) {
			return b.UpdateActor(r, core.ActorUpdate{Epochs: 2, Minibatches: 2, ClipLow: 0.2, ClipHigh: 0.2, Temperature: 1, Seed: 5, MicroBatchSize: micro})
		}, 2)
	})
}

// The critic's masked MSE divides by sum(mask x head mask) of the whole
// minibatch; micro-batched, the update is the whole one.
func TestMicroBatchedCriticUpdateIsTheWholeUpdate(t *testing.T) {
	for _, micro := range []int{4, 2} {
		microCompare(t, confHeads, func(b *Backend, r *core.Rollout, micro int) (map[string]float64, error) {
			return b.UpdateCritic(r, core.CriticUpdate{Epochs: 1, Minibatches: 1, Seed: 3, MicroBatchSize: micro})
		}, micro)
	}
}

// The accumulators are scratch, not model state: a checkpoint leaves them
// out and restores into a net that has none. A later update restarts
// them (the first micro-batch sets, not adds), so two updates from the same
// state give the same weights.
func TestMicroBatchAccumulatorsAreScratch(t *testing.T) {
	b := tinyBackend(t, 0)
	r := confRollout(t, b, 6)
	u := core.ActorUpdate{Epochs: 1, Minibatches: 1, ClipLow: 0.2, ClipHigh: 0.2, Temperature: 1, MicroBatchSize: 2}
	start, err := b.policy.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.UpdateActor(r, u); err != nil {
		t.Fatal(err)
	}
	first, err := b.policy.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for k := range first.Vars {
		if strings.HasPrefix(k, accumScope) {
			t.Fatalf("checkpoint holds accumulator %s", k)
		}
	}
	if len(first.Vars) != len(start.Vars) {
		t.Fatalf("checkpoint has %d variables after a micro-batched update, %d before", len(first.Vars), len(start.Vars))
	}
	// Back to the start (the accumulators hold the last update's sum) and
	// the same update again.
	if err := b.policy.restore(start, "start"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.UpdateActor(r, u); err != nil {
		t.Fatal(err)
	}
	again, err := b.policy.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	checkIdentical(t, "same update twice", map[string]checkpoint{"policy": first}, map[string]checkpoint{"policy": again})
	// A fresh net without accumulators restores the checkpoint.
	fresh := tinyBackend(t, 0)
	if err := fresh.policy.restore(first, "first"); err != nil {
		t.Fatal(err)
	}
}

// A non-finite advantage in the last micro-batch stops the update with
// the loss named, and the weights keep their values.
func TestMicroBatchedUpdateNonFinite(t *testing.T) {
	b := tinyBackend(t, 0)
	r := confRollout(t, b, 6)
	r.Seqs[5].Advantages[0] = math.Inf(1)
	before := snapshots(t, b)
	_, err := b.UpdateActor(r, core.ActorUpdate{Epochs: 1, Minibatches: 1, ClipLow: 0.2, ClipHigh: 0.2, Temperature: 1, MicroBatchSize: 4})
	var nf *core.NonFiniteError
	if !errors.As(err, &nf) || nf.Quantity != "actor/loss" {
		t.Fatalf("err = %v, want a non-finite actor/loss", err)
	}
	after := snapshots(t, b)
	for k, v := range before["policy"].Vars {
		if !slices.Equal(v.Data, after["policy"].Vars[k].Data) {
			t.Fatalf("%s changed in a refused update", k)
		}
	}
}
