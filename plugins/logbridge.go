package plugins

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/rs/zerolog"
)

// zerologWriter receives hclog's JSON lines (go-plugin's client logger,
// which re-logs the plugin's own hclog output) and writes each as a zerolog
// event with the plugin's name, level, message and fields.
type zerologWriter struct {
	log    zerolog.Logger
	plugin string
	// killing, when set and true, drops go-plugin's "plugin failed to exit
	// gracefully": the host killed the plugin on purpose (a failure, or a
	// start that failed), and says so itself.
	killing *atomic.Bool
	mu      sync.Mutex
	buf     []byte
}

func (w *zerologWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.line(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

func (w *zerologWriter) line(line []byte) {
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	var m map[string]any
	if json.Unmarshal(line, &m) != nil {
		relayLine(w.log, w.plugin, "", string(line))
		return
	}
	lvl, _ := m["@level"].(string)
	msg, _ := m["@message"].(string)
	if msg == "plugin failed to exit gracefully" && w.killing != nil && w.killing.Load() {
		return
	}
	level := w.log.Info
	switch strings.ToLower(lvl) {
	case "trace", "debug":
		level = w.log.Debug
	case "warn":
		level = w.log.Warn
	case "error":
		level = w.log.Error
	}
	ev := relayEvent(level, w.log, w.plugin, len(line))
	if ev == nil {
		return
	}
	if mod, _ := m["@module"].(string); mod != "" {
		ev = ev.Str("module", mod)
	}
	for k, v := range m {
		if strings.HasPrefix(k, "@") || k == "timestamp" {
			continue
		}
		if k == "plugin" || k == "module" {
			// go-plugin's own lines ("plugin process exited") carry a
			// "plugin" field, the binary's path: keep the one key above.
			k = "go_plugin_" + k
		}
		ev = ev.Interface(k, v)
	}
	ev.Msg(msg)
}

// newHCLogBridge returns the hclog logger given to go-plugin's client: at
// Info it forwards the plugin's logs (Info and above, and panics) but not
// go-plugin's own debug chatter.
func newHCLogBridge(log zerolog.Logger, plugin string, killing *atomic.Bool) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "plugin", Output: &zerologWriter{log: log, plugin: plugin, killing: killing},
		JSONFormat: true, Level: hclog.Info})
}

// lineWriter forwards lines written to a plugin's redirected stdout or
// stderr (fmt.Println in the plugin after Serve) into the log.
type lineWriter struct {
	log    zerolog.Logger
	plugin string
	stream string
	tail   *tail // also receives the lines, when set
	mu     sync.Mutex
	buf    []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.tail != nil {
		w.tail.Write(p)
	}
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		if s := strings.TrimRight(string(w.buf[:i]), "\r"); s != "" {
			relayLine(w.log, w.plugin, w.stream, s)
		}
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

// tail keeps the last lines of the plugin's raw stderr for error messages.
type tail struct {
	mu    sync.Mutex
	lines []string
	cur   []byte
}

const tailLines = 12

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range p {
		if c == '\n' {
			t.push()
			continue
		}
		if len(t.cur) < 2000 {
			t.cur = append(t.cur, c)
		}
	}
	return len(p), nil
}

func (t *tail) push() {
	line := strings.TrimSpace(string(t.cur))
	t.cur = t.cur[:0]
	if line == "" {
		return
	}
	// hclog JSON lines: keep the message only.
	// hclog JSON lines: keep warnings and errors, by their message only.
	var m map[string]any
	if json.Unmarshal([]byte(line), &m) == nil {
		msg, _ := m["@message"].(string)
		lvl, _ := m["@level"].(string)
		if msg == "" || lvl != "warn" && lvl != "error" {
			return
		}
		line = msg
	}
	t.lines = append(t.lines, line)
	if len(t.lines) > tailLines {
		t.lines = t.lines[len(t.lines)-tailLines:]
	}
}

// String returns the last lines, joined.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := t.lines
	if len(t.cur) > 0 {
		lines = append(append([]string(nil), lines...), string(t.cur))
	}
	return strings.Join(lines, " | ")
}
