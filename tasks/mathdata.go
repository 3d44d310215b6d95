package tasks

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"
)

// MathRow is one problem of a math dataset file before its prompt is
// rendered with a chat template.
type MathRow struct {
	// Messages is the prompt as a conversation: a plain-text prompt is one
	// user message; a verl-style prompt is its message list.
	Messages []Message
	// Answer is the reference final answer.
	Answer string
	// Solution is a worked solution whose final answer MathVerifier finds
	// (a GSM8K answer with its "#### N" line, a MATH solution with its
	// \boxed{}); empty when the file has none.
	Solution string
	// Level is the difficulty (an integer, or MATH's "Level N"); 0 when absent.
	Level int
	// Row is the 1-based row number (the line number for JSONL).
	Row int
}

// MathKeys says which fields of a row hold the prompt and the answer: a
// field name, or a dotted path into nested objects ("reward_model.ground_truth").
// An empty key means the first of these the row has:
//
//	prompt: "prompt", "question" (GSM8K), "problem" (MATH)
//	answer: "reward_model.ground_truth" (verl), "answer", "solution" (its last \boxed{})
type MathKeys struct {
	Prompt, Answer string
}

var (
	autoPromptKeys = []string{"prompt", "question", "problem"}
	autoAnswerKeys = []string{"reward_model.ground_truth", "answer", "solution"}
)

// Dataset formats.
const (
	FormatJSONL   = "jsonl"
	FormatParquet = "parquet"
)

// MaxParquetBytes bounds a parquet file's size (4 GiB): the reader holds its
// rows in memory.
const MaxParquetBytes = 4 << 30

// FormatOf returns the format of path from its extension (".jsonl", ".json"
// and ".ndjson" are JSONL; ".parquet" is parquet).
func FormatOf(path string) (string, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".jsonl", ".json", ".ndjson":
		return FormatJSONL, nil
	case ".parquet":
		return FormatParquet, nil
	}
	return "", fmt.Errorf("%s: cannot tell the format from the extension (want .jsonl or .parquet); set the task's format key", path)
}

// LoadMath reads a math dataset in format (FormatJSONL or FormatParquet).
// Errors name the file and the row.
func LoadMath(path, format string, keys MathKeys) ([]MathRow, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	switch format {
	case FormatJSONL:
		return ReadMathJSONL(f, path, keys)
	case FormatParquet:
		st, err := f.Stat()
		if err != nil {
			return nil, err
		}
		return ReadMathParquet(f, st.Size(), path, keys)
	}
	return nil, fmt.Errorf("%s: unknown format %q (want jsonl or parquet)", path, format)
}

