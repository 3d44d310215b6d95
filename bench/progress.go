package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Log formats of a bench's output (Options.LogFormat, `cde-run bench
// --log-format`).
const (
	// LogText, the default, on a terminal or not: the bench's own log and
	// its arm-seeds' log lines as "TIME LEVEL message key=value ...", an
	// info or debug line cut at MaxTextLine characters.
	LogText = "text"
	// LogJSON: the bench's log as JSON lines, and the arm-seeds' output
	// passed on as they wrote it (off a terminal, JSON log lines).
	LogJSON = "json"
)

// LogFormats lists the values --log-format accepts.
var LogFormats = []string{LogText, LogJSON}

// MaxTextLine bounds an info or debug line of the text log; warnings and
// errors are never cut.
const MaxTextLine = 200

// TextLogger is the bench's own logger in the text format: zerolog's
// console lines, coloured on a terminal only.
func TextLogger(w io.Writer, tty bool, level zerolog.Level) zerolog.Logger {
	return zerolog.New(textWriter(w, !tty)).Level(level).With().Timestamp().Logger()
}

func textWriter(w io.Writer, noColor bool) zerolog.ConsoleWriter {
	return zerolog.ConsoleWriter{Out: w, NoColor: noColor, TimeFormat: time.TimeOnly,
		FormatFieldValue: func(v any) string {
			// JSON numbers arrive as json.Number: 4 significant digits;
			// objects and arrays as their JSON bytes.
			switch x := v.(type) {
			case json.Number:
				if f, err := x.Float64(); err == nil && strings.ContainsAny(string(x), ".eE") {
					return strconv.FormatFloat(f, 'g', 4, 64)
				}
			case []byte:
				return string(x)
			}
			return fmt.Sprint(v)
		}}
}

// childOutput passes an arm-seed's output on line by line. In the text
// format a JSON log line (an object with "level" and "message") is
// written as a text log line; other lines (the progress lines) pass as
// they are. Either way it keeps the last error the child logged, the
// reason a failed arm-seed's line gives.
type childOutput struct {
	w       io.Writer
	text    bool
	console zerolog.ConsoleWriter
	mu      sync.Mutex
	buf     []byte
	lastErr string
}

func newChildOutput(w io.Writer, format string) *childOutput {
	c := &childOutput{w: w, text: format != LogJSON}
	c.console = textWriter(w, true)
	return c
}

func (c *childOutput) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf = append(c.buf, b...)
	for {
		i := bytes.IndexByte(c.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		c.line(c.buf[:i+1])
		c.buf = c.buf[i+1:]
	}
}

// Flush passes on a last unterminated line.
func (c *childOutput) Flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.buf) > 0 {
		c.line(append(c.buf, '\n'))
		c.buf = nil
	}
}

// LastError is the error (or, without one, the message) of the last
// error-level line the child logged, "" when none.
func (c *childOutput) LastError() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastErr
}

func (c *childOutput) line(l []byte) {
	var ev map[string]any
	trimmed := bytes.TrimSpace(l)
	if len(trimmed) == 0 || trimmed[0] != '{' || json.Unmarshal(trimmed, &ev) != nil {
		c.w.Write(l)
		return
	}
	level, _ := ev["level"].(string)
	msg, hasMsg := ev["message"].(string)
	if level == "" || !hasMsg {
		c.w.Write(l)
		return
	}
	if level == "error" || level == "fatal" || level == "panic" {
		c.lastErr = msg
		if e, ok := ev["error"].(string); ok && e != "" {
			c.lastErr = e
		}
	}
	if !c.text {
		c.w.Write(l)
		return
	}
	var out bytes.Buffer
	console := c.console
	console.Out = &out
	if _, err := console.Write(trimmed); err != nil {
		c.w.Write(l)
		return
	}
	s := strings.TrimRight(out.String(), "\n")
	if (level == "info" || level == "debug" || level == "trace") && len([]rune(s)) > MaxTextLine {
		s = string([]rune(s)[:MaxTextLine-1]) + "…"
	}
	io.WriteString(c.w, s+"\n")
}

// FailedSeed is an arm-seed whose training failed.
type FailedSeed struct {
	Arm    string
	Seed   uint64
	Reason string
}

// SeedsFailedError is Run's error when every arm-seed was tried and some
// failed: the report was written from the others. `cde-run bench` exits
// with ExitSeedsFailed on it.
type SeedsFailedError struct {
	Failed  []FailedSeed
	Command string // the bench command, which retries them
}

// ExitSeedsFailed is cde-run bench's exit status when the bench ran to its
// end and wrote its report but some arm-seeds failed.
const ExitSeedsFailed = 3

func (e *SeedsFailedError) Error() string {
	var names []string
	for _, f := range e.Failed {
		names = append(names, fmt.Sprintf("%s seed %d", f.Arm, f.Seed))
	}
	return fmt.Sprintf("bench: %d arm-seed(s) failed: %s (rerun to retry them)", len(e.Failed), strings.Join(names, ", "))
}

// failedLine is the progress line of a failed arm-seed: what failed, why,
// and the command that retries it.
func failedLine(label string, took time.Duration, reason, command string) string {
	line := fmt.Sprintf("%s: FAILED after %s: %s", label, took.Round(time.Second), oneLine(reason))
	if command != "" {
		line += "; to retry it (the finished arm-seeds are kept): " + command
	}
	return line + "\n"
}

// oneLine joins a message's lines with "; ".
func oneLine(s string) string {
	var parts []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, "; ")
}

// SeedsFailed returns the failed arm-seeds err carries, nil when none.
func SeedsFailed(err error) *SeedsFailedError {
	var sf *SeedsFailedError
	if errors.As(err, &sf) {
		return sf
	}
	return nil
}
