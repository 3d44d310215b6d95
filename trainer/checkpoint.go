package trainer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/cde-rl/cde/core"
)

// CheckpointState is what a checkpoint holds besides the backend's files.
// Randomness needs no saved state: every draw is seeded by Mix(seed, step).
type CheckpointState struct {
	Step int    `json:"step"` // steps completed
	Seed uint64 `json:"seed"`
	// Strategies maps "index:name" to the strategy's saved state.
	Strategies map[string][]byte `json:"strategies,omitempty"`
	// Config holds the keys a resumed run may not change (see
	// FixedConfigKeys), as the run had them.
	Config map[string]any `json:"config,omitempty"`
	// ValueHeads is the run's number of critic heads (0: no critic), so a
	// reader learns it without building the run's strategies (plugin
	// processes included). Absent (nil) in checkpoints written before it.
	ValueHeads *int `json:"value_heads,omitempty"`
	// GeneratedResponses is train/generated_responses_total after the
	// checkpoint's step: every response generated in the steps before it,
	// dynamic sampling's dropped groups included. Absent (nil) in
	// checkpoints written before it; a resumed run then rebuilds it from
	// metrics.jsonl.
	GeneratedResponses *int64 `json:"generated_responses,omitempty"`
}

func checkpointRoot(runDir string) string { return filepath.Join(runDir, "checkpoints") }

// Checkpoint writes RUN/checkpoints/step-N (backend files, state.json and
// last MANIFEST.json, the sha256 of every file), then points LATEST at it,
// then prunes old checkpoints. Everything is synced before the next name
// changes, and a checkpoint that replaces one of the same step is swapped
// in atomically, so a crash at any instant leaves the newest complete
// checkpoint in place (ResumeCheckpoint finds it whatever LATEST says).
//
// A checkpoint that fails (a full disk, a strategy's SaveState error)
// removes its step-N.partial directory before returning, so the space it
// took is free again at once, not at the next resume.
func (t *Trainer) Checkpoint(step int) (err error) {
	root := checkpointRoot(t.RunDir)
	name := fmt.Sprintf("step-%06d", step)
	dir := filepath.Join(root, name)
	tmp := dir + partialSuffix
	os.RemoveAll(tmp)
	defer func() {
		if err != nil {
			if rerr := os.RemoveAll(tmp); rerr != nil {
				t.Log.Warn().Err(rerr).Str("dir", tmp).Msg("could not remove the failed checkpoint's directory")
			}
		}
	}()
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	if err := t.Backend.Save(tmp); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	heads := t.needs.ValueHeads
	st := CheckpointState{Step: step, Seed: t.Cfg.Seed, Strategies: map[string][]byte{}, Config: fixedConfig(t.Cfg), ValueHeads: &heads}
	if t.generatedAt == step {
		generated := t.generated
		st.GeneratedResponses = &generated
	}
	for i, s := range t.Strategies {
		if h := t.hooks()[i]; h.SaveState != nil {
			data, err := h.SaveState()
			if err != nil {
				return fmt.Errorf("checkpoint: strategies[%d] (%s): %w", i, s.Name(), err)
			}
			st.Strategies[fmt.Sprintf("%d:%s", i, s.Name())] = data
		}
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := core.WriteFileAtomic(filepath.Join(tmp, "state.json"), data); err != nil {
		return err
	}
	crashPoint("checkpoint.files", step)
	if err := WriteManifest(tmp, step); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	crashPoint("checkpoint.manifest", step)
	if err := installDir(tmp, dir, step); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	crashPoint("checkpoint.installed", step)
	if err := core.WriteFileAtomic(filepath.Join(root, "LATEST"), []byte(name+"\n")); err != nil {
		return err
	}
	syncDir(root)
	crashPoint("checkpoint.latest", step)
	for i, s := range t.Strategies {
		if h := t.hooks()[i]; h.CellCounts != nil {
			counts := h.CellCounts()
			data, err := json.Marshal(map[string]any{"step": step, "strategy": i, "occupied_cells": len(counts), "counts": counts})
			if err != nil {
				return err
			}
			if err := core.WriteFileAtomic(filepath.Join(t.RunDir, s.Name()+"_cells.json"), data); err != nil {
				return err
			}
		}
	}
	t.Log.Debug().Int("step", step).Str("dir", dir).Msg("checkpoint")
	return pruneCheckpoints(root, t.Cfg.Train.KeepCheckpoints, name)
}

const (
	partialSuffix = ".partial" // a checkpoint being written
	oldSuffix     = ".old"     // a replaced checkpoint on its way out
)

// installDir moves the complete directory tmp to dir. When dir exists
// (a checkpoint of the same step, from before a resume), the two are
// exchanged atomically and the old one removed; where that is not
// supported the old one is moved aside to dir.old first, which resume
// also accepts.
func installDir(tmp, dir string, step int) error {
	parent := filepath.Dir(dir)
	if _, err := os.Stat(dir); err == nil {
		if exchange && exchangeDirs(tmp, dir) == nil {
			syncDir(parent)
			crashPoint("checkpoint.exchanged", step)
			return os.RemoveAll(tmp)
		}
		old := dir + oldSuffix
		os.RemoveAll(old)
		if err := os.Rename(dir, old); err != nil {
			return err
		}
		syncDir(parent)
		crashPoint("checkpoint.moved-aside", step)
		if err := os.Rename(tmp, dir); err != nil {
			return err
		}
		syncDir(parent)
		return os.RemoveAll(old)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	syncDir(parent)
	return nil
}

// syncDir makes the directory's entries durable (best effort: not every
// file system can sync a directory).
func syncDir(dir string) {
	if f, err := os.Open(dir); err == nil {
		f.Sync()
		f.Close()
	}
}

// CheckpointStep is the step of a checkpoint directory (its base name
// "step-N"), and whether dir is named as one.
func CheckpointStep(dir string) (int, bool) {
	return checkpointStep(filepath.Base(filepath.Clean(dir)))
}

// checkpointStep parses "step-N" (or "step-N.old") and reports whether
// name is a checkpoint directory name.
func checkpointStep(name string) (int, bool) {
	base := strings.TrimSuffix(name, oldSuffix)
	if !strings.HasPrefix(base, "step-") {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimPrefix(base, "step-"))
	return n, err == nil && n >= 0
}

func pruneCheckpoints(root string, keep int, latest string) error {
	entries, err := os.ReadDir(root)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		switch {
		case strings.HasSuffix(e.Name(), partialSuffix), strings.HasSuffix(e.Name(), oldSuffix):
			// Leftovers of a crash: never the newest complete checkpoint,
			// which now is latest.
			if err := os.RemoveAll(filepath.Join(root, e.Name())); err != nil {
				return err
			}
		default:
			if _, ok := checkpointStep(e.Name()); ok {
				names = append(names, e.Name())
			}
		}
	}
	sort.Strings(names)
	for len(names) > keep {
		if names[0] != latest {
			if err := os.RemoveAll(filepath.Join(root, names[0])); err != nil {
				return err
			}
		}
		names = names[1:]
	}
	return nil
}

// LatestCheckpoint returns the checkpoint a resume of RUN continues from
// (see ResumeCheckpoint), or "" when the run has none.
func LatestCheckpoint(runDir string) (string, error) {
	dir, _, err := ResumeCheckpoint(runDir)
	return dir, err
}

// ResumeCheckpoint returns the newest complete checkpoint of RUN: the
// highest step whose MANIFEST.json is present and whose files all match it.
// Incomplete ones (a crash while writing: no manifest) are skipped and
// listed in skipped with the reason; a checkpoint whose files do not match
// its manifest (a flipped byte, a truncated file) is an error naming the
// file, never silently passed over. "" when the run has no complete
// checkpoint.
func ResumeCheckpoint(runDir string) (dir string, skipped []string, err error) {
	root := checkpointRoot(runDir)
	entries, err := os.ReadDir(root)
	if os.IsNotExist(err) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	type cand struct {
		step int
		name string
	}
	var cands []cand
	for _, e := range entries {
		if n, ok := checkpointStep(e.Name()); ok && e.IsDir() {
			cands = append(cands, cand{n, e.Name()})
		}
	}
	// Newest first; at equal steps the installed name before its .old.
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].step != cands[j].step {
			return cands[i].step > cands[j].step
		}
		return cands[i].name < cands[j].name
	})
	for _, c := range cands {
		path := filepath.Join(root, c.name)
		err := VerifyCheckpoint(path)
		if err == nil {
			return path, skipped, nil
		}
		if errors.Is(err, ErrIncompleteCheckpoint) {
			skipped = append(skipped, fmt.Sprintf("%s: %v", c.name, err))
			continue
		}
		return "", skipped, err
	}
	return "", skipped, nil
}

