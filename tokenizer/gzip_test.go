package tokenizer

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The committed Qwen3 tokenizer is tokenizer.json.gz alone (it keeps the
// tracked tree small): Load reads it, and gives exactly the tokenizer of
// the decompressed tokenizer.json.
func TestLoadGzipEqualsPlain(t *testing.T) {
	src := filepath.Join("testdata", "qwen3")
	if _, err := os.Stat(filepath.Join(src, "tokenizer.json.gz")); err != nil {
		t.Fatal(err)
	}
	plainDir := t.TempDir()
	f, err := os.Open(filepath.Join(src, "tokenizer.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f) // the standard library, not the code under test
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(plainDir, "tokenizer.json"), plain, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(src, "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(plainDir, "tokenizer_config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	gzDir := t.TempDir()
	packed, err := os.ReadFile(filepath.Join(src, "tokenizer.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(gzDir, "tokenizer.json.gz"), packed, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(gzDir, "tokenizer_config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}

	fromPlain, err := Load(plainDir)
	if err != nil {
		t.Fatal(err)
	}
	for name, dir := range map[string]string{"testdata": src, "gz only": gzDir} {
		fromGz, err := Load(dir)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(fromGz, fromPlain) {
			t.Errorf("%s: the tokenizer from tokenizer.json.gz differs from the one from tokenizer.json", name)
		}
		if fromGz.BOS() != fromPlain.BOS() || fromGz.EOS() != fromPlain.EOS() || fromGz.PAD() != fromPlain.PAD() {
			t.Errorf("%s: special ids differ", name)
		}
	}
	// LoadFile takes the .gz path itself, and the plain name with only the
	// .gz beside it.
	for _, p := range []string{filepath.Join(gzDir, "tokenizer.json.gz"), filepath.Join(gzDir, "tokenizer.json")} {
		tok, err := LoadFile(p)
		if err != nil {
			t.Fatalf("LoadFile(%s): %v", p, err)
		}
		if got := tok.Encode("Hello world"); !reflect.DeepEqual(got, []int32{9707, 1879}) {
			t.Errorf("LoadFile(%s): Encode = %v", p, got)
		}
	}
	// CopyFiles writes a model directory's plain tokenizer.json (the
	// standard library's gunzip above) and tokenizer_config.json.
	dst := t.TempDir()
	if err := CopyFiles(dst, gzDir); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]byte{"tokenizer.json": plain, "tokenizer_config.json": cfg} {
		if got, err := os.ReadFile(filepath.Join(dst, name)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("CopyFiles: %s differs from the source (%v)", name, err)
		}
	}
	if err := CopyFiles(t.TempDir(), t.TempDir()); err == nil || !strings.Contains(err.Error(), "tokenizer.json") {
		t.Errorf("CopyFiles from an empty directory: %v, want tokenizer.json named", err)
	}
}

func gzipBytes(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// The plain file wins over the .gz; neither present names tokenizer.json;
// a corrupt .gz names itself.
func TestLoadGzipCases(t *testing.T) {
	tiny, err := json.Marshal(tinyFile())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	plain := filepath.Join(dir, "tokenizer.json")
	gz := plain + ".gz"
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "open "+plain) {
		t.Errorf("no file: %v, want it to name %s", err, plain)
	}
	if err := os.WriteFile(gz, gzipBytes(t, tiny), 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Encode("ab<x>"); !reflect.DeepEqual(got, []int32{256, 257}) {
		t.Errorf("from .gz: Encode = %v", got)
	}
	// A plain file beside it wins: a different merge shows which was read.
	f := tinyFile()
	f["model"].(map[string]any)["merges"] = []any{}
	b, _ := json.Marshal(f)
	if err := os.WriteFile(plain, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if tok, err = Load(dir); err != nil {
		t.Fatal(err)
	}
	if got := tok.Encode("ab"); !reflect.DeepEqual(got, []int32{'a', 'b'}) {
		t.Errorf("plain beside .gz: Encode = %v, want the plain file's (no merge)", got)
	}
	os.Remove(plain)
	if err := os.WriteFile(gz, []byte("not gzip"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), gz) {
		t.Errorf("corrupt .gz: %v, want it to name %s", err, gz)
	}
	// Truncated: the gzip header reads, the stream ends early.
	whole := gzipBytes(t, tiny)
	if err := os.WriteFile(gz, whole[:len(whole)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), gz) {
		t.Errorf("truncated .gz: %v, want it to name %s", err, gz)
	}
}
