package main

import (
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
		return zerolog.New(out).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	}
	return zerolog.New(w).With().Timestamp().Logger()
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
