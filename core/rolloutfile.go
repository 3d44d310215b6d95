package core

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
)

// RolloutFile is the JSON form of one batch (docs/rollout-format.md), written by
// `train --dump-rollouts` and read by `cde-run shape`.
type RolloutFile struct {
	Step       int          `json:"step"`
	TotalSteps int          `json:"total_steps"`
	Sequences  []RolloutSeq `json:"sequences"`
}

// RolloutSeq is one response. LogProbs has one entry per response token;
// Entropies, Values (T x K), Embedding, RefLogProbs, NewLogProbs and
// RolloutLogProbs are optional. RolloutLogProbs are the generation server's
// log-probs (Sequence.RolloutLogProbs), null where the server gave none. Correct is the verifier's verdict (read by grpo_passk); Text is
// informational.
type RolloutSeq struct {
	Group       int         `json:"group"`
	Reward      float64     `json:"reward"`
	LogProbs    []float64   `json:"logprobs"`
	Entropies   []float64   `json:"entropies,omitempty"`
	Values      [][]float64 `json:"values,omitempty"`
	Embedding   []float64   `json:"embedding,omitempty"`
	RefLogProbs []float64   `json:"ref_logprobs,omitempty"`
	NewLogProbs []float64   `json:"new_logprobs,omitempty"`
	// RolloutLogProbs holds null for NaN (JSON has no NaN).
	RolloutLogProbs []*float64 `json:"rollout_logprobs,omitempty"`
	Correct         *bool      `json:"correct,omitempty"`
	Text            string     `json:"text,omitempty"`
	// ProblemID, AnswerKey and SolutionKey (optional) are the Sequence's:
	// outcome_ucb counts (problem, answer) pairs, rare_correct clusters a
	// group's correct responses by solution.
	ProblemID   string `json:"problem_id,omitempty"`
	AnswerKey   string `json:"answer_key,omitempty"`
	SolutionKey string `json:"solution_key,omitempty"`
}

// RolloutFileExtras is what a rollout file says beyond the Rollout it
// decodes to (Rollout.File), for `cde-run shape`.
type RolloutFileExtras struct {
	// HasCorrect[i] reports whether sequence i has a "correct" field
	// (Sequence.Correct is false both for false and for a missing field).
	HasCorrect []bool
	// NewLogProbs[i] is sequence i's new_logprobs: the current policy's
	// log-probs of its tokens, from which shape computes the policy loss.
	// nil when the file has none (every sequence has them or none does).
	NewLogProbs [][]float64
}

// WriteRolloutFile writes r in the rollout-file format.
func WriteRolloutFile(path string, r *Rollout) error {
	data, err := MarshalRollout(r)
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, data)
}

// MarshalRollout returns r in the rollout-file format. A batch read from a
// file (r.File set) is written back as it was read: correct only where it
// was given, new_logprobs when it had them.
func MarshalRollout(r *Rollout) ([]byte, error) {
	f := RolloutFile{Step: r.Step, TotalSteps: r.TotalSteps}
	for i := range r.Seqs {
		s := &r.Seqs[i]
		c := s.Correct
		seq := RolloutSeq{Group: s.Group, Reward: s.Reward, LogProbs: s.LogProbs,
			Entropies: s.Entropies, Values: fileRows(s), Embedding: s.Embedding, RefLogProbs: s.RefLogProbs,
			RolloutLogProbs: nullNaN(s.RolloutLogProbs), Correct: &c, Text: s.Text, ProblemID: s.ProblemID, AnswerKey: s.AnswerKey, SolutionKey: s.SolutionKey}
		if r.File != nil { // a batch read from a file: write back what it said
			if i < len(r.File.HasCorrect) && !r.File.HasCorrect[i] {
				seq.Correct = nil
			}
			if i < len(r.File.NewLogProbs) {
				seq.NewLogProbs = r.File.NewLogProbs[i]
			}
		}
		f.Sequences = append(f.Sequences, seq)
	}
	return json.Marshal(f)
}

// ReadRolloutFile reads the rollout file at path (see ReadRollout).
func ReadRolloutFile(path string) (*Rollout, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadRollout(f, path)
}

