package core

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// CheckpointState is what a checkpoint holds besides the backend's files.
// Randomness needs no saved state: every draw is seeded by Mix(seed, step).
type CheckpointState struct {
	Step int    `json:"step"` // steps completed
	Seed uint64 `json:"seed"`
	// Strategies maps "index:name" to the strategy's saved state.
	Strategies map[string][]byte `json:"strategies,omitempty"`
}

func checkpointRoot(runDir string) string { return filepath.Join(runDir, "checkpoints") }

// Checkpoint writes RUN/checkpoints/step-N (backend files, state.json),
// then points LATEST at it, then prunes old checkpoints. A crash at any
// point leaves LATEST naming a complete checkpoint.
func (t *Trainer) Checkpoint(step int) error {
	root := checkpointRoot(t.RunDir)
	name := fmt.Sprintf("step-%06d", step)
	dir := filepath.Join(root, name)
	tmp := dir + ".partial"
	os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	if err := t.Backend.Save(tmp); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	st := CheckpointState{Step: step, Seed: t.Cfg.Seed, Strategies: map[string][]byte{}}
	for i, s := range t.Strategies {
		if sf, ok := s.(Stateful); ok {
			data, err := sf.SaveState()
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
	if err := WriteFileAtomic(filepath.Join(tmp, "state.json"), data); err != nil {
		return err
	}
	os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	if err := WriteFileAtomic(filepath.Join(root, "LATEST"), []byte(name+"\n")); err != nil {
		return err
	}
	for i, s := range t.Strategies {
		if cc, ok := s.(CellCounter); ok {
			counts := cc.CellCounts()
			data, err := json.Marshal(map[string]any{"step": step, "strategy": i, "occupied_cells": len(counts), "counts": counts})
			if err != nil {
				return err
			}
			if err := WriteFileAtomic(filepath.Join(t.RunDir, s.Name()+"_cells.json"), data); err != nil {
				return err
			}
		}
	}
	t.Log.Debug().Int("step", step).Str("dir", dir).Msg("checkpoint")
	return pruneCheckpoints(root, t.Cfg.Train.KeepCheckpoints, name)
}

func pruneCheckpoints(root string, keep int, latest string) error {
	entries, err := os.ReadDir(root)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "step-") && !strings.HasSuffix(e.Name(), ".partial") {
			names = append(names, e.Name())
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

// LatestCheckpoint returns the directory LATEST names under RUN, or "" when
// the run has none.
func LatestCheckpoint(runDir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(checkpointRoot(runDir), "LATEST"))
	if os.IsNotExist(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return filepath.Join(checkpointRoot(runDir), strings.TrimSpace(string(data))), nil
}

// Restore loads a checkpoint directory into the backend and strategies and
// returns the step to continue from.
func (t *Trainer) Restore(dir string) (int, error) {
	data, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return 0, fmt.Errorf("resume: %w", err)
	}
	var st CheckpointState
	if err := json.Unmarshal(data, &st); err != nil {
		return 0, fmt.Errorf("resume: %s/state.json: %w", dir, err)
	}
	if st.Seed != t.Cfg.Seed {
		return 0, fmt.Errorf("resume: checkpoint seed %d differs from config seed %d", st.Seed, t.Cfg.Seed)
	}
	if err := t.Backend.Load(dir); err != nil {
		return 0, fmt.Errorf("resume: %w", err)
	}
	for i, s := range t.Strategies {
		sf, ok := s.(Stateful)
		if !ok {
			continue
		}
		key := strconv.Itoa(i) + ":" + s.Name()
		blob, ok := st.Strategies[key]
		if !ok {
			return 0, fmt.Errorf("resume: checkpoint has no state for strategies[%d] (%s)", i, s.Name())
		}
		if err := sf.LoadState(blob); err != nil {
			return 0, fmt.Errorf("resume: strategies[%d] (%s): %w", i, s.Name(), err)
		}
	}
	return st.Step, nil
}
