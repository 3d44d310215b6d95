package plugins

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
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

// tail keeps, for error messages, the last lines of the plugin's raw
// stderr and the lines that say why a process died (keyLine): a Go
// runtime fault prints its cause near the top of a goroutine dump of
// hundreds of lines, which the last lines alone never show.
type tail struct {
	mu    sync.Mutex
	lines []string
	cur   []byte
	// key holds the first keyHead lines keyLine picked and the latest
	// ones after them, keyMax in all.
	key []string
	// frame is the latest Python traceback frame line ("File ..., line
	// N, in f"), quoted with the exception line that follows it.
	frame string
}

const (
	tailLines = 12
	// keyMax bounds the lines Summary quotes as the cause; keyHead of
	// them are the first ones seen (a Go fault's), the rest the latest
	// (a Python exception's, which ends its traceback).
	keyMax  = 10
	keyHead = 5
	// summaryTail is how many last lines Summary adds after the cause,
	// and lineMax bounds each quoted line.
	summaryTail = 4
	lineMax     = 300
)

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
	raw := strings.TrimRight(string(t.cur), "\r")
	line := strings.TrimSpace(raw)
	t.cur = t.cur[:0]
	if line == "" {
		return
	}
	// hclog JSON lines: keep warnings and errors, by their message only.
	var m map[string]any
	if json.Unmarshal([]byte(line), &m) == nil {
		msg, _ := m["@message"].(string)
		lvl, _ := m["@level"].(string)
		if msg == "" || lvl != "warn" && lvl != "error" {
			return
		}
		line = msg
		raw = msg
	}
	t.noteKey(raw, line)
	t.lines = append(t.lines, line)
	if len(t.lines) > tailLines {
		t.lines = t.lines[len(t.lines)-tailLines:]
	}
}

// noteKey records line when keyLine picks it (raw is the line with its
// indentation, which tells a Python frame from an exception).
func (t *tail) noteKey(raw, line string) {
	if strings.HasPrefix(raw, "  File \"") {
		t.frame = line
		return
	}
	if !keyLine(raw) {
		return
	}
	if pythonException.MatchString(raw) && t.frame != "" {
		t.addKey(t.frame)
		t.frame = ""
	}
	t.addKey(line)
}

func (t *tail) addKey(line string) {
	if slices.Contains(t.key, line) {
		return
	}
	t.key = append(t.key, line)
	if len(t.key) > keyMax {
		t.key = slices.Delete(t.key, keyHead, keyHead+1)
	}
}

// keyLines are the starts of lines that say why a plugin process died:
// the Go runtime's (panic, fatal error, a fault and its signal), Python's
// traceback header, and a Python or Node exception (pythonException).
var keyLines = []string{
	"panic: ", "fatal error: ", "unexpected fault address", "unexpected signal",
	"[signal SIG", "SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "runtime: out of memory",
	"Traceback (most recent call last):", "Segmentation fault", "Fatal Python error:",
	"Uncaught ", "FATAL ERROR:",
}

// pythonException matches an exception line at the start of a line:
// Python's "ValueError: ...", "KeyboardInterrupt", "mod.CustomError: ...",
// Node's "Error: ..." and "TypeError: ...".
var pythonException = regexp.MustCompile(`^(?:[A-Za-z_][\w.]*\.)?(?:[A-Z]\w*)?(?:Error|Exception|Interrupt|Exit)(?::\s|$)`)

// keyLine reports whether a raw stderr line says why a process died.
func keyLine(raw string) bool {
	for _, k := range keyLines {
		if strings.HasPrefix(raw, k) {
			return true
		}
	}
	return pythonException.MatchString(raw)
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

// Summary is what an error quotes of a dead plugin's stderr: cause, the
// lines that say what happened (keyLine), and last, the last lines after
// them (summaryTail of them when there is a cause, else tailLines), each
// cut at lineMax bytes and joined with " | "; both "" when the plugin
// wrote nothing.
func (t *tail) Summary() (cause, last string) {
	t.mu.Lock()
	lines := slices.Clone(t.lines)
	if c := strings.TrimSpace(string(t.cur)); c != "" {
		lines = append(lines, c)
	}
	key := slices.Clone(t.key)
	t.mu.Unlock()
	cut := func(ls []string) string {
		out := make([]string, len(ls))
		for i, l := range ls {
			if len(l) > lineMax {
				l = l[:lineMax] + "..."
			}
			out[i] = l
		}
		return strings.Join(out, " | ")
	}
	if len(key) == 0 {
		return "", cut(lines)
	}
	rest := slices.DeleteFunc(lines, func(l string) bool { return slices.Contains(key, l) })
	if len(rest) > summaryTail {
		rest = rest[len(rest)-summaryTail:]
	}
	return cut(key), cut(rest)
}

// quote is Summary as a clause for an error: "its stderr says: CAUSE;
// its last stderr lines: LAST", either part left out when empty.
func (t *tail) quote() string {
	cause, last := t.Summary()
	var parts []string
	if cause != "" {
		parts = append(parts, "its stderr says: "+cause)
	}
	if last != "" {
		parts = append(parts, "its last stderr lines: "+last)
	}
	return strings.Join(parts, "; ")
}
