package tasks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"testing"
)

var jsonlErrRE = regexp.MustCompile(`^data\.jsonl:([0-9]+): `)

// FuzzReadJSONL checks the JSONL loader on arbitrary bytes: no panic; an
// error names a line of the input; every accepted problem is within the size
// limits, has a prompt, an answer, a solution and an id, and reads back the
// same when written out again.
func FuzzReadJSONL(f *testing.F) {
	for _, s := range []string{
		`{"prompt": "1+1=", "answer": "2"}` + "\n",
		`{"prompt": "2+2=", "answer": 4, "solution": "2+2=4\nAnswer: 4", "id": "four", "level": 1, "extra": true}`,
		"\n\n" + `{"prompt": "x", "answer": "-1.5"}` + "\r\n" + `{"prompt": "p"}`,
		"\uFEFF" + `{"prompt": "\u00e9", "answer": 1e400}`,
		`{"prompt": null, "answer": "2"}`,
		`[1, 2]`,
		`null`,
		`{"prompt": "p", "answer": "2", "level": 1.5}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		probs, err := ReadJSONL(bytes.NewReader(data), "data.jsonl")
		if err != nil {
			m := jsonlErrRE.FindStringSubmatch(err.Error())
			if m == nil {
				t.Fatalf("error does not name a line: %v", err)
			}
			line, _ := strconv.Atoi(m[1])
			if lines := bytes.Count(data, []byte("\n")) + 1; line < 1 || line > lines {
				t.Fatalf("error names line %d of %d: %v", line, lines, err)
			}
			return
		}
		var again bytes.Buffer
		for i, p := range probs {
			if p.Prompt == "" || p.Answer == "" || p.Solution == "" || p.ID == "" {
				t.Fatalf("problem %d has an empty field: %+v", i, p)
			}
			if len(p.Prompt) > MaxPromptBytes || len(p.Answer) > MaxAnswerBytes || len(p.Solution) > MaxSolutionBytes || len(p.ID) > MaxIDBytes {
				t.Fatalf("problem %d over the limits: %d/%d/%d/%d bytes", i, len(p.Prompt), len(p.Answer), len(p.Solution), len(p.ID))
			}
			line, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			again.Write(append(line, '\n'))
		}
		back, err := ReadJSONL(&again, "again.jsonl")
		if err != nil {
			t.Fatalf("written back, the problems do not load: %v\n%s", err, again.Bytes())
		}
		for i := range probs { // Source names the file and line read, which differ
			if i < len(back) && back[i].Source != fmt.Sprintf("again.jsonl:%d", i+1) {
				t.Fatalf("problem %d: Source %q, want again.jsonl:%d", i, back[i].Source, i+1)
			}
			probs[i].Source = ""
			if i < len(back) {
				back[i].Source = ""
			}
		}
		if len(probs) > 0 && !reflect.DeepEqual(back, probs) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", back, probs)
		}
	})
}
