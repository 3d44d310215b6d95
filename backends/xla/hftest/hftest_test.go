package hftest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cde-rl/cde/tokenizer"
)

// The repository's Qwen3 tokenizer is committed as tokenizer.json.gz; the
// model directory gets a plain tokenizer.json (what Hugging Face loaders
// read), which cde's tokenizer loads.
func TestWriteTinyQwen3Tokenizer(t *testing.T) {
	src := filepath.Join("..", "..", "..", "tokenizer", "testdata", "qwen3")
	dir := t.TempDir()
	if err := WriteTinyQwen3(dir, src, 1, 1); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json.gz")); err == nil {
		t.Error("the model directory got tokenizer.json.gz; want a plain tokenizer.json only")
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Encode("Hello world"); len(got) != 2 || got[0] != 9707 || got[1] != 1879 {
		t.Errorf("Encode = %v, want [9707 1879]", got)
	}
	if id, _ := tok.TokenToID("<|im_end|>"); tok.EOS() != id {
		t.Errorf("EOS %d, want <|im_end|> %d", tok.EOS(), id)
	}
	if err := WriteTinyQwen3(t.TempDir(), t.TempDir(), 1, 1); err == nil {
		t.Error("a tokenizer directory without tokenizer.json(.gz) gave no error")
	}
}
