package main

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/tasks"
	"github.com/cde-rl/cde/tokenizer"
)

var (
	fullDir    = filepath.Join("..", "..", "testdata", "qwen3")
	reducedDir = filepath.Join("..", "..", "..", DefaultOut)
)

func load(t *testing.T) (full, reduced *tokenizer.Tokenizer) {
	t.Helper()
	full, err := tokenizer.Load(fullDir)
	if err != nil {
		t.Fatal(err)
	}
	reduced, err = tokenizer.Load(reducedDir)
	if err != nil {
		t.Fatal(err)
	}
	return full, reduced
}

func tokenStrings(t *testing.T, tok *tokenizer.Tokenizer, text string) []string {
	t.Helper()
	ids := tok.Encode(text)
	out := make([]string, len(ids))
	for i, id := range ids {
		s, ok := tok.IDToToken(id)
		if !ok {
			t.Fatalf("id %d of %q has no token", id, text)
		}
		out[i] = s
	}
	return out
}

// On 2,000 wordprob problems drawn with another seed than the corpus'
// (prompts under Qwen3's template, solutions, whole conversations), the
// reduced tokenizer gives exactly the full tokenizer's token strings.
func TestSameTokensAsFull(t *testing.T) {
	full, reduced := load(t)
	// 84 of each (type, level): 2,016 problems.
	probs, err := WordProbProblems(map[string]any{"tokenizer": fullDir}, 84, 0x7e57)
	if err != nil {
		t.Fatal(err)
	}
	if len(probs) < 2000 {
		t.Fatalf("%d problems", len(probs))
	}
	texts := 0
	for _, p := range probs {
		if !strings.HasPrefix(p.Prompt, "<|im_start|>user\n") || !strings.HasSuffix(p.Prompt, "<think>\n\n</think>\n\n") {
			t.Fatalf("not Qwen3's template: %q", p.Prompt)
		}
		for _, text := range []string{p.Prompt, p.Solution, p.Prompt + p.Solution + "<|im_end|>\n"} {
			texts++
			want := tokenStrings(t, full, text)
			got := tokenStrings(t, reduced, text)
			if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
				t.Fatalf("%q:\nreduced %q\nfull    %q", text, got, want)
			}
			if reduced.Decode(reduced.Encode(text)) != text {
				t.Fatalf("round trip of %q", text)
			}
		}
	}
	t.Logf("%d problems, %d texts: the same tokens", len(probs), texts)
}

// Any text encodes (the 256 byte symbols are kept) and decodes back, as
// with the full tokenizer, whose bytes per token it matches.
func TestRoundTripAnyText(t *testing.T) {
	full, reduced := load(t)
	rng := rand.New(rand.NewPCG(5, 5))
	pieces := []string{"Hello, world! ", "über ", "日本語のテキスト", "🙂🚀", "\t\r\n", "  ", "x=3*4;", "\\boxed{12}", "<|im_end|>",
		"<think>", "Ned buys", "naïve café ", "Ω≈ç√∫", "\u00a0", "'s 'll ", "12345678901234567890", "ΑΒΓ αβγ", "עברית", "😀😃😄"}
	for i := range 3000 {
		var b strings.Builder
		for range 1 + rng.IntN(8) {
			switch rng.IntN(3) {
			case 0:
				b.WriteString(pieces[rng.IntN(len(pieces))])
			case 1: // a random rune
				r := rune(rng.IntN(0x30000))
				if utf8.ValidRune(r) {
					b.WriteRune(r)
				}
			default: // random printable ASCII
				for range rng.IntN(12) {
					b.WriteByte(byte(32 + rng.IntN(95)))
				}
			}
		}
		text := b.String()
		fullIDs := full.Encode(text)
		if full.Decode(fullIDs) != text {
			continue // not in normal form (NFC): neither tokenizer gives it back
		}
		ids := reduced.Encode(text)
		if got := reduced.Decode(ids); got != text {
			t.Fatalf("text %d: %q decodes to %q", i, text, got)
		}
		if !bytes.Equal(reduced.DecodeBytes(ids), full.DecodeBytes(fullIDs)) {
			t.Fatalf("text %d: bytes differ", i)
		}
		for _, id := range ids {
			if int(id) >= reduced.VocabSize() {
				t.Fatalf("id %d over the vocabulary", id)
			}
		}
	}
	if reduced.Decode(reduced.Encode("\xff\xfe")) != "\uFFFD\uFFFD" {
		t.Error("invalid UTF-8 does not decode as U+FFFD")
	}
}

