package core

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// FuzzReadRollout checks the rollout-file reader on arbitrary bytes: no
// panic; an error names the file; an accepted batch is well formed (every
// length agrees with T, one K, one embedding length) and reads back the same
// after MarshalRollout.
func FuzzReadRollout(f *testing.F) {
	for _, s := range []string{
		`{"step": 0, "sequences": [{"group": 0, "reward": 1, "logprobs": [-1, -2]}]}`,
		`{"step": 12, "total_steps": 300, "sequences": [{"group": 3, "reward": 1.0, "logprobs": [-0.11, -2.3, -0.5],
		  "entropies": [0.42, 1.7, 0.9], "values": [[0.1, 0.3], [0.2, 0.2], [0.4, 0.1]], "embedding": [0.5, -1.2, 0.03, 0.8],
		  "correct": true, "text": "Answer: 3"}]}`,
		`{"step": 1, "sequences": [{"group": 0, "reward": null, "logprobs": [-1, null]}]}`,
		`{"step": 1, "sequences": [null, 3, {"values": [[], null]}]}`,
		`{"step": 1e30, "total_steps": -1}`,
		`null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ReadRollout(bytes.NewReader(data), "batch.json")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "batch.json: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		checkWellFormed(t, r)
		out, err := MarshalRollout(r)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ReadRollout(bytes.NewReader(out), "again.json")
		if err != nil {
			t.Fatalf("written back, the batch does not load: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(back, r) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", back, r)
		}
	})
}

func checkWellFormed(t *testing.T, r *Rollout) {
	t.Helper()
	if r.Step < 0 || r.TotalSteps < 0 || (r.TotalSteps > 0 && r.Step >= r.TotalSteps) || len(r.Seqs) == 0 {
		t.Fatalf("step %d of %d, %d sequences", r.Step, r.TotalSteps, len(r.Seqs))
	}
	dim := -1
	for i, s := range r.Seqs {
		T := len(s.LogProbs)
		if T == 0 || len(s.Response) != T || (s.Entropies != nil && len(s.Entropies) != T) || (s.Values != nil && len(s.Values) != T*r.ValueHeads) {
			t.Fatalf("sequence %d: lengths %d/%d/%d/%d", i, T, len(s.Response), len(s.Entropies), len(s.Values))
		}
		if s.Values != nil && (r.ValueHeads == 0 || s.Heads() != r.ValueHeads) {
			t.Fatalf("sequence %d: %d heads, ValueHeads %d", i, s.Heads(), r.ValueHeads)
		}
		if s.Embedding != nil {
			if dim == -1 {
				dim = len(s.Embedding)
			}
			if len(s.Embedding) != dim || dim == 0 {
				t.Fatalf("sequence %d: embedding of %d numbers, want %d", i, len(s.Embedding), dim)
			}
		}
	}
}