// Restore loads a checkpoint directory into the backend and strategies and
// returns the step to continue from. The files are checked against the
// checkpoint's manifest first.
func (t *Trainer) Restore(dir string) (int, error) {
	if err := VerifyCheckpoint(dir); err != nil {
		return 0, fmt.Errorf("resume: %w", err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return 0, fmt.Errorf("resume: %w", err)
	}
	var st CheckpointState
	if err := json.Unmarshal(data, &st); err != nil {
		return 0, fmt.Errorf("resume: %s/state.json: %w", dir, err)
	}
	if n, ok := checkpointStep(filepath.Base(dir)); st.Step < 0 || ok && n != st.Step {
		return 0, fmt.Errorf("resume: %s/state.json: step %d does not match the checkpoint's name", dir, st.Step)
	}
	if st.Seed != t.Cfg.Seed {
		return 0, fmt.Errorf("resume: checkpoint seed %d differs from config seed %d", st.Seed, t.Cfg.Seed)
	}
	if st.Config != nil {
		if err := compareFixed(st.Config, fixedConfig(t.Cfg)); err != nil {
			return 0, fmt.Errorf("resume: %s: %w", dir, err)
		}
	}
	if err := t.Backend.Load(dir); err != nil {
		return 0, fmt.Errorf("resume: %w", err)
	}
	for i, s := range t.Strategies {
		h := t.hooks()[i]
		if h.LoadState == nil {
			continue
		}
		key := strconv.Itoa(i) + ":" + s.Name()
		blob, ok := st.Strategies[key]
		if !ok {
			return 0, fmt.Errorf("resume: checkpoint has no state for strategies[%d] (%s)", i, s.Name())
		}
		if err := h.LoadState(blob); err != nil {
			return 0, fmt.Errorf("resume: strategies[%d] (%s): %w", i, s.Name(), err)
		}
	}
	if st.GeneratedResponses != nil {
		t.generated, t.generatedAt = *st.GeneratedResponses, st.Step
	} else {
		t.generatedAt = -1 // unknown: Run rebuilds it
	}
	return st.Step, nil
}

// CheckpointValueHeads reads the number of critic heads a checkpoint's run
// had from its state.json; known is false for a checkpoint written before
// the state recorded it.
func CheckpointValueHeads(dir string) (heads int, known bool, err error) {
	data, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return 0, false, err
	}
	var st CheckpointState
	if err := json.Unmarshal(data, &st); err != nil {
		return 0, false, fmt.Errorf("%s/state.json: %w", dir, err)
	}
	if st.ValueHeads == nil {
		return 0, false, nil
	}
	return *st.ValueHeads, true, nil
}
