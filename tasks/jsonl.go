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
//	                  (both finite, |r| <= MaxRewardMagnitude)
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
//
// Sizes are bounded (see MaxPromptBytes and the limits beside it) so that a
// corrupt or hostile file fails at load time with an error naming the file,
// line and field, instead of stalling training.
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
	t.verifier = readRewards(p)
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

// Size limits of a JSONL problem, in bytes of UTF-8 text after JSON decoding.
// They are far above real math data (GSM8K: questions up to 991 bytes, final
// answers up to 11, worked solutions up to 1,228) and exist so that a corrupt
// line fails at load time naming the file, line and field.
const (
	// MaxPromptBytes bounds "prompt" (64 KiB).
	MaxPromptBytes = 64 << 10
	// MaxAnswerBytes bounds "answer", a final result such as "72" or
	// "\frac{3}{4}" (1 KiB); working belongs in "solution".
	MaxAnswerBytes = 1 << 10
	// MaxSolutionBytes bounds "solution" (64 KiB).
	MaxSolutionBytes = 64 << 10
	// MaxIDBytes bounds "id" (1 KiB).
	MaxIDBytes = 1 << 10
	// MaxLineBytes bounds a whole line, ignored fields included (16 MiB).
	MaxLineBytes = 16 << 20
)

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
// default ids ("<base name>:<line>"). A UTF-8 byte-order mark at the start
// is skipped. Every problem returned is within the size limits
// (MaxPromptBytes...); a line or field over its limit is an error naming
// the line, the field and the limit.
func ReadJSONL(r io.Reader, name string) ([]core.Problem, error) {
	br := bufio.NewReader(r)
	base := filepath.Base(name)
	var out []core.Problem
	for line := 1; ; line++ {
		b, err := readLine(br, MaxLineBytes)
		if errors.Is(err, errLineTooLong) {
			return nil, fmt.Errorf("%s:%d: line longer than the limit of %d bytes (tasks.MaxLineBytes)", name, line, MaxLineBytes)
		}
		if line == 1 {
			b = bytes.TrimPrefix(b, []byte("\uFEFF"))
		}
		if len(bytes.TrimSpace(b)) > 0 {
			p, perr := parseLine(b)
			if perr != nil {
				return nil, fmt.Errorf("%s:%d: %w", name, line, perr)
			}
			if p.ID == "" {
				p.ID = base + ":" + strconv.Itoa(line)
			}
			p.Source = name + ":" + strconv.Itoa(line)
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

var errLineTooLong = errors.New("line too long")

// readLine returns the next line of br with its '\n' (none at the end of the
// input), reading at most limit bytes of it: a longer line is errLineTooLong.
// At the end of the input it returns io.EOF with the last, unterminated line.
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > limit {
			return nil, errLineTooLong
		}
		line = append(line, chunk...)
		if err != bufio.ErrBufferFull {
			return line, err
		}
	}
}

func parseLine(b []byte) (core.Problem, error) {
	// encoding/json would turn invalid UTF-8 into U+FFFD silently.
	if i := InvalidUTF8(b); i >= 0 {
		return core.Problem{}, fmt.Errorf("invalid UTF-8 at byte %d of the line", i+1)
	}
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
	for _, f := range []struct {
		field, value, constant string
		limit                  int
	}{
		{"prompt", p.Prompt, "MaxPromptBytes", MaxPromptBytes},
		{"answer", p.Answer, "MaxAnswerBytes", MaxAnswerBytes},
		{"solution", p.Solution, "MaxSolutionBytes", MaxSolutionBytes},
		{"id", p.ID, "MaxIDBytes", MaxIDBytes},
	} {
		if len(f.value) > f.limit {
			return p, fmt.Errorf("%q: %d bytes, over the limit of %d bytes (tasks.%s)", f.field, len(f.value), f.limit, f.constant)
		}
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
	return sampleUniform(rng, t.Train, n)
}
