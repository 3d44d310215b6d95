package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// withStdin runs f with os.Stdin reading input.
func withStdin(t *testing.T, input string, f func() int) int {
	t.Helper()
	p := filepath.Join(t.TempDir(), "stdin")
	if err := os.WriteFile(p, []byte(input), 0o644); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	old := os.Stdin
	os.Stdin = in
	defer func() { os.Stdin = old }()
	return f()
}

const qwen3Dir = "../../tokenizer/testdata/qwen3"

func TestTokenizeEncodeDecode(t *testing.T) {
	// Expected ids from the reference (tokenizer/testdata/golden_qwen3.json).
	in := "\"Hello world\"\n\"<|im_start|>user\\nWhat is 2+2?<|im_end|>\\n<|im_start|>assistant\\n\"\n\"\"\n"
	want := "[9707,1879]\n[151644,872,198,3838,374,220,17,10,17,30,151645,198,151644,77091,198]\n[]\n"
	var out string
	code := withStdin(t, in, func() int {
		var c int
		out, c = captureStdout(t, func() int { return cmdTokenize([]string{"--model", qwen3Dir}) })
		return c
	})
	if code != 0 || out != want {
		t.Fatalf("exit %d, output:\n%s\nwant:\n%s", code, out, want)
	}
	code = withStdin(t, out, func() int {
		var c int
		out, c = captureStdout(t, func() int { return cmdTokenize([]string{"--model", qwen3Dir, "--decode"}) })
		return c
	})
	if code != 0 || out != in {
		t.Fatalf("--decode: exit %d, output:\n%s\nwant:\n%s", code, out, in)
	}
}

func TestTokenizeErrors(t *testing.T) {
	for _, c := range []struct {
		args  []string
		input string
		code  int
		out   string
	}{
		{[]string{"--model", qwen3Dir}, "\"Hello world\"\nnot json\n", 1, "[9707,1879]\n"},
		{[]string{"--model", qwen3Dir}, "\"Hello world\"\n[1,2]\n", 1, "[9707,1879]\n"},
		{[]string{"--model", qwen3Dir, "--decode"}, "[9707,1879]\n[1, 999999999]\n", 1, "\"Hello world\"\n"},
		{[]string{"--model", qwen3Dir, "--decode"}, "\"text\"\n", 1, ""},
		{[]string{"--model", t.TempDir()}, "", 1, ""},
		{[]string{}, "", 2, ""},
		{[]string{"--model", qwen3Dir, "extra"}, "", 2, ""},
		{[]string{"--help"}, "", 0, ""},
	} {
		var out string
		code := withStdin(t, c.input, func() int {
			var code int
			out, code = captureStdout(t, func() int { return cmdTokenize(c.args) })
			return code
		})
		if code != c.code || out != c.out {
			t.Errorf("%v with %q: exit %d, output %q; want exit %d, output %q", c.args, c.input, code, out, c.code, c.out)
		}
	}
}

func TestTokenizeErrorNamesLine(t *testing.T) {
	toks := map[bool]string{false: "\"a\"\n\"b\"\n42\n", true: "[64]\n{}\n"}
	for decode, input := range toks {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		old := os.Stderr
		os.Stderr = w
		args := []string{"--model", qwen3Dir}
		if decode {
			args = append(args, "--decode")
		}
		withStdin(t, input, func() int {
			_, code := captureStdout(t, func() int { return cmdTokenize(args) })
			return code
		})
		os.Stderr = old
		w.Close()
		b := make([]byte, 4096)
		n, _ := r.Read(b)
		msg := string(b[:n])
		want := "stdin line 3"
		if decode {
			want = "stdin line 2"
		}
		if !strings.Contains(msg, want) {
			t.Errorf("decode=%v: stderr %q does not name %q", decode, msg, want)
		}
	}
}
