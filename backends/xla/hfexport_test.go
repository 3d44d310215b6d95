package xla

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cde-rl/cde/backends/xla/safetensors"
)

// A model directory whose tokenizer is shipped as tokenizer.json.gz
// exports a plain tokenizer.json with the same bytes (transformers reads
// only that name); a corrupt .gz is an error naming it.
func TestExportHFGunzipsTokenizer(t *testing.T) {
	dir, c := writeTinyHF(t, "qwen3", safetensors.F32, 29)
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	b, err := New(Options{Engine: "cpu", Policy: HFModelConfig(c, 16), Seed: 1, PAD: 0, EOS: 2, HFWeights: set})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	tok := []byte(`{"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}`)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(tok)
	zw.Close()
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json.gz"), gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "tokenizer.json"))
	out := filepath.Join(t.TempDir(), "export")
	if err := b.ExportHF(dir, out, safetensors.F32); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(out, "tokenizer.json"))
	if err != nil || !bytes.Equal(got, tok) {
		t.Fatalf("exported tokenizer.json: %q, %v; want the gunzipped bytes", got, err)
	}
	if _, err := os.Stat(filepath.Join(out, "tokenizer.json.gz")); err == nil {
		t.Error("the export also holds tokenizer.json.gz")
	}
	os.WriteFile(filepath.Join(dir, "tokenizer.json.gz"), []byte("not gzip"), 0o644)
	err = b.ExportHF(dir, filepath.Join(t.TempDir(), "bad"), safetensors.F32)
	if err == nil || !strings.Contains(err.Error(), "tokenizer.json.gz") {
		t.Fatalf("a corrupt tokenizer.json.gz: %v", err)
	}
}
