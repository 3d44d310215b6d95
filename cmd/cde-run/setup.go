package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
)

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func stderrIsTTY() bool {
	return isatty.IsTerminal(os.Stderr.Fd()) || isatty.IsCygwinTerminal(os.Stderr.Fd())
}

// newLogger writes human-readable lines on a terminal (info and above,
// each clearing the progress bar's line first) and JSON elsewhere.
func newLogger(w io.Writer, tty bool) zerolog.Logger {
	if tty {
		out := zerolog.ConsoleWriter{Out: clearLine{w}, TimeFormat: time.TimeOnly}
		return zerolog.New(out).Level(logLevel).With().Timestamp().Logger()
	}
	return zerolog.New(w).Level(logLevel).With().Timestamp().Logger()
}

// logLevel is --log-level, which every command takes (main strips it
// before the command's own flags): info unless set, with or without a
// terminal.
var logLevel = zerolog.InfoLevel

// takeLogLevel removes --log-level LEVEL (or --log-level=LEVEL, one or two
// dashes) from args and returns the level.
func takeLogLevel(args []string) ([]string, zerolog.Level, error) {
	level := zerolog.InfoLevel
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "log-level" {
			out = append(out, a)
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				return nil, level, fmt.Errorf("--log-level needs a value: debug, info, warn or error")
			}
			i++
			val = args[i]
		}
		switch val {
		case "debug", "info", "warn", "error":
			level, _ = zerolog.ParseLevel(val)
		default:
			return nil, level, fmt.Errorf("--log-level %q: want debug, info, warn or error", val)
		}
	}
	return out, level, nil
}

// clearLine erases the terminal line (where a progress bar may stand)
// before each write; the bar is redrawn on its next update.
type clearLine struct{ w io.Writer }

func (c clearLine) Write(p []byte) (int, error) {
	if _, err := io.WriteString(c.w, "\r\x1b[K"); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}
