package core

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// needsStrategy declares fixed needs.
type needsStrategy struct {
	name string
	n    Needs
}

func (s needsStrategy) Name() string { return s.name }
func (s needsStrategy) Needs() Needs { return s.n }

// needyAlgo declares needs of its own (criticAlgo, a critic, is in
// trainer_eval_test.go).
type needyAlgo struct {
	meanAlgo
	n Needs
}

func (a needyAlgo) Needs() Needs { return a.n }

// RunNeeds merges, in one place, the algorithm's critic, its own needs and
// every strategy's; the expected unions are written out by hand.
func TestRunNeeds(t *testing.T) {
	passk := Needs{Correct: true, MinGroup: 4, MinGroupKey: "algorithm.k"}
	cases := []struct {
		name   string
		algo   Algorithm
		strats []Strategy
		want   Needs
		err    string
	}{
		{"nothing", meanAlgo{}, nil, Needs{}, ""},
		{"a critic algorithm: one head", criticAlgo{}, nil, Needs{ValueHeads: 1}, ""},
		{"a strategy asks for more heads", criticAlgo{}, []Strategy{needsStrategy{"mh", Needs{ValueHeads: 4, HeadMasks: true}}}, Needs{ValueHeads: 4, HeadMasks: true}, ""},
		{"the algorithm's own needs", needyAlgo{n: passk}, []Strategy{needsStrategy{"ent", Needs{Entropies: true}}},
			Needs{Entropies: true, Correct: true, MinGroup: 4, MinGroupKey: "algorithm.k"}, ""},
		{"the larger least group wins, with its key", needyAlgo{n: passk}, []Strategy{needsStrategy{"g", Needs{MinGroup: 6, MinGroupKey: "strategies[0].group"}}, needsStrategy{"h", Needs{MinGroup: 5, MinGroupKey: "x"}}},
			Needs{Correct: true, MinGroup: 6, MinGroupKey: "strategies[0].group"}, ""},
		{"one pooling twice is fine", meanAlgo{}, []Strategy{needsStrategy{"a", Needs{Pooling: "mean"}}, needsStrategy{"b", Needs{Pooling: "mean"}}}, Needs{Pooling: "mean"}, ""},
		{"two poolings conflict", meanAlgo{}, []Strategy{needsStrategy{"a", Needs{Pooling: "mean"}}, needsStrategy{"b", Needs{Pooling: "last"}}}, Needs{},
			`strategies[1] (b): asks for pooling "last" but another strategy asked for "mean"`},
	}
	for _, c := range cases {
		got, err := RunNeeds(c.algo, c.strats)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: %+v (%v), want %+v", c.name, got, err, c.want)
		}
	}
	// The trainer adds what it always computes and train.value_heads.
	cfg := fakeConfig(t, 1, 1)
	cfg.Train.ValueHeads = 3
	if n, err := TrainNeeds(cfg, criticAlgo{}, nil); err != nil || n != (Needs{LogProbs: true, Entropies: true, ValueHeads: 3}) {
		t.Errorf("TrainNeeds: %+v %v", n, err)
	}
	if n, _ := TrainNeeds(cfg, meanAlgo{}, nil); n.ValueHeads != 0 {
		t.Errorf("no critic, yet %d heads", n.ValueHeads)
	}
	if err := passk.CheckGroupSize(4); err != nil {
		t.Errorf("rollout.n = k: %v", err)
	}
	if err := passk.CheckGroupSize(3); err == nil || !strings.Contains(err.Error(), "config: rollout.n = 3 is less than algorithm.k = 4") {
		t.Errorf("rollout.n < k: %v", err)
	}
}

// A checkpoint records the run's critic heads, so the bench reads them
// without building the run's strategies; a state.json from before the field
// reads as unknown.
func TestCheckpointValueHeads(t *testing.T) {
	for _, c := range []struct {
		algo  Algorithm
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
