package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// CLIHelp is the help text of cde-run tokenize (its flags follow it).
const CLIHelp = `usage: cde-run tokenize --model DIR [--decode]

Reads one JSON string per line on stdin and writes one JSON array of token ids
per line on stdout, using DIR/tokenizer.json (a Hugging Face tokenizer file).
No special tokens are added; the text of a special or added token inside the
input maps to that token. With --decode, reads JSON arrays of ids and writes
JSON strings. Output is flushed whenever the input has no further line ready,
so the command can serve as a coprocess. Supported tokenizers: docs/tokenizer.md

`

// JSONLine answers one line of cde-run tokenize: a JSON string's token ids
// (no special tokens added), or with decode a JSON array of ids' text.
func (t *Tokenizer) JSONLine(line []byte, decode bool) (any, error) {
	if decode {
		var ids []int64
		if e := json.Unmarshal(line, &ids); e != nil || ids == nil {
			return nil, fmt.Errorf("want a JSON array of token ids: %s", describe(line, e))
		}
		ids32 := make([]int32, len(ids))
		for i, id := range ids {
			if id < 0 || id >= int64(t.VocabSize()) {
				return nil, fmt.Errorf("token id %d is outside the vocabulary (0..%d)", id, t.VocabSize()-1)
			}
			if _, ok := t.IDToToken(int32(id)); !ok {
				return nil, fmt.Errorf("token id %d is not assigned", id)
			}
			ids32[i] = int32(id)
		}
		return t.Decode(ids32), nil
	}
	var s *string
	if e := json.Unmarshal(line, &s); e != nil || s == nil {
		return nil, fmt.Errorf("want a JSON string: %s", describe(line, e))
	}
	ids := t.Encode(*s)
	if ids == nil {
		ids = []int32{}
	}
	return ids, nil
}

// describe explains why a line was refused.
func describe(line []byte, err error) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("got %s", bytes.TrimSpace(line))
}
