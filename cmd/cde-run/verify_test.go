package main

import (
	"io"
	"os"
	"strings"
	"testing"
)

// verifyStdin runs f with os.Stdin reading text.
func verifyStdin(t *testing.T, text string, f func() int) int {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() { io.WriteString(w, text); w.Close() }()
	old := os.Stdin
	os.Stdin = r
	defer func() { os.Stdin = old; r.Close() }()
	return f()
}

func TestCmdVerify(t *testing.T) {
	in := `{"response": "so \\boxed{\\frac{1}{2}}", "answer": "0.5"}
{"response": "Work.\n#### 1,450,000", "answer": "1450000", "id": 7}
{"response": "Answer: 12", "answer": "13"}
{"response": "no answer here", "answer": "5"}
{"response": "\\boxed{\\text{<b>}}", "answer": "<b>"}
{"answer": "3", "response": "\\boxed{x = 3}"}
`
	want := `{"correct":true,"extracted":"\\frac{1}{2}"}
{"correct":true,"extracted":"1,450,000"}
{"correct":false,"extracted":"12"}
{"correct":false,"extracted":""}
{"correct":true,"extracted":"\\text{<b>}"}
{"correct":true,"extracted":"x = 3"}
`
	var code int
	out, _ := captureStdout(t, func() int {
		code = verifyStdin(t, in, func() int { return cmdVerify(nil) })
		return code
	})
	if code != 0 || out != want {
		t.Fatalf("exit %d, output:\n%s\nwant:\n%s", code, out, want)
	}
	// No trailing newline on the last line.
	out, _ = captureStdout(t, func() int {
		code = verifyStdin(t, `{"response": "#### 4", "answer": "4"}`, func() int { return cmdVerify(nil) })
		return code
	})
	if code != 0 || out != `{"correct":true,"extracted":"4"}`+"\n" {
		t.Fatalf("exit %d, output %q", code, out)
	}
}

func TestCmdVerifyErrorsNameTheLine(t *testing.T) {
	for _, c := range []struct {
		in, msg  string
		answered int
	}{
		{`{"response": "x", "answer": "1"}` + "\nnot json\n", "stdin line 2: want a JSON object", 1},
		{`{"answer": "1"}`, `stdin line 1: missing string field "response"`, 0},
		{`{"response": "1"}`, `stdin line 1: missing string field "answer"`, 0},
		{`{"response": 5, "answer": "1"}`, "stdin line 1: want a JSON object", 0},
		{`{"response": "1", "answer": "1"}` + "\n\n", "stdin line 2: empty line", 1},
		{`{"response": "1", "answer": "1"} {}`, "stdin line 1: more than one JSON value", 0},
		{"null", `stdin line 1: missing string field "response"`, 0},
	} {
		var b strings.Builder
		err := runVerify(strings.NewReader(c.in), &b)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%q: error %v, want %q", c.in, err, c.msg)
		}
		// The lines before the bad one are answered.
		if lines := strings.Count(b.String(), "\n"); lines != c.answered {
			t.Errorf("%q: %d answered lines before the error, want %d:\n%s", c.in, lines, c.answered, b.String())
		}
	}
	code := verifyStdin(t, "oops\n", func() int { return cmdVerify(nil) })
	if code != 1 {
		t.Fatalf("malformed input: exit %d, want 1", code)
	}
}

func TestCmdVerifyUsage(t *testing.T) {
	out, code := captureStdout(t, func() int { return cmdVerify([]string{"--help"}) })
	if code != 0 || !strings.Contains(out, `{"response": "...", "answer": "..."}`) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if code := cmdVerify([]string{"extra"}); code != 2 {
		t.Fatalf("extra argument: exit %d, want 2", code)
	}
}
