package tasks

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/cde-rl/cde/internal/fuzzlimit"
)

// checkRows holds what every accepted row must satisfy: a conversation that
// ends with a non-empty user turn, system only first, a non-empty answer
// within the limits, increasing row numbers.
func checkRows(t *testing.T, rows []MathRow) {
	t.Helper()
	last := 0
	for i, r := range rows {
		if len(r.Messages) == 0 || r.Messages[len(r.Messages)-1].Role != "user" {
			t.Fatalf("row %d: messages %q", i, r.Messages)
		}
		total := 0
		blank := true
		for j, m := range r.Messages {
			if m.Role == "system" && j > 0 || m.Role != "system" && m.Role != "user" && m.Role != "assistant" {
				t.Fatalf("row %d: message %d role %q", i, j, m.Role)
			}
			total += len(m.Content)
			blank = blank && strings.TrimSpace(m.Content) == ""
		}
		if blank || total > MaxPromptBytes {
			t.Fatalf("row %d: prompt blank or %d bytes", i, total)
		}
		if r.Answer == "" || r.Answer != strings.TrimSpace(r.Answer) || len(r.Answer) > MaxAnswerBytes || len(r.Solution) > MaxSolutionBytes {
			t.Fatalf("row %d: answer %q, solution %d bytes", i, r.Answer, len(r.Solution))
		}
		if r.Row <= last {
			t.Fatalf("row %d: number %d after %d", i, r.Row, last)
		}
		last = r.Row
		for _, tpl := range ChatTemplateNames {
			c, _ := ParseChatTemplate(tpl)
			if c.Render(r.Messages) == "" {
				t.Fatalf("row %d: empty %s rendering", i, tpl)
			}
		}
	}
}

var mathJSONLErrRE = regexp.MustCompile(`^f\.jsonl:([0-9]+): `)

// FuzzMathJSONL checks the math JSONL loader on arbitrary bytes, with the
// automatic keys and with dotted ones: no panic; an error names a line of
// the input; every accepted row is well formed (checkRows).
func FuzzMathJSONL(f *testing.F) {
	for _, s := range []string{
		`{"question": "Q?", "answer": "Work.\n#### 1,000"}`,
		`{"problem": "P", "solution": "so \\boxed{\\frac{1}{2}}", "level": "Level 5"}` + "\n",
		`{"prompt": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}], "reward_model": {"ground_truth": "7"}}`,
		`{"data": {"q": "x"}, "meta": {"gt": 3}}`,
		"\uFEFF" + `{"question": "é", "answer": 1e400}` + "\r\n\n" + `{"question": "b"}`,
		`{"prompt": [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}], "answer": "1"}`,
		`null`,
		`{"question": "q", "answer": "####"}`,
	} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, data []byte, dotted bool) {
		keys := MathKeys{}
		if dotted {
			keys = MathKeys{Prompt: "data.q", Answer: "meta.gt"}
		}
		rows, err := ReadMathJSONL(bytes.NewReader(data), "f.jsonl", keys)
		if err != nil {
			m := mathJSONLErrRE.FindStringSubmatch(err.Error())
			if m == nil {
				t.Fatalf("error does not name a line: %v", err)
			}
			line, _ := strconv.Atoi(m[1])
			if lines := bytes.Count(data, []byte("\n")) + 1; line < 1 || line > lines {
				t.Fatalf("error names line %d of %d: %v", line, lines, err)
			}
			return
		}
		checkRows(t, rows)
		// A row read back from its own JSON form is the same row.
		for _, r := range rows {
			b, _ := json.Marshal(map[string]any{"prompt": r.Messages, "answer": r.Answer})
			back, err := ReadMathJSONL(bytes.NewReader(b), "f.jsonl", MathKeys{})
			if err != nil || len(back) != 1 || back[0].Answer != r.Answer || len(back[0].Messages) != len(r.Messages) {
				t.Fatalf("row %d written back: %+v, %v (%s)", r.Row, back, err, b)
			}
		}
	})
}

// FuzzMathParquet checks the parquet loader on arbitrary bytes (seeded with
// real files and their mutations): no panic escapes, an error names the
// file, every accepted row is well formed.
func FuzzMathParquet(f *testing.F) {
	b, err := os.ReadFile(filepath.Join("testdata", "math", "verl_null_ground_truth.parquet"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	type msg struct {
		Role    string `parquet:"role"`
		Content string `parquet:"content"`
	}
	type row struct {
		Prompt []msg  `parquet:"prompt,list"`
		Answer string `parquet:"answer"`
		Level  int32  `parquet:"level"`
	}
	var buf bytes.Buffer
	if err := parquet.Write(&buf, []row{{[]msg{{"user", "Q"}}, "1", 2}, {[]msg{{"system", "S"}, {"user", "U"}}, "#### 5", 0}}); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	buf.Reset()
	type plain struct {
		Question string `parquet:"question"`
		Answer   int64  `parquet:"answer"`
	}
	if err := parquet.Write(&buf, []plain{{"Q", 3}}); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte("PAR1PAR1"))
	f.Add([]byte("PAR1\x04\x19\x8cH\x03bowPAR1")) // footer length 2 GiB: the library allocated it
	// The seeds are parquet files of hundreds of bytes: minimising each new
	// input byte by byte ran to the fuzzer's 60 s limit (see fuzzlimit).
	fuzzlimit.MinimizeTime("2s")
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, err := ReadMathParquet(bytes.NewReader(data), int64(len(data)), "f.parquet", MathKeys{})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.parquet: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		checkRows(t, rows)
	})
}