// ReadMathJSONL reads JSON Lines rows (blank lines skipped, a UTF-8 byte-order
// mark at the start ignored); name labels errors ("name:line: ...").
func ReadMathJSONL(r io.Reader, name string, keys MathKeys) ([]MathRow, error) {
	br := bufio.NewReader(r)
	var out []MathRow
	for line := 1; ; line++ {
		b, err := readLine(br, MaxLineBytes)
		if errors.Is(err, errLineTooLong) {
			return nil, fmt.Errorf("%s:%d: line longer than the limit of %d bytes (tasks.MaxLineBytes)", name, line, MaxLineBytes)
		}
		if line == 1 {
			b = bytes.TrimPrefix(b, []byte("\uFEFF"))
		}
		if len(bytes.TrimSpace(b)) > 0 {
			// encoding/json would turn invalid UTF-8 into U+FFFD silently.
			if i := InvalidUTF8(b); i >= 0 {
				return nil, fmt.Errorf("%s:%d: invalid UTF-8 at byte %d of the line", name, line, i+1)
			}
			var m map[string]any
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.UseNumber()
			if derr := dec.Decode(&m); derr != nil {
				return nil, fmt.Errorf("%s:%d: bad JSON: %v", name, line, derr)
			}
			if dec.More() {
				return nil, fmt.Errorf("%s:%d: more than one JSON value on the line", name, line)
			}
			if m == nil {
				return nil, fmt.Errorf("%s:%d: want a JSON object, got null", name, line)
			}
			row, rerr := mathRow(m, keys)
			if rerr != nil {
				return nil, fmt.Errorf("%s:%d: %w", name, line, rerr)
			}
			row.Row = line
			out = append(out, row)
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
	}
}

// ReadMathParquet reads the rows of a parquet file of size bytes; name labels
// errors ("name: row N: ..."). Nested columns (a list of {role, content}
// messages, a reward_model struct) are read as the JSON-like values they
// hold. A file the parquet library cannot read, even one that makes it
// panic, is an error naming the file.
func ReadMathParquet(r io.ReaderAt, size int64, name string, keys MathKeys) (rows []MathRow, err error) {
	if size > MaxParquetBytes {
		return nil, fmt.Errorf("%s: %d bytes, over the limit of %d bytes (tasks.MaxParquetBytes)", name, size, int64(MaxParquetBytes))
	}
	row := 0
	defer func() {
		if os.Getenv("CDE_DEBUG_PANIC") != "" {
			return
		}
		if v := recover(); v != nil {
			rows, err = nil, fmt.Errorf("%s: corrupt parquet file (row %d): %v", name, row+1, v)
		}
	}()
	if err := checkParquetFrame(r, size); err != nil {
		return nil, fmt.Errorf("%s: not a readable parquet file: %w", name, err)
	}
	pf, err := parquet.OpenFile(r, size, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, fmt.Errorf("%s: not a readable parquet file: %w", name, err)
	}
	if err := checkParquetMetadata(pf.Metadata(), size); err != nil {
		return nil, fmt.Errorf("%s: corrupt parquet file: %w", name, err)
	}
	if err := checkParquetPages(r, pf.Metadata(), pf.Schema()); err != nil {
		return nil, fmt.Errorf("%s: corrupt parquet file: %w", name, err)
	}
	n := pf.NumRows()
	rd := parquet.NewGenericReader[map[string]any](pf, pf.Schema())
	defer rd.Close()
	buf := make([]map[string]any, 64)
	for row < int(n) {
		for i := range buf {
			buf[i] = map[string]any{}
		}
		k, rerr := rd.Read(buf)
		for _, m := range buf[:k] {
			row++
			mr, merr := mathRow(m, keys)
			if merr != nil {
				return nil, fmt.Errorf("%s: row %d: %w", name, row, merr)
			}
			mr.Row = row
			rows = append(rows, mr)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return nil, fmt.Errorf("%s: row %d: %w", name, row+1, rerr)
		}
		if k == 0 {
			return nil, fmt.Errorf("%s: row %d: the parquet reader returned no rows", name, row+1)
		}
	}
	if row != int(n) {
		return nil, fmt.Errorf("%s: %d rows read, the file says %d", name, row, n)
	}
	return rows, nil
}

// lookup follows a dotted path into nested objects.
func lookup(m map[string]any, path string) (any, bool) {
	var v any = m
	for part := range strings.SplitSeq(path, ".") {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = obj[part]; !ok {
			return nil, false
		}
	}
	return v, v != nil
}

// pick returns the key to read: key itself, or the first of auto present.
func pick(m map[string]any, key string, auto []string, what string) (string, any, error) {
	if key != "" {
		v, ok := lookup(m, key)
		if !ok {
			return key, nil, fmt.Errorf("missing %q (the %s key)", key, what)
		}
		return key, v, nil
	}
	for _, k := range auto {
		if v, ok := lookup(m, k); ok {
			return k, v, nil
		}
	}
	return "", nil, fmt.Errorf("no %s field (looked for %s; set the task's %s_key)", what, quoteList(auto), what)
}

func quoteList(ks []string) string {
	q := make([]string, len(ks))
	for i, k := range ks {
		q[i] = strconv.Quote(k)
	}
	return strings.Join(q, ", ")
}

// text reads a string field (a JSON number or a parquet integer is kept as
// written; bytes must be UTF-8).
func text(v any, key string, allowNumber bool) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case []byte:
		if utf8.Valid(x) {
			return string(x), nil
		}
		return "", fmt.Errorf("%q: not UTF-8 text", key)
	case json.Number:
		if allowNumber {
			return x.String(), nil
		}
	case int64, int32, int, float64, float32:
		if allowNumber {
			return fmt.Sprint(x), nil
		}
	}
	want := "a string"
	if allowNumber {
		want = "a string or number"
	}
	return "", fmt.Errorf("%q: want %s, got %s", key, want, describe(v))
}

// describe names a value's kind for an error message, with a short excerpt.
func describe(v any) string {
	switch x := v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return fmt.Sprintf("a list of %d", len(x))
	case bool:
		return "a boolean"
	case nil:
		return "null"
	case json.Number:
		return "the number " + x.String()
	}
	s := fmt.Sprint(v)
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return fmt.Sprintf("the value %q", s)
}

