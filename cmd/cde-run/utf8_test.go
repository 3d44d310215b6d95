package main

import (
	"bytes"
	"strings"
	"testing"
)

// A JSONL line with invalid UTF-8 inside a string is an error naming the
// line, not a U+FFFD in its place.
func TestServeLinesInvalidUTF8(t *testing.T) {
	in := "\"ok\"\n\"bad \xff byte\"\n\"never read\"\n"
	var out bytes.Buffer
	calls := 0
	err := serveLines(strings.NewReader(in), &out, func(line []byte) (any, error) {
		calls++
		return string(bytes.TrimSpace(line)), nil
	})
	if err == nil || !strings.Contains(err.Error(), "stdin line 2: invalid UTF-8 at byte 6") {
		t.Errorf("serveLines: %v, want an error naming line 2 and byte 6", err)
	}
	if calls != 1 || !strings.Contains(out.String(), "ok") {
		t.Errorf("answered %d lines (%q), want the first one only", calls, out.String())
	}
}
