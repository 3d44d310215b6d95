package main

import (
	"bytes"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cde-rl/cde/backends/xla"
	"github.com/cde-rl/cde/backends/xla/hftest"
	"github.com/cde-rl/cde/tokenizer"
)

// tinyQwen3Dir writes a random one-layer Qwen3 checkpoint with the real
// Qwen3 tokenizer files.
func tinyQwen3Dir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := hftest.WriteTinyQwen3(dir, qwen3Dir, 1, 2); err != nil {
		t.Fatal(err)
	}
	return dir
}

// cde-run score tokenizes prompt and response separately and gives
// log p(response_ids[j] | prompt_ids ++ response_ids[:j]).
func TestScore(t *testing.T) {
	dir := tinyQwen3Dir(t)
	in := `{"prompt": "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n", "response": "It is \\boxed{4}.<|im_end|>"}
{"prompt": "Hi", "response": ""}
`
	var out bytes.Buffer
	if err := runScore(dir, "", "cpu", "", strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := xla.LoadHF(dir, "cpu", "")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	dec := json.NewDecoder(&out)
	for i, pr := range [][2]string{
		{"<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n", "It is \\boxed{4}.<|im_end|>"},
		{"Hi", ""},
	} {
		var r xla.HFScore
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		p, resp := tok.Encode(pr[0]), tok.Encode(pr[1])
		if !equalIDs(r.PromptIDs, p) || !equalIDs(r.ResponseIDs, resp) || len(r.LogProbs) != len(resp) {
			t.Fatalf("line %d: %+v", i+1, r)
		}
		if i == 0 && (p[0] != 151644 || resp[len(resp)-1] != 151645) {
			t.Fatalf("special tokens not mapped: %v %v", p, resp)
		}
		// Score each response token alone, as the last token of its prefix.
		for j := range resp {
			seq := append(append([]int32{}, p...), resp[:j+1]...)
			one, err := m.LogProbs(seq, len(seq)-1)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(float64(one[0]-r.LogProbs[j])) > 1e-5 || r.LogProbs[j] >= 0 {
				t.Fatalf("line %d token %d: %v, alone %v", i+1, j, r.LogProbs[j], one[0])
			}
		}
	}
	for _, c := range []struct{ in, want string }{
		{`{"prompt": "", "response": "x"}`, "stdin line 1: the prompt gives no tokens"},
		{`{"prompt": "x"}`, `stdin line 1: missing string field`},
		{`[1]`, "stdin line 1: want a JSON object"},
	} {
		if err := runScore(dir, "", "cpu", "", strings.NewReader(c.in+"\n"), &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.in, err, c.want)
		}
	}
	if code := cmdScore([]string{"--model", filepath.Join(dir, "nope")}); code != 1 {
		t.Errorf("missing model: exit %d", code)
	}
}

func equalIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// cde-run generate samples n completions per prompt, each ending at EOS or
// the token limit, deterministic under its seed.
func TestGenerate(t *testing.T) {
	dir := tinyQwen3Dir(t)
	in := "\"<|im_start|>user\\nHi<|im_end|>\\n<|im_start|>assistant\\n\"\n\"2+2=\"\n"
	var out1, out2 string
	for _, out := range []*string{&out1, &out2} {
		code := withStdin(t, in, func() int {
			var c int
			*out, c = captureStdout(t, func() int {
				return cmdGenerate([]string{"--model", dir, "--n", "3", "--max-tokens", "5", "--engine", "cpu", "--seed", "4"})
			})
			return c
		})
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
	}
	if out1 != out2 {
		t.Fatal("not deterministic under --seed")
	}
	lines := strings.Split(strings.TrimSpace(out1), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines: %s", len(lines), out1)
	}
	var r struct {
		Prompt      string
		Completions []struct {
			Text      string
			Tokens    int
			Truncated bool
		}
	}
	if err := json.Unmarshal([]byte(lines[1]), &r); err != nil || r.Prompt != "2+2=" || len(r.Completions) != 3 {
		t.Fatalf("%v: %s", err, lines[1])
	}
	for _, c := range r.Completions {
		if c.Tokens < 1 || c.Tokens > 5 || (c.Truncated && c.Tokens != 5) {
			t.Fatalf("completion %+v", c)
		}
	}
	if code := withStdin(t, "3\n", func() int { return cmdGenerate([]string{"--model", dir}) }); code != 1 {
		t.Fatalf("non-string prompt: exit %d", code)
	}
	// --logprobs adds the sampled ids and their log-probs, one per token.
	out, code := captureStdout(t, func() int {
		return withStdin(t, "\"2+2=\"\n", func() int {
			return cmdGenerate([]string{"--model", dir, "--max-tokens", "4", "--engine", "cpu", "--logprobs"})
		})
	})
	var lp struct {
		Completions []struct {
			Tokens   int
			TokenIDs []int32   `json:"token_ids"`
			LogProbs []float64 `json:"logprobs"`
		}
	}
	if err := json.Unmarshal([]byte(out), &lp); code != 0 || err != nil || len(lp.Completions) != 1 {
		t.Fatalf("--logprobs: exit %d, %v: %s", code, err, out)
	}
	if c := lp.Completions[0]; len(c.TokenIDs) != c.Tokens || len(c.LogProbs) != c.Tokens || c.LogProbs[0] > 0 {
		t.Fatalf("--logprobs: %s", out)
	}
	// --model and --run are one or the other; --step goes with --run.
	for _, args := range [][]string{{"--model", dir, "--run", dir}, {"--model", dir, "--step", "2"}, {}} {
		if code := withStdin(t, "\"x\"\n", func() int { return cmdGenerate(args) }); code != 1 {
			t.Errorf("generate %v: exit %d", args, code)
		}
		if code := withStdin(t, "", func() int { return cmdScore(args) }); code != 1 {
			t.Errorf("score %v: exit %d", args, code)
		}
	}
}
