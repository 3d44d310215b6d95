package plugins

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// go-plugin's own "plugin process exited" line carries a "plugin" field
// (the binary's path); the bridged line has one "plugin" key, the
// strategy's label, and keeps the path under another name.
func TestLogBridgeOnePluginKey(t *testing.T) {
	var buf bytes.Buffer
	w := &zerologWriter{log: zerolog.New(&buf), plugin: "answercount"}
	w.Write([]byte(`{"@level":"info","@message":"plugin process exited","@module":"plugin","plugin":"/bin/answercount","id":42}` + "\n"))
	line := strings.TrimSpace(buf.String())
	if n := strings.Count(line, `"plugin":`); n != 1 {
		t.Fatalf("%d \"plugin\" keys in %s", n, line)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatal(err)
	}
	if m["plugin"] != "answercount" || m["go_plugin_plugin"] != "/bin/answercount" || m["message"] != "plugin process exited" {
		t.Errorf("bridged line %s", line)
	}
}

// A plugin that floods its output puts at most about the relay burst in
// the host's log, and the host says how much it dropped.
func TestRelayLimit(t *testing.T) {
	// The clock stands still, so no refill depends on this machine's speed.
	start := time.Now()
	relayNow = func() time.Time { return start }
	defer func() { relayNow = time.Now }()
	var buf bytes.Buffer
	log := zerolog.New(&buf)
	w := &lineWriter{log: log, plugin: "flood-test", stream: "stderr"}
	line := bytes.Repeat([]byte("x"), 99)
	chunk := bytes.Repeat(append(line, '\n'), 10000) // 1 MB
	for range 80 {
		w.Write(chunk)
	}
	flushDropped(log, "flood-test")
	out := buf.String()
	// 1 MiB of 99-byte lines is 10591 of them, each logged with its JSON
	// around it.
	if logged := strings.Count(out, `"stream":"stderr"`); logged != relayBurst/99 {
		t.Errorf("%d lines logged, want %d (the 1 MiB burst of 99-byte lines)", logged, relayBurst/99)
	}
	if len(out) > 2*relayBurst {
		t.Errorf("80 MB of plugin output put %d bytes in the log, want about %d at most", len(out), relayBurst)
	}
	logged := strings.Count(out, `"stream":"stderr"`)
	var dropped int64
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		json.Unmarshal([]byte(l), &m)
		if n, ok := m["lines"].(float64); ok && strings.Contains(l, "was dropped") {
			dropped += int64(n)
		}
	}
	if dropped == 0 || int64(logged)+dropped != 800000 {
		t.Errorf("%d lines logged and %d reported dropped, want 800000 in all", logged, dropped)
	}
}

// TestTailSummary: a dead plugin's error quotes the lines that say what
// happened (a Go fault near the top of a long goroutine dump, a Python
// exception and the frame it came from, a Node error) before a short
// tail, each line bounded; without such lines, the last lines.
func TestTailSummary(t *testing.T) {
	goroutines := strings.Repeat("goroutine 7 [select (no cases)]:\nmain.main.func1()\n\t/src/main.go:70 +0x1d\n", 150)
	for _, tc := range []struct {
		name      string
		stderr    string
		cause     string
		lastHas   string
		lastLacks string
	}{
		{"go fault", strings.Repeat("working\n", 11) + "unexpected fault address 0x7f12\nfatal error: fault\n" +
			"[signal SIGSEGV: segmentation violation code=0x2 addr=0x7f12 pc=0x4a1]\n\ngoroutine 1 [running]:\nruntime.throw()\n" + goroutines,
			"unexpected fault address 0x7f12 | fatal error: fault | [signal SIGSEGV: segmentation violation code=0x2 addr=0x7f12 pc=0x4a1]",
			"/src/main.go:70 +0x1d", "working"},
		{"go panic", "panic: runtime error: index out of range [3] with length 3\n\ngoroutine 1 [running]:\nmain.f()\n\t/src/m.go:9 +0x1\nexit status 2\n",
			"panic: runtime error: index out of range [3] with length 3", "exit status 2", ""},
		{"python", "starting\nTraceback (most recent call last):\n  File \"/p/x.py\", line 3, in <module>\n    main()\n" +
			"  File \"/p/x.py\", line 9, in reward_bonus\n    for e in batch.entropies:\nTypeError: 'NoneType' object is not iterable\n",
			"Traceback (most recent call last): | File \"/p/x.py\", line 9, in reward_bonus | TypeError: 'NoneType' object is not iterable",
			"for e in batch.entropies:", ""},
		{"node", "/p/plugin.js:10\n    throw new Error('boom');\n    ^\n\nError: boom\n    at Object.<anonymous> (/p/plugin.js:10:11)\n",
			"Error: boom", "at Object.<anonymous>", ""},
		{"plain", "pytest: crashing on purpose\nbye\n", "", "pytest: crashing on purpose | bye", ""},
		{"long line", "fatal error: " + strings.Repeat("x", 5000) + "\n", "fatal error: " + strings.Repeat("x", lineMax-len("fatal error: ")) + "...", "", ""},
		{"log lines are not causes", "error: the config is fine\nValueError-like text: no\nINFO: Error: quoted\n", "", "INFO: Error: quoted", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tl tail
			tl.Write([]byte(tc.stderr))
			cause, last := tl.Summary()
			if cause != tc.cause {
				t.Errorf("cause:\n got %q\nwant %q", cause, tc.cause)
			}
			if !strings.Contains(last, tc.lastHas) || tc.lastLacks != "" && strings.Contains(last, tc.lastLacks) {
				t.Errorf("last lines %q: want %q in them and not %q", last, tc.lastHas, tc.lastLacks)
			}
			if n := len(tl.quote()); n > (keyMax+tailLines)*(lineMax+10) {
				t.Errorf("quote has %d bytes", n)
			}
		})
	}
}
