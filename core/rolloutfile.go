package core

import (
	"encoding/json"
	"fmt"
	"os"
)

// RolloutFile is the JSON form of one batch (DESIGN section 4), written by
// `train --dump-rollouts` and read by `cde-run shape`.
type RolloutFile struct {
	Step       int          `json:"step"`
	TotalSteps int          `json:"total_steps"`
	Sequences  []RolloutSeq `json:"sequences"`
}

// RolloutSeq is one response. LogProbs has one entry per response token;
// Entropies, Values (T x K) and Embedding are optional. Correct and Text are
// informational extras (ignored by shape).
type RolloutSeq struct {
	Group     int         `json:"group"`
	Reward    float64     `json:"reward"`
	LogProbs  []float64   `json:"logprobs"`
	Entropies []float64   `json:"entropies,omitempty"`
	Values    [][]float64 `json:"values,omitempty"`
	Embedding []float64   `json:"embedding,omitempty"`
	Correct   *bool       `json:"correct,omitempty"`
	Text      string      `json:"text,omitempty"`
}

// WriteRolloutFile writes r in the rollout-file format.
func WriteRolloutFile(path string, r *Rollout) error {
	f := RolloutFile{Step: r.Step, TotalSteps: r.TotalSteps}
	for i := range r.Seqs {
		s := &r.Seqs[i]
		c := s.Correct
		f.Sequences = append(f.Sequences, RolloutSeq{Group: s.Group, Reward: s.Reward, LogProbs: s.LogProbs,
			Entropies: s.Entropies, Values: s.Values, Embedding: s.Embedding, Correct: &c, Text: s.Text})
	}
	data, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, data)
}

// ReadRolloutFile reads a rollout file into a Rollout, checking that every
// per-token array has one entry per log-prob and that value rows share K.
// Response tokens are not stored; Response is filled with zeros of the
// right length so lengths are known.
func ReadRolloutFile(path string) (*Rollout, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f RolloutFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(f.Sequences) == 0 {
		return nil, fmt.Errorf("%s: sequences: empty", path)
	}
	r := &Rollout{Step: f.Step, TotalSteps: f.TotalSteps}
	k := -1
	for i, s := range f.Sequences {
		T := len(s.LogProbs)
		if T == 0 {
			return nil, fmt.Errorf("%s: sequences[%d].logprobs: empty (one entry per response token is required)", path, i)
		}
		if s.Entropies != nil && len(s.Entropies) != T {
			return nil, fmt.Errorf("%s: sequences[%d].entropies: %d entries for %d tokens", path, i, len(s.Entropies), T)
		}
		if s.Values != nil {
			if len(s.Values) != T {
				return nil, fmt.Errorf("%s: sequences[%d].values: %d rows for %d tokens", path, i, len(s.Values), T)
			}
			for t, row := range s.Values {
				if k == -1 {
					k = len(row)
				}
				if len(row) != k || k == 0 {
					return nil, fmt.Errorf("%s: sequences[%d].values[%d]: %d heads, want %d", path, i, t, len(row), k)
				}
			}
		}
		seq := Sequence{Group: s.Group, Reward: s.Reward, LogProbs: s.LogProbs, Entropies: s.Entropies,
			Values: s.Values, Embedding: s.Embedding, Response: make([]int32, T), Text: s.Text}
		if s.Correct != nil {
			seq.Correct = *s.Correct
		}
		r.Seqs = append(r.Seqs, seq)
	}
	if k > 0 {
		r.ValueHeads = k
	}
	return r, nil
}
