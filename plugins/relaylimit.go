package plugins

import (
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// What one plugin's output may put in the host's log: a burst of
// relayBurst bytes, refilled at relayRate bytes a second. Lines beyond it
// are dropped and counted, and one warning says how many once output is let
// through again or the plugin's stderr ends. (A plugin that wrote 80 MB to
// stderr per call made the host's stderr 167 MB.)
const (
	relayBurst = 1 << 20
	relayRate  = 256 << 10
)

type relayLimit struct {
	mu                         sync.Mutex
	tokens                     float64
	last                       time.Time
	droppedLines, droppedBytes int64
}

var relayLimits sync.Map // plugin label -> *relayLimit

// relayNow is the limiter's clock (a test stops it).
var relayNow = time.Now

func limitFor(label string) *relayLimit {
	v, _ := relayLimits.LoadOrStore(label, &relayLimit{tokens: relayBurst, last: relayNow()})
	return v.(*relayLimit)
}

// allow reports whether a line of n bytes may be logged now, and the lines
// and bytes dropped since the last report when it may (the caller reports
// them first).
func (l *relayLimit) allow(n int) (ok bool, lines, bytes int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := relayNow()
	l.tokens = min(relayBurst, l.tokens+now.Sub(l.last).Seconds()*relayRate)
	l.last = now
	if float64(n) > l.tokens {
		l.droppedLines++
		l.droppedBytes += int64(n)
		return false, 0, 0
	}
	l.tokens -= float64(n)
	lines, bytes = l.droppedLines, l.droppedBytes
	l.droppedLines, l.droppedBytes = 0, 0
	return true, lines, bytes
}

// takeDropped returns and clears the count of dropped lines and bytes.
func (l *relayLimit) takeDropped() (lines, bytes int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines, bytes = l.droppedLines, l.droppedBytes
	l.droppedLines, l.droppedBytes = 0, 0
	return lines, bytes
}

func reportDropped(log zerolog.Logger, label string, lines, bytes int64) {
	if lines > 0 {
		log.Warn().Str("plugin", label).Int64("lines", lines).Int64("bytes", bytes).
			Msg("plugin output over the relay limit (1 MiB at once, then 256 KiB/s) was dropped")
	}
}

// relayEvent returns the event to log a plugin's line of n bytes on, or
// nil when the line is over the limit and dropped.
func relayEvent(ev func() *zerolog.Event, log zerolog.Logger, label string, n int) *zerolog.Event {
	ok, lines, bytes := limitFor(label).allow(n)
	if !ok {
		return nil
	}
	reportDropped(log, label, lines, bytes)
	return ev().Str("plugin", label)
}

// relayLine logs one line of a plugin's output at info level, within the
// relay limit; stream ("stdout", "stderr") is added when not empty.
func relayLine(log zerolog.Logger, label, stream, s string) {
	ev := relayEvent(log.Info, log, label, len(s))
	if ev == nil {
		return
	}
	if stream != "" {
		ev = ev.Str("stream", stream)
	}
	ev.Msg(s)
}

// flushDropped reports what was dropped and not yet reported (when a
// plugin's output ends).
func flushDropped(log zerolog.Logger, label string) {
	lines, bytes := limitFor(label).takeDropped()
	reportDropped(log, label, lines, bytes)
}
