package tokenizer

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// gsm8kTexts returns the questions and answers of the GSM8K subset.
func gsm8kTexts(tb testing.TB) ([]string, int) {
	tb.Helper()
	f, err := os.Open(filepath.Join("testdata", "gsm8k", "test_head200.jsonl"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var texts []string
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r struct{ Question, Answer string }
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			tb.Fatal(err)
		}
		texts = append(texts, r.Question, r.Answer)
		n += len(r.Question) + len(r.Answer)
	}
	return texts, n
}

func benchEncode(b *testing.B, name string, cold bool) {
	tok := testTokenizers(b)[name]
	texts, n := gsm8kTexts(b)
	b.SetBytes(int64(n))
	b.ResetTimer()
	for b.Loop() {
		if cold {
			tok.model.mu.Lock()
			clear(tok.model.cache)
			tok.model.mu.Unlock()
		}
		for _, s := range texts {
			tok.Encode(s)
		}
	}
}

// BenchmarkEncodeGSM8K encodes 400 GSM8K questions and answers (112 kB) per
// iteration, on one goroutine, with the word cache warm (as in training) or
// emptied before each iteration.
func BenchmarkEncodeGSM8K(b *testing.B) {
	for _, name := range []string{"qwen3", "llama3", "llama2"} {
		b.Run(name+"/warm", func(b *testing.B) { benchEncode(b, name, false) })
		b.Run(name+"/cold", func(b *testing.B) { benchEncode(b, name, true) })
	}
}

func BenchmarkDecodeGSM8K(b *testing.B) {
	tok := testTokenizers(b)["qwen3"]
	texts, n := gsm8kTexts(b)
	ids := make([][]int32, len(texts))
	for i, s := range texts {
		ids[i] = tok.Encode(s)
	}
	b.SetBytes(int64(n))
	b.ResetTimer()
	for b.Loop() {
		for _, x := range ids {
			tok.Decode(x)
		}
	}
}
