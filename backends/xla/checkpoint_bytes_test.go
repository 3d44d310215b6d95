package xla

import (
	"bytes"
	"encoding/gob"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
)

// Saving one state twice gives the same bytes: gob writes a map in Go's
// random iteration order, so the variables go to disk as a list sorted by
// path. With a critic the policy and critic files hold 30+ variables each,
// so five saves in one map order by chance would be astronomically rare.
func TestSaveIsByteIdentical(t *testing.T) {
	b := tinyBackend(t, 2)
	var first map[string][]byte
	for i := range 5 {
		dir := t.TempDir()
		if err := b.Save(dir); err != nil {
			t.Fatal(err)
		}
		files := map[string][]byte{}
		for _, name := range []string{"policy.gob", "critic.gob"} {
			data, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			files[name] = data
		}
		if i == 0 {
			first = files
			continue
		}
		for name, data := range files {
			if !bytes.Equal(data, first[name]) {
				t.Fatalf("save %d: %s differs from the first save's (%d and %d bytes)", i, name, len(data), len(first[name]))
			}
		}
	}
	// What was saved is what loads: every variable's dimensions and
	// values come back (a byte-identical save of nothing would pass the
	// loop above).
	dir := t.TempDir()
	if err := b.Save(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"policy", "critic"} {
		want, err := map[string]*net{"policy": b.policy, "critic": b.critic}[name].snapshot()
		if err != nil {
			t.Fatal(err)
		}
		var got checkpoint
		if err := readGob(filepath.Join(dir, name+".gob"), &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Vars) != len(want.Vars) || len(want.Vars) < 10 {
			t.Fatalf("%s: %d variables read back, %d saved", name, len(got.Vars), len(want.Vars))
		}
		for p, w := range want.Vars {
			g := got.Vars[p]
			if !slices.Equal(g.Dims, w.Dims) || !slices.Equal(g.Data, w.Data) || len(w.Data) == 0 {
				t.Fatalf("%s: variable %s read back as %v (%d values), saved %v (%d values)", name, p, g.Dims, len(g.Data), w.Dims, len(w.Data))
			}
		}
	}
}

// A policy.gob written before the sorted list (variables in a map) still
// loads, and gives the same policy as the sorted form.
func TestLoadMapCheckpoint(t *testing.T) {
	src := tinyBackend(t, 0)
	ck, err := src.policy.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if len(ck.Vars) < 10 || ck.Sorted != nil {
		t.Fatalf("snapshot holds %d variables in Vars and %d in Sorted", len(ck.Vars), len(ck.Sorted))
	}
	// The old layout, field for field.
	old := struct {
		Config   ModelConfig
		AdamStep int
		Vars     map[string]savedTensor
	}{ck.Config, ck.AdamStep, ck.Vars}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(old); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "policy.gob"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	dst, err := New(Options{Engine: "cpu", Policy: ModelConfig{Vocab: 12, Layers: 2, DModel: 16, Heads: 2, MaxLen: 32},
		Seed: 8, ActorLR: 1e-2, PAD: 0, EOS: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	prompt, resp := []int32{1, 5, 6}, []int32{7, 8, 3, 2}
	if d := maxAbsDiff(scoreOne(t, dst, prompt, resp), scoreOne(t, src, prompt, resp)); d < 1e-3 {
		t.Fatalf("the two seeds' policies agree (max diff %g): the test cannot tell a load", d)
	}
	if err := dst.Load(dir); err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff(scoreOne(t, dst, prompt, resp), scoreOne(t, src, prompt, resp)); d != 0 {
		t.Fatalf("after loading the map-layout policy.gob the log-probs differ by %g", d)
	}

	// A variable listed twice in the sorted form is refused, naming it.
	dup := ck.forDisk()
	dup.Sorted = append(dup.Sorted, dup.Sorted[0])
	buf.Reset()
	if err := gob.NewEncoder(&buf).Encode(dup); err != nil {
		t.Fatal(err)
	}
	if err := core.WriteFileAtomic(filepath.Join(dir, "policy.gob"), buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	err = dst.Load(dir)
	if err == nil || !strings.Contains(err.Error(), dup.Sorted[0].Path+" saved twice") {
		t.Fatalf("a duplicated variable: got %v", err)
	}
}
