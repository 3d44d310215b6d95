package core

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
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
	data, err := MarshalRollout(r)
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, data)
}

// MarshalRollout returns r in the rollout-file format.
func MarshalRollout(r *Rollout) ([]byte, error) {
	f := RolloutFile{Step: r.Step, TotalSteps: r.TotalSteps}
	for i := range r.Seqs {
		s := &r.Seqs[i]
		c := s.Correct
		f.Sequences = append(f.Sequences, RolloutSeq{Group: s.Group, Reward: s.Reward, LogProbs: s.LogProbs,
			Entropies: s.Entropies, Values: s.Values, Embedding: s.Embedding, Correct: &c, Text: s.Text})
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
//   - a null where a number is required is an error, never a 0;
//   - correct (a boolean) and text (a string) are optional extras; other
//     fields are ignored.
//
// Response tokens are not stored; Response is filled with zeros of the right
// length so lengths are known.
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
	Correct   *bool        `json:"correct"`
	Text      *string      `json:"text"`
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
	for i, raw := range *f.Sequences {
		seq, err := decodeSeq(raw, &k, &dim)
		if err != nil {
			if fe, ok := err.(fieldError); ok && fe.field == "" {
				return nil, fmt.Errorf("sequences[%d]: %s", i, fe.msg)
			}
			return nil, fmt.Errorf("sequences[%d].%w", i, err)
		}
		r.Seqs = append(r.Seqs, seq)
	}
	r.ValueHeads = k
	return r, nil
}

// decodeSeq reads one sequence; its errors are fieldErrors (the caller
// prefixes "sequences[i].").
func decodeSeq(raw json.RawMessage, k, dim *int) (Sequence, error) {
	var s seqFields
	if err := unmarshalObject(raw, &s); err != nil {
		if _, ok := err.(fieldError); ok {
			return Sequence{}, err
		}
		return Sequence{}, fieldError{"", err.Error()}
	}
	if s.Group == nil {
		return Sequence{}, fieldError{"group", "missing (the prompt index shared by the responses to one prompt)"}
	}
	if s.Reward == nil {
		return Sequence{}, fieldError{"reward", "missing (the verifier reward)"}
	}
	if s.LogProbs == nil {
		return Sequence{}, fieldError{"logprobs", "missing (one old-policy log-prob per response token)"}
	}
	logProbs, err := numbers("logprobs", *s.LogProbs)
	if err != nil {
		return Sequence{}, err
	}
	T := len(logProbs)
	if T == 0 {
		return Sequence{}, fieldError{"logprobs", "empty (one entry per response token is required)"}
	}
	seq := Sequence{Group: *s.Group, Reward: *s.Reward, LogProbs: logProbs, Response: make([]int32, T)}
	if s.Entropies != nil {
		if len(s.Entropies) != T {
			return Sequence{}, fieldError{"entropies", fmt.Sprintf("%d entries for %d tokens", len(s.Entropies), T)}
		}
		if seq.Entropies, err = numbers("entropies", s.Entropies); err != nil {
			return Sequence{}, err
		}
	}
	if s.Values != nil {
		if len(s.Values) != T {
			return Sequence{}, fieldError{"values", fmt.Sprintf("%d rows for %d tokens", len(s.Values), T)}
		}
		seq.Values = make([][]float64, T)
		for t, row := range s.Values {
			if row == nil {
				return Sequence{}, fieldError{fmt.Sprintf("values[%d]", t), "null (want a list of the K head values)"}
			}
			if *k == 0 {
				*k = len(row)
			}
			if len(row) != *k || len(row) == 0 {
				return Sequence{}, fieldError{fmt.Sprintf("values[%d]", t), fmt.Sprintf("%d heads, want %d", len(row), max(*k, 1))}
			}
			if seq.Values[t], err = numbers(fmt.Sprintf("values[%d]", t), row); err != nil {
				return Sequence{}, err
			}
		}
	}
	if s.Embedding != nil {
		e := *s.Embedding
		if len(e) == 0 {
			return Sequence{}, fieldError{"embedding", "empty (omit it, or give the pooled hidden state)"}
		}
		if *dim == 0 {
			*dim = len(e)
		}
		if len(e) != *dim {
			return Sequence{}, fieldError{"embedding", fmt.Sprintf("%d numbers, want %d as in the earlier sequences", len(e), *dim)}
		}
		if seq.Embedding, err = numbers("embedding", e); err != nil {
			return Sequence{}, err
		}
	}
	if s.Correct != nil {
		seq.Correct = *s.Correct
	}
	if s.Text != nil {
		seq.Text = *s.Text
	}
	return seq, nil
}

// numbers converts a decoded list, refusing null entries.
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
