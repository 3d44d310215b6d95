package xla

import (
	"bytes"
	"encoding/gob"
	"math"
	"testing"

	"github.com/cde-rl/cde/internal/fuzzlimit"
)

// FuzzCheckpointLoad feeds arbitrary bytes to the policy checkpoint decoder
// and restore: never a panic; a restore either fails leaving the model
// exactly as it was, or succeeds with finite weights of the model's shapes.
func FuzzCheckpointLoad(f *testing.F) {
	b := tinyBackend(f, 0)
	ck, err := b.policy.snapshot()
	if err != nil {
		f.Fatal(err)
	}
	var good bytes.Buffer
	if err := gob.NewEncoder(&good).Encode(ck); err != nil {
		f.Fatal(err)
	}
	f.Add(good.Bytes())
	f.Add(good.Bytes()[:good.Len()/2])
	flipped := bytes.Clone(good.Bytes())
	flipped[len(flipped)-7] ^= 0xff
	f.Add(flipped)
	f.Add([]byte{})
	f.Add([]byte("not a gob"))
	// The seeds are checkpoints of kilobytes: minimising each new input
	// byte by byte ran for most of the fuzzer's 60 s limit (see fuzzlimit).
	fuzzlimit.MinimizeTime("2s")
	// The model's weights before any input, taken once: every input leaves
	// the model as it found it (a failed restore must; a successful one is
	// undone below), so a snapshot per input was work that does not depend
	// on the input.
	before, err := b.policy.snapshot()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got checkpoint
		if err := decodeGob(data, "fuzz", &got); err != nil {
			return
		}
		if err := b.policy.restore(got, "fuzz"); err != nil {
			after, _ := b.policy.snapshot()
			for name, v := range before.Vars {
				w := after.Vars[name]
				for i := range v.Data {
					if math.Float32bits(v.Data[i]) != math.Float32bits(w.Data[i]) {
						t.Fatalf("a failed restore changed %s[%d]", name, i)
					}
				}
			}
			return
		}
		after, _ := b.policy.snapshot()
		for name, v := range after.Vars {
			for i, x := range v.Data {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
					t.Fatalf("restored a non-finite %s[%d] = %v", name, i, x)
				}
			}
		}
		// Put the original weights back for the next input.
		if err := b.policy.restore(before, "original"); err != nil {
			t.Fatal(err)
		}
	})
}
