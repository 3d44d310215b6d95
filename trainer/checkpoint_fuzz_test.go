package trainer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/cde-rl/cde/internal/fuzzlimit"
)

// FuzzResumeCheckpoint writes an arbitrary manifest, state.json and policy
// file as the only checkpoint of a run and resumes: never a panic, and a
// successful restore only when the manifest's entry for every file it
// lists matches that file (checked here with sha256 directly) and the
// state's step is the directory's.
func FuzzResumeCheckpoint(f *testing.F) {
	policy := []byte("7")
	sum := sha256.Sum256(policy)
	state := []byte(`{"step":2,"seed":1}`)
	ssum := sha256.Sum256(state)
	good, _ := json.Marshal(manifest{Step: 2, Files: map[string]manifestFile{
		"policy.txt": {Size: 1, SHA256: hex.EncodeToString(sum[:])},
		"state.json": {Size: int64(len(state)), SHA256: hex.EncodeToString(ssum[:])},
	}})
	f.Add(good, state, policy)
	f.Add(good, state, []byte("8"))
	f.Add([]byte(`{"files":{"../x":{"size":0}}}`), state, policy)
	f.Add([]byte(`{"files":{}}`), []byte(`{"step":-1}`), policy)
	f.Add([]byte(`null`), []byte(`{"step":2,"seed":1,"strategies":{"0:x":"AA=="}}`), policy)
	// The config is loaded once (YAML parsing does not depend on the input),
	// and the minimisation of new inputs is bounded (see fuzzlimit).
	cfg := fakeConfig(f, 10, 2)
	fuzzlimit.MinimizeTime("2s")
	f.Fuzz(func(t *testing.T, man, st, pol []byte) {
		tr := fakeTrainer(t, cfg, &fakeBackend{})
		dir := filepath.Join(checkpointRoot(tr.RunDir), "step-000002")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, ManifestName), man, 0o644)
		os.WriteFile(filepath.Join(dir, "state.json"), st, 0o644)
		os.WriteFile(filepath.Join(dir, "policy.txt"), pol, 0o644)
		found, _, err := ResumeCheckpoint(tr.RunDir)
		if err != nil || found == "" {
			return
		}
		step, err := tr.Restore(found)
		if err != nil {
			return
		}
		var m manifest
		if json.Unmarshal(man, &m) != nil {
			t.Fatal("restored with a manifest that is not JSON")
		}
		for name, e := range m.Files {
			data, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatalf("restored although %s is unreadable", name)
			}
			h := sha256.Sum256(data)
			if int64(len(data)) != e.Size || hex.EncodeToString(h[:]) != e.SHA256 {
				t.Fatalf("restored although %s does not match its manifest entry", name)
			}
		}
		if step != 2 {
			t.Fatalf("restored step %d from step-000002", step)
		}
	})
}
