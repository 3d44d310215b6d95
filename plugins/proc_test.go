package plugins_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/internal/proctest"
	"github.com/cde-rl/cde/internal/testwait"
	"github.com/cde-rl/cde/plugins"
)

// writeScript writes an executable shell script into dir and returns its
// path.
func writeScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// readPid waits for a pid file the script writes and returns the pid.
func readPid(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(testwait.Scale(5 * time.Second))
	for {
		b, err := os.ReadFile(path)
		if err == nil && strings.HasSuffix(string(b), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not written", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// killLater kills pid at the end of the test, so a failing test leaves
// nothing behind (and a host stuck on a pipe the process holds comes
// back).
func killLater(t *testing.T, pid int) {
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
}

// openWithin runs plugins.Open and fails the test when it does not come
// back within limit (before the fix, it never came back: go-plugin's
// cleanup waited for EOF on a pipe a grandchild kept open). It returns
// Open's error and how long Open took.
func openWithin(t *testing.T, cfg plugins.Config, limit time.Duration, cleanup func()) (core.Strategy, error, time.Duration) {
	t.Helper()
	type result struct {
		s   core.Strategy
		err error
	}
	start := time.Now()
	ch := make(chan result, 1)
	go func() {
		s, err := plugins.Open(cfg)
		ch <- result{s, err}
	}()
	select {
	case r := <-ch:
		return r.s, r.err, time.Since(start)
	case <-time.After(limit):
		cleanup() // let the stuck Open return before the test binary exits
		<-ch
		t.Fatalf("plugins.Open did not return within %s", limit)
		return nil, nil, 0
	}
}

// TestStartCleanupGrandchildHoldsPipe: a plugin that is a shell script
// starting a child that keeps the stdout/stderr pipes open, and printing
// text that is not a handshake (or nothing at all), makes Open fail
// promptly with a clear error, and no process of the plugin's group
// survives.
func TestStartCleanupGrandchildHoldsPipe(t *testing.T) {
	for _, tc := range []struct {
		name  string
		print string
		want  []string
	}{
		{"garbage", `echo "hello from a wrapper"`,
			[]string{`printed "hello from a wrapper" on stdout before the handshake`, "print to stderr or use sdk.Logger()"}},
		{"silent", `echo "to stderr only" >&2`,
			[]string{"did not complete the handshake within 500ms (start_timeout)", "to stderr only"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			script := writeScript(t, dir, "plugin", fmt.Sprintf(`sleep 1000 &
echo $! > %[1]s/child.pid
echo $$ > %[1]s/main.pid
%[2]s
exec sleep 1000
`, dir, tc.print))
			const startTimeout = 500 * time.Millisecond
			cleanup := func() { // reads the pid files without failing: Open may still be stuck
				for _, f := range []string{"child.pid", "main.pid"} {
					if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil {
						if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
							syscall.Kill(pid, syscall.SIGKILL)
						}
					}
				}
			}
			t.Cleanup(cleanup)
			_, err, took := openWithin(t, plugins.Config{Path: script, StartTimeout: startTimeout}, startTimeout+testwait.Scale(10*time.Second), cleanup)
			wantErr(t, err, append([]string{script}, tc.want...)...)
			// start_timeout is what the test checks, so it is not scaled;
			// the time the cleanup takes after it is, with the load.
			if limit := startTimeout + testwait.Scale(2500*time.Millisecond); took > limit {
				t.Errorf("Open took %s, want at most start_timeout + %s = %s", took, limit-startTimeout, limit)
			}
			child := readPid(t, filepath.Join(dir, "child.pid"))
			mainPid := readPid(t, filepath.Join(dir, "main.pid"))
			for _, pid := range []int{mainPid, child} {
				waitGone(t, pid)
			}
			waitGroupGone(t, mainPid) // the plugin led its own process group
		})
	}
}

// TestStartCleanupEscapedGrandchild: a child that left the plugin's
// process group (setsid) and holds its pipes cannot be killed with the
// group, but Open still returns within start_timeout plus the pipe grace
// period.
func TestStartCleanupEscapedGrandchild(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, dir, "plugin", fmt.Sprintf(`setsid sleep 1000 &
echo $! > %[1]s/child.pid
exec sleep 1000
`, dir))
	const startTimeout = 500 * time.Millisecond
	cleanup := func() {
		if b, err := os.ReadFile(filepath.Join(dir, "child.pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	t.Cleanup(cleanup)
	_, err, took := openWithin(t, plugins.Config{Path: script, StartTimeout: startTimeout}, startTimeout+testwait.Scale(10*time.Second), cleanup)
	wantErr(t, err, script, "did not complete the handshake within 500ms (start_timeout)")
	// start_timeout, then up to 1 s of pipe grace, then go-plugin's cleanup
	// (that part scaled with the load: at load 13 on 2 cores it took 3.67 s).
	if limit := startTimeout + testwait.Scale(3*time.Second); took > limit {
		t.Errorf("Open took %s, want at most %s", took, limit)
	}
}

// TestWrapperChildrenDieWithPlugin: a plugin started through a wrapper
// script that also starts a child works, lines the child writes to the
// original stdout (fd 1) after the handshake reach the log, and Close ends
// the child too, promptly.
func TestWrapperChildrenDieWithPlugin(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, dir, "wrapper", fmt.Sprintf(`(sleep 0.3; echo "late line on fd 1"; exec sleep 1000) &
echo $! > %[1]s/child.pid
exec %[2]s
`, dir, testPlugin))
	logs := &syncWriter{w: &bytes.Buffer{}}
	s, err := plugins.Open(plugins.Config{Path: script, Params: map[string]any{"strategy": "ppl"},
		Log: zerolog.New(logs)})
	child := readPid(t, filepath.Join(dir, "child.pid"))
	killLater(t, child)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := plugins.Of(s)
	pid := p.Pid()
	deadline := time.Now().Add(testwait.Scale(5 * time.Second))
	for !strings.Contains(logs.String(), "late line on fd 1") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if out := logs.String(); !strings.Contains(out, `"stream":"stdout","message":"late line on fd 1"`) {
		t.Errorf("the line written to fd 1 after the handshake is not in the log:\n%s", out)
	}
	start := time.Now()
	core.HooksOf(s).Close()
	if took := time.Since(start); took > testwait.Scale(3*time.Second) {
		t.Errorf("Close took %s", took)
	}
	waitGone(t, pid)
	waitGone(t, child)
	waitGroupGone(t, pid)
}

// waitGroupGone waits until process group pgid has no live member left
// (zombies, which an init process reaps whenever it does, do not count).
func waitGroupGone(t *testing.T, pgid int) {
	t.Helper()
	deadline := time.Now().Add(testwait.Scale(5 * time.Second))
	for {
		live := liveInGroup(pgid)
		if len(live) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process group %d still has live members %v", pgid, live)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// liveInGroup lists the processes of group pgid that are not zombies,
// from /proc/PID/stat ("PID (COMM) STATE PPID PGRP ...").
func liveInGroup(pgid int) []int {
	var out []int
	for _, p := range proctest.All() {
		if p.Live() && p.PGRP == pgid {
			out = append(out, p.PID)
		}
	}
	return out
}

// TestPrintBeforeServe: a Go plugin printing on stdout before sdk.Serve
// gets an error that says so.
func TestPrintBeforeServe(t *testing.T) {
	t.Setenv("CDE_TESTPLUGIN_PRINT", "starting my plugin")
	_, err := openTest(t, map[string]any{"strategy": "ppl"}, nil)
	wantErr(t, err, testPlugin, `printed "starting my plugin" on stdout before the handshake`, "print to stderr or use sdk.Logger()")
}

// TestStderrLogLinesMadeSafe: JSON log lines whose hclog fields have the
// wrong type made go-plugin panic (a crash of cde-run from one line a
// plugin prints); a JavaScript-style @timestamp made it drop the line.
// (A non-string @level becomes a string no level matches: go-plugin logs
// the line at debug level, which the host does not show.)
func TestStderrLogLinesMadeSafe(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, dir, "plugin", `echo '{"@message": 5, "@level": "error"}' >&2
echo '{"@message": "from node", "@level": "info", "@timestamp": "2026-01-02T03:04:05.678Z", "k": 1}' >&2
echo '{"@message": "odd level", "@level": ["x"], "@timestamp": 7}' >&2
sleep 0.2
exit 1
`)
	logs := &syncWriter{w: &bytes.Buffer{}}
	_, err := plugins.Open(plugins.Config{Path: script, Log: zerolog.New(logs)})
	wantErr(t, err, script)
	out := logs.String()
	for _, want := range []string{`"level":"error"`, `"message":"5"`, `"message":"from node"`, `"k":1`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
}

// TestPlainStderrLogged: plain lines on stderr (a C library, a child
// process, a plugin in another language printing to stderr) reach the log
// once; go-plugin alone logged them at debug level, which was not shown.
func TestPlainStderrLogged(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, dir, "plugin", `echo 'hello from stderr' >&2
echo '[WARN] a tagged warning' >&2
echo '{"x": 1}' >&2
sleep 0.2
exit 1
`)
	logs := &syncWriter{w: &bytes.Buffer{}}
	_, err := plugins.Open(plugins.Config{Path: script, Log: zerolog.New(logs)})
	wantErr(t, err, script)
	out := logs.String()
	for want, n := range map[string]int{`"stream":"stderr","message":"hello from stderr"`: 1,
		`a tagged warning`: 1, `"stream":"stderr","message":"{\"x\": 1}"`: 1} {
		if got := strings.Count(out, want); got != n {
			t.Errorf("%s: %d times in the log, want %d:\n%s", want, got, n, out)
		}
	}
}
