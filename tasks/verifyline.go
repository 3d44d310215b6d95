package tasks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cde-rl/cde/core"
)

// VerifyHelp is the help text of cde-run verify.
const VerifyHelp = `usage: cde-run verify < in.jsonl > out.jsonl

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

// verifyLine is one input line of cde-run verify.
type verifyLine struct {
	Response *string `json:"response"`
	Answer   *string `json:"answer"`
}

// VerifyResult is one output line of cde-run verify.
type VerifyResult struct {
	Correct   bool   `json:"correct"`
	Extracted string `json:"extracted"`
}

// VerifyJSONLine checks one input line of cde-run verify: a JSON object
// {"response": string, "answer": string}.
func VerifyJSONLine(v MathVerifier, line []byte) (VerifyResult, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return VerifyResult{}, errors.New(`empty line, want a JSON object {"response": ..., "answer": ...}`)
	}
	var in verifyLine
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&in); err != nil {
		return VerifyResult{}, fmt.Errorf(`want a JSON object {"response": string, "answer": string}: %v`, err)
	}
	if dec.More() {
		return VerifyResult{}, errors.New("more than one JSON value on the line")
	}
	switch {
	case in.Response == nil:
		return VerifyResult{}, errors.New(`missing string field "response"`)
	case in.Answer == nil:
		return VerifyResult{}, errors.New(`missing string field "answer"`)
	}
	extracted, _ := ExtractMathAnswer(*in.Response)
	_, correct := v.Verify(core.Problem{Answer: *in.Answer}, *in.Response)
	return VerifyResult{Correct: correct, Extracted: extracted}, nil
}
