package cli

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// --engine and --pjrt-plugin on the config-driven commands are --set
// backend.engine and backend.pjrt_plugin, and a --set of those keys wins.
func TestEngineFlag(t *testing.T) {
	for _, tc := range []struct {
		cf           ConfigFlags
		want, plugin string
	}{
		{ConfigFlags{Engine: "go"}, "go", ""},
		{ConfigFlags{Engine: "xla:cuda", Plugin: "/p.so"}, "xla:cuda", "/p.so"},
		{ConfigFlags{Engine: "go", Sets: StringList{"backend.engine=cpu"}}, "cpu", ""},
		{ConfigFlags{}, "auto", ""},
	} {
		cfg, err := tc.cf.Load()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Backend.Engine != tc.want || cfg.Backend.PJRTPlugin != tc.plugin {
			t.Errorf("%+v: engine %q plugin %q, want %q %q", tc.cf, cfg.Backend.Engine, cfg.Backend.PJRTPlugin, tc.want, tc.plugin)
		}
	}
	if (&ConfigFlags{Engine: "go"}).Given() != true {
		t.Error("--engine does not count as changing the config (train --resume must refuse it)")
	}
}

// --log-level is taken out of any command's arguments (both spellings);
// a bad value is an error naming the flag.
func TestTakeLogLevel(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want []string
		lvl  string
	}{
		{[]string{"--set", "a=1"}, []string{"--set", "a=1"}, "info"},
		{[]string{"--log-level", "debug", "--set", "a=1"}, []string{"--set", "a=1"}, "debug"},
		{[]string{"--set", "a=1", "-log-level=warn"}, []string{"--set", "a=1"}, "warn"},
	} {
		got, lvl, err := TakeLogLevel(tc.in)
		if err != nil || strings.Join(got, " ") != strings.Join(tc.want, " ") || lvl.String() != tc.lvl {
			t.Errorf("%v: %v %v %v, want %v %s", tc.in, got, lvl, err, tc.want, tc.lvl)
		}
	}
	for _, bad := range [][]string{{"--log-level"}, {"--log-level", "loud"}} {
		if _, _, err := TakeLogLevel(bad); err == nil || !strings.Contains(err.Error(), "--log-level") {
			t.Errorf("%v: %v", bad, err)
		}
	}
}

// A JSONL line with invalid UTF-8 inside a string is an error naming the
// line, not a U+FFFD in its place.
func TestServeLinesInvalidUTF8(t *testing.T) {
	in := "\"ok\"\n\"bad \xff byte\"\n\"never read\"\n"
	var out bytes.Buffer
	calls := 0
	err := ServeLines(strings.NewReader(in), &out, func(line []byte) (any, error) {
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

// endlessZeros is /dev/zero as a reader: one line that never ends.
type endlessZeros struct{}

func (endlessZeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// endlessText is a JSON string's content that never ends.
type endlessText struct{}

func (endlessText) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// A line that never ends is an error naming it once MaxLineBytes are
// read, not a buffer that grows until the process is killed.
func TestServeLinesLimit(t *testing.T) {
	err := ServeLines(endlessZeros{}, io.Discard, func(line []byte) (any, error) { return nil, nil })
	if err == nil || !strings.Contains(err.Error(), "stdin line 1: longer than 64 MiB: refused") {
		t.Fatalf("ServeLines on an endless line: %v", err)
	}
	if _, err := ReadJSONStrings(endlessZeros{}); err == nil {
		t.Fatal("ReadJSONStrings on an endless input: no error")
	}
	if _, err := ReadJSONStrings(io.MultiReader(strings.NewReader(`"`), endlessText{})); err == nil || !strings.Contains(err.Error(), "stdin: larger than 64 MiB") {
		t.Fatalf("ReadJSONStrings on an endless string: %v", err)
	}
}
