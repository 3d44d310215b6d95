package main

import (
	"path/filepath"
	"testing"

	"github.com/cde-rl/cde/backends/xla/hf"
	"github.com/cde-rl/cde/backends/xla/safetensors"
)

// The directory it writes is a Qwen3 model cde reads: config.json's sizes,
// every tensor, the tokenizer's vocabulary and <|im_end|> as EOS.
func TestWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	tok := filepath.Join("..", "..", "assets", "wordprob-qwen3")
	if err := write(tok, dir, 0, 32, 2, 4, 2, 8, 48, 256, true, true, 1); err != nil {
		t.Fatal(err)
	}
	c, err := hf.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Vocab != 648 || c.Hidden != 32 || c.Layers != 2 || c.HeadDim != 8 {
		t.Fatalf("config %+v", c)
	}
	s, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := len(s.Names()); n != 2+2*11 {
		t.Fatalf("%d tensors", n)
	}
	if info, ok := s.Info("model.embed_tokens.weight"); !ok || info.Shape[0] != 648 || info.Shape[1] != 32 {
		t.Fatalf("embedding %+v", info)
	}
	if err := write(tok, filepath.Join(t.TempDir(), "x"), 100, 32, 2, 4, 2, 8, 48, 256, true, false, 1); err == nil {
		t.Fatal("a vocabulary below the tokenizer's: no error")
	}
}
