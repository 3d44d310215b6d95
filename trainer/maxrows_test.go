package trainer

import (
	"testing"
)

// rollout.max_rows makes in-process generation of the training batch one
// request of every row with Slots = max_rows (0: no slots), always with
// the step's seed: the backend decodes at most that many rows at once and
// the responses are those of one unslotted call. The rows come back in
// order.
func TestRolloutMaxRows(t *testing.T) {
	var stepSeed uint64
	for _, tc := range []struct {
		maxRows, wantSlots int
	}{{0, 0}, {4, 4}, {3, 3}, {1, 1}} {
		cfg := fakeConfig(t, 1, 1)
		cfg.Rollout.MaxRows = tc.maxRows
		be := &fakeBackend{}
		tr := fakeTrainer(t, cfg, be)
		r, _, err := tr.Collect(0, map[string]float64{})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Seqs) != 4 {
			t.Fatalf("max_rows %d: %d sequences, want 4", tc.maxRows, len(r.Seqs))
		}
		if len(be.genRequests) != 1 {
			t.Fatalf("max_rows %d: %d requests, want 1", tc.maxRows, len(be.genRequests))
		}
		req := be.genRequests[0]
		if len(req.Prompts) != 4 || req.Slots != tc.wantSlots {
			t.Fatalf("max_rows %d: a request of %d rows with %d slots, want 4 rows and %d slots", tc.maxRows, len(req.Prompts), req.Slots, tc.wantSlots)
		}
		if stepSeed == 0 {
			stepSeed = req.Seed
		} else if req.Seed != stepSeed {
			t.Fatalf("max_rows %d: seed %d, want the step's %d", tc.maxRows, req.Seed, stepSeed)
		}
	}
	if _, err := LoadConfig(LoadOptions{Env: []string{}, Sets: []string{"rollout.max_rows=-1"}}); err == nil {
		t.Fatal("rollout.max_rows=-1 accepted")
	}
}
