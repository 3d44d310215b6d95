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