// ReadRollout reads a rollout file from r into a Rollout; name labels errors
// ("name: sequences[4].reward: missing"). Every field without a sane default
// is checked, so a hand-written or foreign file fails by name rather than
// being read as zeros:
//
//   - step (an integer >= 0) is required; total_steps is optional (missing or
//     0: the caller's default, train.steps for shape) and otherwise must be
//     > step;
//   - sequences must be a non-empty list of objects;
//   - each sequence needs group (an integer), reward (a number) and logprobs
//     (a non-empty list of numbers, one per response token: its length is T);
//   - entropies (T numbers), values (T rows of K numbers, one K for the
//     whole file, K >= 1) and embedding (a non-empty list of numbers, one
//     length for the whole file) are optional; null means absent;
//   - ref_logprobs (the frozen reference policy's log-probs) and
//     new_logprobs (the current policy's) are optional, T numbers each, and
//     each is given for every sequence or for none;
//   - rollout_logprobs (the generation server's log-probs, rollout.servers)
//     are optional, T entries; null there is an unknown log-prob (NaN);
//   - a null where a number is required is an error, never a 0;
//   - correct (a boolean) and text (a string) are optional; other fields
//     are ignored.
//
// Response tokens are not stored; Response is filled with zeros of the right
// length so lengths are known. ref_logprobs go to Sequence.RefLogProbs,
// rollout_logprobs to Sequence.RolloutLogProbs;
// new_logprobs and whether each sequence gave correct go to Rollout.File.
func ReadRollout(r io.Reader, name string) (*Rollout, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	out, err := decodeRollout(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// fileFields are the top-level fields of a rollout file as read: a nil
// pointer is a missing or null field.
type fileFields struct {
	Step       *int               `json:"step"`
	TotalSteps *int               `json:"total_steps"`
	Sequences  *[]json.RawMessage `json:"sequences"`
}

// seqFields are the fields of one sequence as read; []*float64 keeps a null
// element apart from 0.
type seqFields struct {
	Group     *int         `json:"group"`
	Reward    *float64     `json:"reward"`
	LogProbs  *[]*float64  `json:"logprobs"`
	Entropies []*float64   `json:"entropies"`
	Values    [][]*float64 `json:"values"`
	Embedding *[]*float64  `json:"embedding"`
	RefLP     []*float64   `json:"ref_logprobs"`
	NewLP     []*float64   `json:"new_logprobs"`
	RolloutLP []*float64   `json:"rollout_logprobs"`
	Correct   *bool        `json:"correct"`
	Text      *string      `json:"text"`
	ProblemID *string      `json:"problem_id"`
	AnswerKey *string      `json:"answer_key"`
	SolKey    *string      `json:"solution_key"`
}

func decodeRollout(data []byte) (*Rollout, error) {
	var f fileFields
	if err := unmarshalObject(data, &f); err != nil {
		return nil, err
	}
	if f.Step == nil {
		return nil, errors.New("step: missing (the step the batch was sampled at, from 0)")
	}
	if *f.Step < 0 {
		return nil, fmt.Errorf("step: %d: must be >= 0", *f.Step)
	}
	r := &Rollout{Step: *f.Step}
	if f.TotalSteps != nil {
		switch t := *f.TotalSteps; {
		case t < 0:
			return nil, fmt.Errorf("total_steps: %d: must be >= 0 (0: train.steps of the config)", t)
		case t > 0 && *f.Step >= t:
			return nil, fmt.Errorf("step: %d: must be < total_steps (%d); steps count from 0", *f.Step, t)
		}
		r.TotalSteps = *f.TotalSteps
	}
	if f.Sequences == nil {
		return nil, errors.New("sequences: missing (a list of sampled responses)")
	}
	if len(*f.Sequences) == 0 {
		return nil, errors.New("sequences: empty")
	}
	k, dim := 0, 0 // value heads and embedding length, fixed by the first sequence that has them
	extras := &RolloutFileExtras{}
	var newLPs [][]float64
	for i, raw := range *f.Sequences {
		seq, newLP, hasCorrect, err := decodeSeq(raw, &k, &dim)
		if err != nil {
			if fe, ok := err.(fieldError); ok && fe.field == "" {
				return nil, fmt.Errorf("sequences[%d]: %s", i, fe.msg)
			}
			return nil, fmt.Errorf("sequences[%d].%w", i, err)
		}
		if i > 0 && (seq.RefLogProbs == nil) != (r.Seqs[0].RefLogProbs == nil) {
			return nil, fmt.Errorf("sequences[%d].ref_logprobs: given for some sequences and not others (sequence 0 %s them): give them for every sequence or none", i, has(r.Seqs[0].RefLogProbs != nil))
		}
		if i > 0 && (newLP == nil) != (newLPs[0] == nil) {
			return nil, fmt.Errorf("sequences[%d].new_logprobs: given for some sequences and not others (sequence 0 %s them): the policy loss is over the whole file", i, has(newLPs[0] != nil))
		}
		r.Seqs = append(r.Seqs, seq)
		newLPs = append(newLPs, newLP)
		extras.HasCorrect = append(extras.HasCorrect, hasCorrect)
	}
	if newLPs[0] != nil {
		extras.NewLogProbs = newLPs
	}
	r.ValueHeads = k
	r.File = extras
	return r, nil
}

func has(yes bool) string {
	if yes {
		return "has"
	}
	return "lacks"
}

// decodeSeq reads one sequence, its new_logprobs (nil when absent) and
// whether it gave correct; its errors are fieldErrors (the caller prefixes
// "sequences[i].").
func decodeSeq(raw json.RawMessage, k, dim *int) (Sequence, []float64, bool, error) {
	var s seqFields
	if err := unmarshalObject(raw, &s); err != nil {
		if _, ok := err.(fieldError); ok {
			return Sequence{}, nil, false, err
		}
		return Sequence{}, nil, false, fieldError{"", err.Error()}
	}
	if s.Group == nil {
		return Sequence{}, nil, false, fieldError{"group", "missing (the prompt index shared by the responses to one prompt)"}
	}
	if s.Reward == nil {
		return Sequence{}, nil, false, fieldError{"reward", "missing (the verifier reward)"}
	}
	if s.LogProbs == nil {
		return Sequence{}, nil, false, fieldError{"logprobs", "missing (one old-policy log-prob per response token)"}
	}
	logProbs, err := numbers("logprobs", *s.LogProbs)
	if err != nil {
		return Sequence{}, nil, false, err
	}
	T := len(logProbs)
	if T == 0 {
		return Sequence{}, nil, false, fieldError{"logprobs", "empty (one entry per response token is required)"}
	}
	seq := Sequence{Group: *s.Group, Reward: *s.Reward, LogProbs: logProbs, Response: make([]int32, T)}
	if s.Entropies != nil {
		if len(s.Entropies) != T {
			return Sequence{}, nil, false, fieldError{"entropies", fmt.Sprintf("%d entries for %d tokens", len(s.Entropies), T)}
		}
		if seq.Entropies, err = numbers("entropies", s.Entropies); err != nil {
			return Sequence{}, nil, false, err
		}
	}
	if s.Values != nil {
		if len(s.Values) != T {
			return Sequence{}, nil, false, fieldError{"values", fmt.Sprintf("%d rows for %d tokens", len(s.Values), T)}
		}
		var flat []float64
		for t, row := range s.Values {
			if row == nil {
				return Sequence{}, nil, false, fieldError{fmt.Sprintf("values[%d]", t), "null (want a list of the K head values)"}
			}
			if *k == 0 {
				*k = len(row)
			}
			if len(row) != *k || len(row) == 0 {
				return Sequence{}, nil, false, fieldError{fmt.Sprintf("values[%d]", t), fmt.Sprintf("%d heads, want %d", len(row), max(*k, 1))}
			}
			if flat == nil {
				flat = make([]float64, 0, T**k)
			}
			for j, x := range row {
				if x == nil {
					return Sequence{}, nil, false, fieldError{fmt.Sprintf("values[%d][%d]", t, j), "null (want a number)"}
				}
				flat = append(flat, *x)
			}
		}
		seq.Values = flat
	}
	if s.Embedding != nil {
		e := *s.Embedding
		if len(e) == 0 {
			return Sequence{}, nil, false, fieldError{"embedding", "empty (omit it, or give the pooled hidden state)"}
		}
		if *dim == 0 {
			*dim = len(e)
		}
		if len(e) != *dim {
			return Sequence{}, nil, false, fieldError{"embedding", fmt.Sprintf("%d numbers, want %d as in the earlier sequences", len(e), *dim)}
		}
		if seq.Embedding, err = numbers("embedding", e); err != nil {
			return Sequence{}, nil, false, err
		}
	}
	if s.RefLP != nil {
		if len(s.RefLP) != T {
			return Sequence{}, nil, false, fieldError{"ref_logprobs", fmt.Sprintf("%d entries for %d tokens", len(s.RefLP), T)}
		}
		if seq.RefLogProbs, err = numbers("ref_logprobs", s.RefLP); err != nil {
			return Sequence{}, nil, false, err
		}
	}
	var newLP []float64
	if s.NewLP != nil {
		if len(s.NewLP) != T {
			return Sequence{}, nil, false, fieldError{"new_logprobs", fmt.Sprintf("%d entries for %d tokens", len(s.NewLP), T)}
		}
		if newLP, err = numbers("new_logprobs", s.NewLP); err != nil {
			return Sequence{}, nil, false, err
		}
	}
	if s.RolloutLP != nil {
		if len(s.RolloutLP) != T {
			return Sequence{}, nil, false, fieldError{"rollout_logprobs", fmt.Sprintf("%d entries for %d tokens", len(s.RolloutLP), T)}
		}
		seq.RolloutLogProbs = make([]float64, T)
		for i, x := range s.RolloutLP {
			seq.RolloutLogProbs[i] = math.NaN() // null: the server gave none
			if x != nil {
				seq.RolloutLogProbs[i] = *x
			}
		}
	}
	if s.Correct != nil {
		seq.Correct = *s.Correct
	}
	if s.Text != nil {
		seq.Text = *s.Text
	}
	if s.ProblemID != nil {
		seq.ProblemID = *s.ProblemID
	}
	if s.AnswerKey != nil {
		seq.AnswerKey = *s.AnswerKey
	}
	if s.SolKey != nil {
		seq.SolutionKey = *s.SolKey
	}
	return seq, newLP, s.Correct != nil, nil
}

// nullNaN returns xs with NaN entries as nil (JSON null); nil for nil.
func nullNaN(xs []float64) []*float64 {
	if xs == nil {
		return nil
	}
	out := make([]*float64, len(xs))
	for i := range xs {
		if !math.IsNaN(xs[i]) {
			out[i] = &xs[i]
		}
	}
	return out
}

// numbers converts a decoded list, refusing null entries.
// fileRows is s.Values as the rollout file writes them, one row of K
// head values per token (windows of Values); nil without values.
func fileRows(s *Sequence) [][]float64 {
	k := s.Heads()
	if k == 0 {
		return nil
	}
	rows := make([][]float64, s.Len())
	for t := range rows {
		rows[t] = s.ValueRow(t)
	}
	return rows
}

func numbers(field string, xs []*float64) ([]float64, error) {
	out := make([]float64, len(xs))
	for i, x := range xs {
		if x == nil {
			return nil, fieldError{fmt.Sprintf("%s[%d]", field, i), "null (want a number)"}
		}
		out[i] = *x
	}
	return out, nil
}

// fieldError is an error about one field; it prints "field: msg".
type fieldError struct{ field, msg string }

func (e fieldError) Error() string {
	if e.field == "" {
		return e.msg
	}
	return e.field + ": " + e.msg
}

// unmarshalObject decodes a JSON object into v, turning a type mismatch into
// a fieldError naming the field ("group: want an integer, got string").
func unmarshalObject(data []byte, v any) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return errors.New("want a JSON object")
	}
	err := json.Unmarshal(data, v)
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fieldError{te.Field, fmt.Sprintf("want %s, got %s", jsonKind(te.Type), te.Value)}
	}
	return err
}

// jsonKind names the JSON form of a Go type in an error message.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int:
		return "an integer"
	case reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "a list"
	}
	return t.String()
}
