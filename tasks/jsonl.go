package tasks

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"github.com/cde-rl/cde/core"
)

// JSONL is the "jsonl" task: problems read from JSON Lines files.
//
// Config keys:
//
//	path              training file (required)
//	eval              list of {name, path} eval files       default none
//	                  (name required and unique, path required)
//	correct_reward    reward of a correct answer             default 1
//	incorrect_reward  reward of a wrong or missing answer    default -1
//
// Paths are opened as given (relative to the working directory). Each
// non-blank line is a JSON object:
//
//	{"prompt": "47+38=", "answer": "85", "solution": "...", "id": "...", "level": 2}
//
// prompt (non-empty string) and answer (non-empty string, or a JSON number,
// kept as written) are required; solution (string, default "Answer: " +
// answer), id (string, default "<file base name>:<line>") and level
// (integer) are optional; other fields are ignored. A malformed line is an
// error "file:line: reason". An eval prompt that also occurs in the training
// file is an error, so eval sets stay disjoint from training.
type JSONL struct {
	Train    []core.Problem
	evals    []core.EvalSet
	verifier AnswerVerifier
}

var _ core.Task = (*JSONL)(nil)

// NewJSONL builds the jsonl task from p. It does not call p.Finish; New does.
func NewJSONL(p *core.Params) (*JSONL, error) {
	t := &JSONL{}
	path := p.String("path", "")
	if !p.Has("path") || path == "" {
		p.Fail("path", "required (a JSONL file of training problems)")
	}
	t.verifier = AnswerVerifier{
		CorrectReward:   p.Float("correct_reward", 1),
		IncorrectReward: p.Float("incorrect_reward", -1),
	}
	subs, _ := readMaps(p, "eval")
	if err := p.Err(); err != nil {
		return nil, err
	}
	type evalFile struct{ name, path string }
	var evals []evalFile
	seen := map[string]bool{}
	for _, sp := range subs {
		e := evalFile{name: sp.String("name", ""), path: sp.String("path", "")}
		sp.Check(e.name != "", "name", "required")
		sp.Check(!seen[e.name], "name", "duplicate eval set name %q", e.name)
		seen[e.name] = true
		sp.Check(e.path != "", "path", "required")
		if err := sp.Finish(); err != nil {
			return nil, err
		}
		evals = append(evals, e)
	}

	var err error
	if t.Train, err = LoadJSONL(path); err != nil {
		return nil, fmt.Errorf("config: %s: %w", keyPath(p, "path"), err)
	}
	if len(t.Train) == 0 {
		return nil, fmt.Errorf("config: %s: %s: no problems", keyPath(p, "path"), path)
	}
	trainAt := map[string]string{}
	for _, pr := range t.Train {
		if _, dup := trainAt[pr.Prompt]; !dup {
			trainAt[pr.Prompt] = pr.ID
		}
	}
	for i, e := range evals {
		key := fmt.Sprintf("%s[%d].path", keyPath(p, "eval"), i)
		probs, err := LoadJSONL(e.path)
		if err != nil {
			return nil, fmt.Errorf("config: %s: %w", key, err)
		}
		for _, pr := range probs {
			if id, dup := trainAt[pr.Prompt]; dup {
				return nil, fmt.Errorf("config: %s: problem %s: prompt also in the training file (%s)", key, pr.ID, id)
			}
		}
		t.evals = append(t.evals, core.EvalSet{Name: e.name, Problems: probs})
	}
	return t, nil
}

// LoadJSONL reads problems from a JSON Lines file (format in JSONL).
func LoadJSONL(path string) ([]core.Problem, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadJSONL(f, path)
}

// ReadJSONL reads problems from r; name labels errors ("name:line: ...") and
// default ids ("<base name>:<line>").
func ReadJSONL(r io.Reader, name string) ([]core.Problem, error) {
	br := bufio.NewReader(r)
	base := filepath.Base(name)
	var out []core.Problem
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(b)) > 0 {
			p, perr := parseLine(b)
			if perr != nil {
				return nil, fmt.Errorf("%s:%d: %w", name, line, perr)
			}
			if p.ID == "" {
				p.ID = base + ":" + strconv.Itoa(line)
			}
			out = append(out, p)
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
	}
}

func parseLine(b []byte) (core.Problem, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return core.Problem{}, fmt.Errorf("bad JSON: %v", err)
	}
	if m == nil {
		return core.Problem{}, errors.New("want a JSON object, got null")
	}
	var p core.Problem
	var err error
	if p.Prompt, err = stringField(m, "prompt", true, false); err != nil {
		return p, err
	}
	if p.Answer, err = stringField(m, "answer", true, true); err != nil {
		return p, err
	}
	if p.Solution, err = stringField(m, "solution", false, false); err != nil {
		return p, err
	}
	if p.ID, err = stringField(m, "id", false, false); err != nil {
		return p, err
	}
	if raw, ok := m["level"]; ok {
		if err := json.Unmarshal(raw, &p.Level); err != nil {
			return p, fmt.Errorf(`"level": want an integer, got %s`, raw)
		}
	}
	if p.Solution == "" {
		p.Solution = AnswerMarker + " " + p.Answer
	}
	return p, nil
}

// stringField reads field k of m as a string; allowNumber also accepts a JSON
// number (kept as written).
func stringField(m map[string]json.RawMessage, k string, required, allowNumber bool) (string, error) {
	raw, ok := m[k]
	if !ok || string(raw) == "null" {
		if required {
			return "", fmt.Errorf("missing %q", k)
		}
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		var n json.Number
		if !allowNumber || json.Unmarshal(raw, &n) != nil {
			want := "a string"
			if allowNumber {
				want = "a string or number"
			}
			return "", fmt.Errorf("%q: want %s, got %s", k, want, raw)
		}
		s = n.String()
	}
	if required && s == "" {
		return "", fmt.Errorf("empty %q", k)
	}
	return s, nil
}

// Name returns "jsonl".
func (t *JSONL) Name() string { return "jsonl" }

// Tokenizer returns the character tokenizer.
func (t *JSONL) Tokenizer() core.Tokenizer { return NewCharTokenizer() }

// Verifier returns the configured AnswerVerifier.
func (t *JSONL) Verifier() core.Verifier { return t.verifier }

// EvalSets returns the eval files' problems, in config order.
func (t *JSONL) EvalSets() []core.EvalSet { return t.evals }

// SampleTrain draws n training problems uniformly (with replacement).
func (t *JSONL) SampleTrain(rng *rand.Rand, n int) []core.Problem {
	out := make([]core.Problem, 0, max(n, 0))
	for range n {
		out = append(out, t.Train[rng.IntN(len(t.Train))])
	}
	return out
}
