package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/tasks"
)

const verifyUsage = `usage: cde-run verify < in.jsonl > out.jsonl

Checks math answers with the math verifier (tasks.MathVerifier; the rules are
in docs/verifier.md). Each input line is a JSON object
  {"response": "...", "answer": "..."}
(other fields are ignored); for each one line is written:
  {"correct": true|false, "extracted": "..."}
where "extracted" is the final answer found in the response (the last
\boxed{...}, else the last "Answer:" line, else the last "#### N"), as written
there, or "" when the response has none. "correct" says whether it matches
"answer" after normalisation.

Exit status 0 when every line was checked, 1 on a malformed input line (the
error names the line; the lines before it have been answered), 2 on usage
errors.
`

// verifyLine is one input line of `cde-run verify`.
type verifyLine struct {
	Response *string `json:"response"`
	Answer   *string `json:"answer"`
}

// verifyResult is one output line of `cde-run verify`.
type verifyResult struct {
	Correct   bool   `json:"correct"`
	Extracted string `json:"extracted"`
}

// cmdVerify implements `cde-run verify`.
func cmdVerify(args []string) int {
	for _, a := range args {
		if a == "-h" || a == "--help" || a == "-help" || a == "help" {
			fmt.Print(verifyUsage)
			return 0
		}
	}
	if len(args) > 0 {
		fmt.Fprintf(os.Stderr, "cde-run verify: unexpected argument %q\n\n%s", args[0], verifyUsage)
		return 2
	}
	if err := runVerify(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "cde-run verify: %v\n", err)
		return 1
	}
	return 0
}

// runVerify answers each JSONL line of in with one JSONL line on out.
func runVerify(in io.Reader, out io.Writer) error {
	v := tasks.NewMathVerifier()
	return serveLines(in, out, func(line []byte) (any, error) { return verifyOne(v, line) })
}

// verifyOne checks one input line.
func verifyOne(v tasks.MathVerifier, line []byte) (verifyResult, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return verifyResult{}, errors.New(`empty line, want a JSON object {"response": ..., "answer": ...}`)
	}
	var in verifyLine
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&in); err != nil {
		return verifyResult{}, fmt.Errorf(`want a JSON object {"response": string, "answer": string}: %v`, err)
	}
	if dec.More() {
		return verifyResult{}, errors.New("more than one JSON value on the line")
	}
	switch {
	case in.Response == nil:
		return verifyResult{}, errors.New(`missing string field "response"`)
	case in.Answer == nil:
		return verifyResult{}, errors.New(`missing string field "answer"`)
	}
	extracted, _ := tasks.ExtractMathAnswer(*in.Response)
	_, correct := v.Verify(core.Problem{Answer: *in.Answer}, *in.Response)
	return verifyResult{Correct: correct, Extracted: extracted}, nil
}
