package main

import (
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
)

// readTokenizerJSON reads dir/tokenizer.json, or dir/tokenizer.json.gz
// gunzipped when the plain file is absent.
func readTokenizerJSON(dir string) ([]byte, error) {
	plain := filepath.Join(dir, "tokenizer.json")
	b, err := os.ReadFile(plain)
	if !errors.Is(err, os.ErrNotExist) {
		return b, err
	}
	f, gzErr := os.Open(plain + ".gz")
	if gzErr != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}