// messages reads a prompt: a string is one user message; a list holds
// {role, content} objects.
func messages(v any, key string) ([]Message, error) {
	if list, ok := v.([]any); ok {
		if len(list) == 0 {
			return nil, fmt.Errorf("%q: empty message list", key)
		}
		out := make([]Message, 0, len(list))
		total := 0
		for i, it := range list {
			obj, ok := it.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%q[%d]: want a {role, content} object, got %s", key, i, describe(it))
			}
			var m Message
			var err error
			for _, f := range []struct {
				k   string
				dst *string
			}{{"role", &m.Role}, {"content", &m.Content}} {
				raw, ok := obj[f.k]
				if !ok || raw == nil {
					return nil, fmt.Errorf("%q[%d]: missing %q", key, i, f.k)
				}
				if *f.dst, err = text(raw, fmt.Sprintf("%s[%d].%s", key, i, f.k), false); err != nil {
					return nil, err
				}
			}
			switch m.Role {
			case "system", "user", "assistant":
			default:
				return nil, fmt.Errorf("%q[%d]: role %q (want system, user or assistant)", key, i, m.Role)
			}
			if m.Role == "system" && i > 0 {
				return nil, fmt.Errorf("%q[%d]: a system message must come first", key, i)
			}
			total += len(m.Content)
			out = append(out, m)
		}
		if strings.TrimSpace(strings.Join(func() []string {
			c := make([]string, len(out))
			for i, m := range out {
				c[i] = m.Content
			}
			return c
		}(), "")) == "" {
			return nil, fmt.Errorf("%q: every message is empty", key)
		}
		if out[len(out)-1].Role != "user" {
			return nil, fmt.Errorf("%q: the last message is %q; a prompt ends with the user's turn", key, out[len(out)-1].Role)
		}
		if total > MaxPromptBytes {
			return nil, fmt.Errorf("%q: %d bytes, over the limit of %d bytes (tasks.MaxPromptBytes)", key, total, MaxPromptBytes)
		}
		return out, nil
	}
	s, err := text(v, key, false)
	if err != nil {
		return nil, fmt.Errorf("%s, or a list of {role, content} messages", err)
	}
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("empty %q", key)
	}
	if len(s) > MaxPromptBytes {
		return nil, fmt.Errorf("%q: %d bytes, over the limit of %d bytes (tasks.MaxPromptBytes)", key, len(s), MaxPromptBytes)
	}
	return []Message{{Role: "user", Content: s}}, nil
}

// mathRow reads one row's prompt, answer, solution and level.
func mathRow(m map[string]any, keys MathKeys) (MathRow, error) {
	var row MathRow
	pk, pv, err := pick(m, keys.Prompt, autoPromptKeys, "prompt")
	if err != nil {
		return row, err
	}
	if row.Messages, err = messages(pv, pk); err != nil {
		return row, err
	}
	ak, av, err := pick(m, keys.Answer, autoAnswerKeys, "answer")
	if err != nil {
		return row, err
	}
	ans, err := text(av, ak, true)
	if err != nil {
		return row, err
	}
	switch {
	case ak == "solution" || strings.HasSuffix(ak, ".solution"):
		// A worked solution: its final answer is the last \boxed{} (or
		// "Answer:" line, or "#### N").
		row.Solution = ans
		got, ok := ExtractMathAnswer(ans)
		if !ok {
			return row, fmt.Errorf("%q: no final answer found (no \\boxed{}, \"Answer:\" line or \"#### N\")", ak)
		}
		ans = got
	case strings.Contains(ans, GSM8KMarker):
		// A GSM8K answer: working, then "#### N".
		row.Solution = ans
		ans = strings.TrimSpace(ans[strings.LastIndex(ans, GSM8KMarker)+len(GSM8KMarker):])
	default:
		if sv, ok := m["solution"]; ok && sv != nil {
			if row.Solution, err = text(sv, "solution", false); err != nil {
				return row, err
			}
		}
	}
	ans = strings.TrimSpace(ans)
	if ans == "" {
		return row, fmt.Errorf("empty answer (%q)", ak)
	}
	if len(ans) > MaxAnswerBytes {
		return row, fmt.Errorf("%q: answer of %d bytes, over the limit of %d bytes (tasks.MaxAnswerBytes)", ak, len(ans), MaxAnswerBytes)
	}
	if len(row.Solution) > MaxSolutionBytes {
		return row, fmt.Errorf("solution of %d bytes, over the limit of %d bytes (tasks.MaxSolutionBytes)", len(row.Solution), MaxSolutionBytes)
	}
	row.Answer = ans
	if lv, ok := m["level"]; ok && lv != nil {
		row.Level = parseLevel(lv)
	}
	return row, nil
}

// parseLevel reads an integer level or MATH's "Level N"; anything else is 0.
func parseLevel(v any) int {
	s := strings.TrimSpace(strings.TrimPrefix(fmt.Sprint(v), "Level "))
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 1000 {
		return 0
	}
	return n
}

// InvalidUTF8 is the offset of the first byte of b that is not valid
// UTF-8, or -1 when b is valid.
func InvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return -1
}