// The files: the special tokens and chat template as the full tokenizer's,
// the wordprob task builds on the directory with Qwen3's template, and the
// committed files are what the command writes.
func TestCommittedFiles(t *testing.T) {
	full, reduced := load(t)
	for _, s := range []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>"} {
		id, ok := reduced.TokenToID(s)
		if !ok || len(reduced.Encode(s)) != 1 || reduced.Encode(s)[0] != id {
			t.Errorf("%s is not one token", s)
		}
	}
	if reduced.VocabSize() != 648 {
		t.Errorf("vocabulary %d, want 648 (update the docs if the task's text changed)", reduced.VocabSize())
	}
	if eos, _ := reduced.TokenToID("<|im_end|>"); reduced.EOS() != eos || reduced.BOS() != -1 {
		t.Errorf("eos %d bos %d", reduced.EOS(), reduced.BOS())
	}
	if pad, _ := reduced.TokenToID("<|endoftext|>"); reduced.PAD() != pad {
		t.Errorf("pad %d", reduced.PAD())
	}
	for b := range 256 {
		s, _ := full.IDToToken(int32(b))
		if r, _ := reduced.IDToToken(int32(b)); r != s {
			t.Fatalf("byte id %d: %q, full %q", b, r, s)
		}
	}
	task, err := tasks.New(core.NewParams("task", map[string]any{"name": "wordprob", "tokenizer": reducedDir}))
	if err != nil {
		t.Fatal(err)
	}
	if tpl := task.(interface{ ChatTemplate() tasks.ChatTemplate }).ChatTemplate(); tpl.Name != tasks.ChatQwen3 || tpl.EnableThinking {
		t.Errorf("template %+v", tpl)
	}
	// The model directory's config.json fits the tokenizer: one embedding
	// row per id, <|im_end|> the EOS.
	var cfg struct {
		Vocab int   `json:"vocab_size"`
		EOS   int32 `json:"eos_token_id"`
		Arch  []string
	}
	b, err := os.ReadFile(filepath.Join(reducedDir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil || cfg.Vocab != reduced.VocabSize() || cfg.EOS != reduced.EOS() {
		t.Errorf("config.json: vocab_size %d, eos %d (%v); the tokenizer has %d ids, eos %d", cfg.Vocab, cfg.EOS, err, reduced.VocabSize(), reduced.EOS())
	}
	if testing.Short() {
		t.Skip("regenerating the files takes a while")
	}
	texts, err := WordProbCorpus(fullDir, DefaultPerLevel, DefaultSeed)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Shrink(fullDir, texts)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]byte{"tokenizer.json": res.TokenizerJSON, "tokenizer_config.json": res.ConfigJSON} {
		got, err := os.ReadFile(filepath.Join(reducedDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what the command writes: run go run ./tokenizer/cmd/shrink", name)
		}
	}
	t.Logf("%d texts: %d tokens, %d merges", len(texts), res.Vocab, res.Merges)
}

// BPE run on a token alone reaches it; a string the merges cannot make
// whole is an error.
func TestBPESteps(t *testing.T) {
	rank := map[[2]string]int{{"a", "b"}: 0, {"ab", "c"}: 1, {"b", "c"}: 2}
	got, err := bpeSteps("abc", rank)
	if err != nil || strings.Join(got, ",") != "ab,abc" {
		t.Errorf("abc: %v %v", got, err)
	}
	if _, err := bpeSteps("ca", rank); err == nil {
		t.Error("ca: no error")
	}
}

// Tokens per prompt and solution by level, full against reduced (the same
// by TestSameTokensAsFull), for the docs (go test -v -run Lengths).
func TestWordProbTokenLengths(t *testing.T) {
	_, reduced := load(t)
	probs, err := WordProbProblems(map[string]any{"tokenizer": reducedDir}, 200, 9)
	if err != nil {
		t.Fatal(err)
	}
	type acc struct{ n, p, s, pmax, smax int }
	by := map[int]*acc{}
	for _, p := range probs {
		a := by[p.Level]
		if a == nil {
			a = &acc{}
			by[p.Level] = a
		}
		np, ns := len(reduced.Encode(p.Prompt)), len(reduced.Encode(p.Solution))+1 // + <|im_end|>
		a.n++
		a.p += np
		a.s += ns
		a.pmax = max(a.pmax, np)
		a.smax = max(a.smax, ns)
	}
	for level := 1; level <= 4; level++ {
		a := by[level]
		t.Logf("L%d: prompt %.1f tokens (max %d), solution + EOS %.1f (max %d)", level, float64(a.p)/float64(a.n), a.pmax, float64(a.s)/float64(a.n), a.smax)
	}
	task, err := tasks.New(core.NewParams("task", map[string]any{"name": "wordprob", "tokenizer": reducedDir}))
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range task.EvalSets() {
		pmax, smax := 0, 0
		for _, p := range set.Problems {
			pmax = max(pmax, len(reduced.Encode(p.Prompt)))
			smax = max(smax, len(reduced.Encode(p.Solution))+1)
		}
		t.Logf("%s: prompt at most %d tokens, story-order solution + EOS at most %d", set.Name, pmax, smax)
	}
}

// The reduced tokenizer.json is a valid Hugging Face tokenizer: the
// reference implementation (@huggingface/tokenizers, installed by `npm ci`
// in tokenizer/testdata/gen, which .ci/run does) loads it and gives the Go
// tokenizer's ids and decodings on a wordprob corpus drawn with another
// seed than the shrink's, and on texts outside the task (bytes the
// reduced vocabulary has no merges for). Skipped without the npm packages,
// except under CI, where that is a failure.
func TestHFLoadsReduced(t *testing.T) {
	gen := filepath.Join("..", "..", "testdata", "gen")
	if _, err := os.Stat(filepath.Join(gen, "node_modules", "@huggingface", "tokenizers", "package.json")); err != nil {
		msg := "@huggingface/tokenizers is not installed: run `npm ci` in tokenizer/testdata/gen (" + err.Error() + ")"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	_, reduced := load(t)
	texts, err := WordProbCorpus(fullDir, 5, 0x4f0e)
	if err != nil {
		t.Fatal(err)
	}
	texts = append(texts, "naïve café, 😀 and 你好", "\t\ttabs\r\nand CRLF", "x² + ½ = ?", "<think>\n\n</think>\n\n", "<|endoftext|>Hello<|im_start|>", "Ω≈ç√∫", "UPPER lower 0123456789 !@#$%^&*()")
	data, err := json.Marshal(texts)
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(t.TempDir(), "texts.json")
	if err := os.WriteFile(in, data, 0o644); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(reducedDir)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", "encode.mjs", abs, in)
	cmd.Dir = gen
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node encode.mjs: %v\n%s", err, stderr.String())
	}
	var ref struct {
		Reference string
		Cases     []struct {
			IDs     []int32
			Decoded string
		}
	}
	if err := json.Unmarshal(out, &ref); err != nil || len(ref.Cases) != len(texts) {
		t.Fatalf("encode.mjs output: %d cases for %d texts, %v", len(ref.Cases), len(texts), err)
	}
	bad := 0
	for i, text := range texts {
		ids := reduced.Encode(text)
		dec := reduced.Decode(ids)
		if !slices.Equal(ids, ref.Cases[i].IDs) || dec != ref.Cases[i].Decoded {
			if bad++; bad <= 5 {
				t.Errorf("%q: Go ids %v decoded %q; %s ids %v decoded %q", text, ids, dec, ref.Reference, ref.Cases[i].IDs, ref.Cases[i].Decoded)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d texts differ from %s", bad, len(texts), ref.Reference)
	}
	t.Logf("%d texts agree with %s", len(texts), ref.Reference)
}
