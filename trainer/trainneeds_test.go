package trainer

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cde-rl/cde/core"
)

// The trainer adds what it always computes and train.value_heads to the
// declared needs.
func TestTrainNeeds(t *testing.T) {
	cfg := fakeConfig(t, 1, 1)
	cfg.Train.ValueHeads = 3
	if n, err := TrainNeeds(cfg, criticAlgo{}, nil); err != nil || n != (core.Needs{LogProbs: true, Entropies: true, ValueHeads: 3}) {
		t.Errorf("TrainNeeds: %+v %v", n, err)
	}
	if n, _ := TrainNeeds(cfg, meanAlgo{}, nil); n.ValueHeads != 0 {
		t.Errorf("no critic, yet %d heads", n.ValueHeads)
	}
}

// A checkpoint records the run's critic heads, so the bench reads them
// without building the run's strategies; a state.json from before the field
// reads as unknown.
func TestCheckpointValueHeads(t *testing.T) {
	for _, c := range []struct {
		algo  core.Algorithm
		heads int // train.value_heads
		want  int
	}{{meanAlgo{}, 4, 0}, {criticAlgo{}, 1, 1}, {criticAlgo{}, 3, 3}} {
		cfg := fakeConfig(t, 1, 1)
		cfg.Train.ValueHeads = c.heads
		tr := fakeTrainer(t, cfg, &fakeBackend{})
		tr.Algo = c.algo
		if err := tr.Run(context.Background(), 0); err != nil {
			t.Fatal(err)
		}
		ckpt, err := LatestCheckpoint(tr.RunDir)
		if err != nil || ckpt == "" {
			t.Fatalf("no checkpoint: %v", err)
		}
		got, known, err := CheckpointValueHeads(ckpt)
		if err != nil || !known || got != c.want {
			t.Errorf("%s, train.value_heads %d: heads %d (known %v, %v), want %d", c.algo.Name(), c.heads, got, known, err, c.want)
		}
	}
	old := t.TempDir()
	if err := os.WriteFile(filepath.Join(old, "state.json"), []byte(`{"step": 5, "seed": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, known, err := CheckpointValueHeads(old); err != nil || known {
		t.Errorf("old state: known %v, %v", known, err)
	}
}
