package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"github.com/cde-rl/cde/tasks"
)

// serveLines answers each line of in with one JSON value on out (the
// JSONL filters tokenize and verify). Output is flushed whenever no more
// input is buffered, so a caller may write one line and wait for its
// answer. An error names the input line; the lines before it have been
// answered.
func serveLines(in io.Reader, out io.Writer, answer func(line []byte) (any, error)) error {
	r := bufio.NewReaderSize(in, 1<<16)
	w := bufio.NewWriterSize(out, 1<<16)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if len(line) == 0 && err == io.EOF {
			return w.Flush()
		}
		if err != nil && err != io.EOF {
			w.Flush()
			return fmt.Errorf("stdin line %d: %w", n, err)
		}
		if i := tasks.InvalidUTF8(line); i >= 0 {
			w.Flush()
			return fmt.Errorf("stdin line %d: invalid UTF-8 at byte %d of the line", n, i+1)
		}
		v, aerr := answer(line)
		if aerr != nil {
			w.Flush()
			return fmt.Errorf("stdin line %d: %w", n, aerr)
		}
		if werr := enc.Encode(v); werr != nil {
			return fmt.Errorf("stdout: %w", werr)
		}
		if r.Buffered() == 0 || err == io.EOF {
			if ferr := w.Flush(); ferr != nil {
				return fmt.Errorf("stdout: %w", ferr)
			}
		}
		if err == io.EOF {
			return nil
		}
	}
}
