package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/cde-rl/cde/tokenizer"
)

const tokenizeHelp = `usage: cde-run tokenize --model DIR [--decode]

Reads one JSON string per line on stdin and writes one JSON array of token ids
per line on stdout, using DIR/tokenizer.json (a Hugging Face tokenizer file).
No special tokens are added; the text of a special or added token inside the
input maps to that token. With --decode, reads JSON arrays of ids and writes
JSON strings. Output is flushed whenever the input has no further line ready,
so the command can serve as a coprocess. Supported tokenizers: docs/tokenizer.md

`

func cmdTokenize(args []string) int {
	fs := flag.NewFlagSet("tokenize", flag.ContinueOnError)
	model := fs.String("model", "", "model directory holding tokenizer.json (required)")
	decode := fs.Bool("decode", false, "read JSON arrays of ids, write JSON strings")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), tokenizeHelp)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "cde-run tokenize: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *model == "" {
		fmt.Fprintln(os.Stderr, "cde-run tokenize: --model DIR is required")
		return 2
	}
	tok, err := tokenizer.Load(*model)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cde-run tokenize:", err)
		return 1
	}
	if err := tokenizeStream(tok, os.Stdin, os.Stdout, *decode); err != nil {
		fmt.Fprintln(os.Stderr, "cde-run tokenize:", err)
		return 1
	}
	return 0
}

// tokenizeStream encodes (or with decode, decodes) in line by line to out.
func tokenizeStream(tok *tokenizer.Tokenizer, in io.Reader, out io.Writer, decode bool) error {
	return serveLines(in, out, func(line []byte) (any, error) {
		if decode {
			var ids []int64
			if e := json.Unmarshal(line, &ids); e != nil || ids == nil {
				return nil, fmt.Errorf("want a JSON array of token ids: %s", describe(line, e))
			}
			ids32 := make([]int32, len(ids))
			for i, id := range ids {
				if id < 0 || id >= int64(tok.VocabSize()) {
					return nil, fmt.Errorf("token id %d is outside the vocabulary (0..%d)", id, tok.VocabSize()-1)
				}
				if _, ok := tok.IDToToken(int32(id)); !ok {
					return nil, fmt.Errorf("token id %d is not assigned", id)
				}
				ids32[i] = int32(id)
			}
			return tok.Decode(ids32), nil
		}
		var s *string
		if e := json.Unmarshal(line, &s); e != nil || s == nil {
			return nil, fmt.Errorf("want a JSON string: %s", describe(line, e))
		}
		ids := tok.Encode(*s)
		if ids == nil {
			ids = []int32{}
		}
		return ids, nil
	})
}

// describe explains why a line was refused.
func describe(line []byte, err error) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("got %s", bytes.TrimSpace(line))
}
