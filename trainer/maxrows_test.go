package trainer

import (
	"testing"
)

// rollout.max_rows splits in-process generation of the training batch
// into requests of at most that many rows, request c seeded with
// Mix(seed, c); 0, or a batch no larger, is one request with the step's
// seed. The rows come back in order either way.
func TestRolloutMaxRows(t *testing.T) {
	var oneSeed uint64
	for _, tc := range []struct {
		maxRows int
		want    []int // rows per request
	}{{0, []int{4}}, {4, []int{4}}, {3, []int{3, 1}}, {1, []int{1, 1, 1, 1}}} {
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
		var got []int
		for _, req := range be.genRequests {
			got = append(got, len(req.Prompts))
		}
		if len(got) != len(tc.want) {
			t.Fatalf("max_rows %d: requests of %v rows, want %v", tc.maxRows, got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Fatalf("max_rows %d: requests of %v rows, want %v", tc.maxRows, got, tc.want)
			}
		}
		if len(got) == 1 {
			if oneSeed == 0 {
				oneSeed = be.genRequests[0].Seed
			} else if be.genRequests[0].Seed != oneSeed {
				t.Fatalf("max_rows %d: one request with seed %d, want the step's %d", tc.maxRows, be.genRequests[0].Seed, oneSeed)
			}
			continue
		}
		for c, req := range be.genRequests {
			if want := Mix(oneSeed, uint64(c)); req.Seed != want {
				t.Fatalf("max_rows %d: request %d seed %d, want Mix(step seed, %d) = %d", tc.maxRows, c, req.Seed, c, want)
			}
		}
	}
	if _, err := LoadConfig(LoadOptions{Env: []string{}, Sets: []string{"rollout.max_rows=-1"}}); err == nil {
		t.Fatal("rollout.max_rows=-1 accepted")
	}
}
