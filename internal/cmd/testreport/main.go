// Command testreport reads `go test -json` on stdin and prints what a
// plain `go test` prints (each package's result line, and the whole output
// of every failed test), then every skipped test with its reason. It exits
// 1 when a test failed, or when a test skipped that the allow-list (the
// file named by -allow, lines "PACKAGE TEST  # why") does not name: in CI a
// test that must run may not skip unseen.
//
//	go test -json ./... | go run ./internal/cmd/testreport -allow .ci/skips-allowed
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

type key struct{ pkg, test string }

type skip struct {
	key
	reason string
}

func main() {
	allowFile := flag.String("allow", "", "allow-list of tests that may skip: lines \"PACKAGE TEST\", # comments")
	flag.Parse()
	allowed := map[key]bool{}
	if *allowFile != "" {
		var err error
		if allowed, err = readAllow(*allowFile); err != nil {
			fmt.Fprintln(os.Stderr, "testreport:", err)
			os.Exit(2)
		}
	}
	skips, failed, err := report(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
	if code := summarize(os.Stdout, skips, allowed, failed); code != 0 {
		os.Exit(code)
	}
}

// report copies package result lines and failed tests' output to w and
// returns the skipped tests, and whether anything failed.
func report(r io.Reader, w io.Writer) (skips []skip, failed bool, err error) {
	out := map[key][]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if json.Unmarshal(line, &e) != nil || e.Action == "" {
			fmt.Fprintf(w, "%s\n", line) // build errors and the like arrive as plain text
			continue
		}
		k := key{e.Package, e.Test}
		switch e.Action {
		case "output":
			if e.Test == "" {
				fmt.Fprint(w, e.Output) // "ok pkg 1.2s", "FAIL", build output
			} else {
				out[k] = append(out[k], e.Output)
			}
		case "fail":
			failed = true
			if e.Test != "" {
				fmt.Fprint(w, strings.Join(out[k], ""))
			}
			delete(out, k)
		case "skip":
			if e.Test != "" {
				skips = append(skips, skip{k, skipReason(out[k])})
			}
			delete(out, k)
		case "pass":
			delete(out, k)
		}
	}
	sort.Slice(skips, func(i, j int) bool {
		if skips[i].pkg != skips[j].pkg {
			return skips[i].pkg < skips[j].pkg
		}
		return skips[i].test < skips[j].test
	})
	return skips, failed, sc.Err()
}

// skipReason is the t.Skip message among a test's output lines: the lines
// after "=== RUN" that are not the "--- SKIP" line itself.
func skipReason(lines []string) string {
	var msg []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		msg = append(msg, t)
	}
	if len(msg) == 0 {
		return "(no reason given)"
	}
	return strings.Join(msg, " / ")
}

// summarize lists the skips and returns the exit code.
func summarize(w io.Writer, skips []skip, allowed map[key]bool, failed bool) int {
	fmt.Fprintf(w, "\nskipped tests: %d\n", len(skips))
	bad := 0
	for _, s := range skips {
		mark := ""
		// A subtest is allowed when its parent is.
		if !allowed[s.key] && !allowed[key{s.pkg, strings.SplitN(s.test, "/", 2)[0]}] {
			mark = "  NOT ALLOWED TO SKIP"
			bad++
		}
		fmt.Fprintf(w, "  %s %s: %s%s\n", s.pkg, s.test, s.reason, mark)
	}
	switch {
	case failed:
		return 1
	case bad > 0:
		fmt.Fprintf(w, "%d test(s) skipped that must run here (allow-list: lines \"PACKAGE TEST\")\n", bad)
		return 1
	}
	return 0
}

func readAllow(path string) (map[key]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m := map[key]bool{}
	for i, l := range strings.Split(string(b), "\n") {
		l, _, _ = strings.Cut(l, "#")
		f := strings.Fields(l)
		switch len(f) {
		case 0:
		case 2:
			m[key{f[0], f[1]}] = true
		default:
			return nil, fmt.Errorf("%s:%d: want \"PACKAGE TEST\", got %q", path, i+1, strings.TrimSpace(l))
		}
	}
	return m, nil
}
