package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A `go test -json` stream written by hand: one package passes with a
// skipped test and a skipped subtest, one test fails.
const stream = `{"Action":"start","Package":"a"}
{"Action":"run","Package":"a","Test":"TestOK"}
{"Action":"output","Package":"a","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"output","Package":"a","Test":"TestOK","Output":"    a_test.go:5: chatter\n"}
{"Action":"pass","Package":"a","Test":"TestOK"}
{"Action":"run","Package":"a","Test":"TestPlugin"}
{"Action":"output","Package":"a","Test":"TestPlugin","Output":"=== RUN   TestPlugin\n"}
{"Action":"output","Package":"a","Test":"TestPlugin","Output":"    a_test.go:9: CDE_TEST_PJRT_PLUGIN is not set\n"}
{"Action":"output","Package":"a","Test":"TestPlugin","Output":"--- SKIP: TestPlugin (0.00s)\n"}
{"Action":"skip","Package":"a","Test":"TestPlugin"}
{"Action":"output","Package":"a","Test":"TestTable/case","Output":"    a_test.go:12: protoc not installed\n"}
{"Action":"skip","Package":"a","Test":"TestTable/case"}
{"Action":"output","Package":"a","Output":"ok  \ta\t0.1s\n"}
{"Action":"pass","Package":"a"}
{"Action":"output","Package":"b","Test":"TestBad","Output":"    b_test.go:3: want 2, got 3\n"}
{"Action":"fail","Package":"b","Test":"TestBad"}
{"Action":"output","Package":"b","Output":"FAIL\tb\t0.2s\n"}
{"Action":"fail","Package":"b"}
`

func TestReport(t *testing.T) {
	var w bytes.Buffer
	skips, failed, err := report(strings.NewReader(stream), &w)
	if err != nil {
		t.Fatal(err)
	}
	if !failed {
		t.Error("the failed test was not seen")
	}
	out := w.String()
	for _, want := range []string{"ok  \ta\t0.1s", "b_test.go:3: want 2, got 3", "FAIL\tb\t0.2s"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "chatter") {
		t.Errorf("a passing test's output was printed:\n%s", out)
	}
	want := []skip{{key{"a", "TestPlugin"}, "a_test.go:9: CDE_TEST_PJRT_PLUGIN is not set"}, {key{"a", "TestTable/case"}, "a_test.go:12: protoc not installed"}}
	if len(skips) != len(want) {
		t.Fatalf("skips %v, want %v", skips, want)
	}
	for i := range want {
		if skips[i] != want[i] {
			t.Errorf("skip %d: %+v, want %+v", i, skips[i], want[i])
		}
	}
}

func TestSummarize(t *testing.T) {
	skips := []skip{{key{"a", "TestPlugin"}, "no plugin"}, {key{"a", "TestTable/case"}, "no protoc"}}
	for _, tc := range []struct {
		name    string
		allowed map[key]bool
		failed  bool
		code    int
		marks   int
	}{
		{"all allowed (the subtest through its parent)", map[key]bool{{"a", "TestPlugin"}: true, {"a", "TestTable"}: true}, false, 0, 0},
		{"one not allowed", map[key]bool{{"a", "TestPlugin"}: true}, false, 1, 1},
		{"none allowed", nil, false, 1, 2},
		{"a failure fails even when every skip is allowed", map[key]bool{{"a", "TestPlugin"}: true, {"a", "TestTable"}: true}, true, 1, 0},
	} {
		var w bytes.Buffer
		if code := summarize(&w, skips, tc.allowed, tc.failed); code != tc.code {
			t.Errorf("%s: exit %d, want %d", tc.name, code, tc.code)
		}
		if n := strings.Count(w.String(), "NOT ALLOWED"); n != tc.marks {
			t.Errorf("%s: %d marked, want %d:\n%s", tc.name, n, tc.marks, w.String())
		}
		if !strings.Contains(w.String(), "a TestPlugin: no plugin") {
			t.Errorf("%s: the skip and its reason are not listed:\n%s", tc.name, w.String())
		}
	}
}

func TestReadAllow(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	os.WriteFile(good, []byte("# comment\ngithub.com/x/a TestPlugin  # needs a GPU\n\n"), 0o644)
	m, err := readAllow(good)
	if err != nil || len(m) != 1 || !m[key{"github.com/x/a", "TestPlugin"}] {
		t.Errorf("readAllow: %v, %v", m, err)
	}
	bad := filepath.Join(dir, "bad")
	os.WriteFile(bad, []byte("ok pkg Test\n"), 0o644)
	if _, err := readAllow(bad); err == nil || !strings.Contains(err.Error(), "bad:1") {
		t.Errorf("a malformed line: %v, want an error naming the file and line", err)
	}
}
