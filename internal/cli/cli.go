// Package cli is the plumbing cde-run's commands share: config flags
// (--config, --set, --engine, --pjrt-plugin), flag sets whose --help names
// the config docs, the logger and --log-level, signal handling that lets a
// run checkpoint before it stops, exit codes and the JSONL filter loop.
package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/internal/graceful"
	"github.com/cde-rl/cde/internal/readcap"
	"github.com/cde-rl/cde/tasks"
	"github.com/cde-rl/cde/trainer"
)

// ConfigFlags are the flags every config-driven command shares.
type ConfigFlags struct {
	File           string     // --config
	Sets           StringList // --set, repeatable
	Engine, Plugin string     // --engine, --pjrt-plugin
}

// Register adds --config and --set to fs.
func (c *ConfigFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&c.File, "config", "", "YAML config file (layered: defaults < file < CDE_* env < --set)")
	fs.Var(&c.Sets, "set", "override one key, e.g. --set train.steps=50 (repeatable; value parsed as YAML)")
}

// RegisterEngine adds --engine and --pjrt-plugin, for the commands that
// run a model.
func (c *ConfigFlags) RegisterEngine(fs *flag.FlagSet) {
	c.Register(fs)
	fs.StringVar(&c.Engine, "engine", "", "compute engine, as on score, generate and serve: the same as --set backend.engine=E (a --set of that key wins)")
	fs.StringVar(&c.Plugin, "pjrt-plugin", "", "the xla:* engines' PJRT plugin: the same as --set backend.pjrt_plugin=P")
}

// Given reports whether any flag that changes the config was given.
func (c *ConfigFlags) Given() bool {
	return c.File != "" || len(c.Sets) > 0 || c.Engine != "" || c.Plugin != ""
}

// Load layers the embedded defaults, the --config file, CDE_* variables
// and the flags' --set lines into a config.
func (c *ConfigFlags) Load() (*trainer.Config, error) {
	return trainer.LoadConfig(trainer.LoadOptions{File: c.File, Sets: c.AllSets()})
}

// AllSets are --engine and --pjrt-plugin as --set lines, then the --set
// lines (which win).
func (c *ConfigFlags) AllSets() []string {
	var sets []string
	if c.Engine != "" {
		sets = append(sets, "backend.engine="+c.Engine)
	}
	if c.Plugin != "" {
		sets = append(sets, "backend.pjrt_plugin="+c.Plugin)
	}
	return append(sets, c.Sets...)
}

// NewFlagSet is a command's flag set; its --help shows the synopsis, the
// flags and where the config keys are documented.
func NewFlagSet(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: cde-run %s\n\n", synopsis)
		fs.PrintDefaults()
		fmt.Fprintf(fs.Output(), "\nEnvironment: CDE_SECTION__KEY=value overrides a config key (e.g. CDE_TRAIN__STEPS=50).\nConfig keys and defaults: docs/config.md\n")
	}
	return fs
}

// Parse returns (exit code, done): done when --help was shown or flags failed.
func Parse(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, true
		}
		return 2, true
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "cde-run %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return 2, true
	}
	return 0, false
}

// SignalContext is cancelled by the first SIGINT or SIGTERM, which lets a
// run finish its step and write a checkpoint; the handler is then removed,
// so a second signal ends the process at once (a step that hangs can
// always be stopped without SIGKILL).
func SignalContext() (context.Context, context.CancelFunc) {
	return signalContext(false)
}

// StagedSignalContext is SignalContext for a command that reads and builds
// before its work begins (train, pretrain, eval): until the work calls
// graceful.Begin on the context (train: just before it makes the run
// directory; a warm start: as it starts), the first signal ends the
// process at once with exit status 130, as nothing is there to
// checkpoint or tidy, and a read that blocks (a --config FIFO nobody
// writes to) or a long load cannot hold it. From then on it is
// SignalContext.
func StagedSignalContext() (context.Context, context.CancelFunc) {
	return signalContext(true)
}

func signalContext(staged bool) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex // held while a signal is handled: the work cannot begin half-way through an exit
	begun := !staged
	ctx = graceful.WithBegin(ctx, func() {
		mu.Lock()
		begun = true
		mu.Unlock()
	})
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case sig := <-ch:
			mu.Lock()
			if !begun {
				fmt.Fprintf(os.Stderr, "cde-run: %v: quitting now (training has not begun: nothing to checkpoint)\n", sig)
				os.Exit(130)
			}
			mu.Unlock()
			signal.Stop(ch)
			fmt.Fprintf(os.Stderr, "cde-run: %v: stopping after the current step (send it again to quit at once)\n", sig)
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel()
	}
}

// ExitCode is 0 for nil, 130 for a cancelled run and 1 for other errors.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	if errors.Is(err, context.Canceled) {
		return 130
	}
	return 1
}

// StringList is a repeatable flag.
type StringList []string

func (s *StringList) String() string     { return strings.Join(*s, ",") }
func (s *StringList) Set(v string) error { *s = append(*s, v); return nil }

// StderrIsTTY reports whether stderr is a terminal.
func StderrIsTTY() bool {
	return isatty.IsTerminal(os.Stderr.Fd()) || isatty.IsCygwinTerminal(os.Stderr.Fd())
}

// NewLogger writes human-readable lines on a terminal (info and above,
// each clearing the progress bar's line first) and JSON elsewhere.
func NewLogger(w io.Writer, tty bool) zerolog.Logger {
	if tty {
		out := zerolog.ConsoleWriter{Out: clearLine{w}, TimeFormat: time.TimeOnly}
		return zerolog.New(out).Level(LogLevel).With().Timestamp().Logger()
	}
	return zerolog.New(w).Level(LogLevel).With().Timestamp().Logger()
}

// LogFailure logs a command's error at error level with msg (as "train
// failed"). Off a terminal, where the log is JSON lines for machines, it
// then writes the error once more as plain text on its own last line of w,
// "cde-run CMD: error: ERR", for the person reading the output; a program
// that parses the log skips the one line that is not JSON.
func LogFailure(log zerolog.Logger, w io.Writer, tty bool, cmd, msg string, err error) {
	log.Error().Err(err).Msg(msg)
	if !tty {
		fmt.Fprintf(w, "cde-run %s: error: %v\n", cmd, err)
	}
}

// LogLevel is --log-level, which every command takes (main strips it
// before the command's own flags): info unless set, with or without a
// terminal.
var LogLevel = zerolog.InfoLevel

// TakeLogLevel removes --log-level LEVEL (or --log-level=LEVEL, one or two
// dashes) from args and returns the level.
func TakeLogLevel(args []string) ([]string, zerolog.Level, error) {
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

// ServeLines answers each line of in with one JSON value on out (the
// JSONL filters tokenize and verify). Output is flushed whenever no more
// input is buffered, so a caller may write one line and wait for its
// answer. An error names the input line; the lines before it have been
// answered.
//
// A line longer than MaxLineBytes is an error naming it, returned once
// that many bytes are read without a newline (an input that never ends,
// /dev/zero, holds no more than that in memory).
func ServeLines(in io.Reader, out io.Writer, answer func(line []byte) (any, error)) error {
	r := bufio.NewReaderSize(in, 1<<16)
	w := bufio.NewWriterSize(out, 1<<16)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for n := 1; ; n++ {
		line, err := readLine(r, MaxLineBytes)
		if len(line) == 0 && err == io.EOF {
			return w.Flush()
		}
		if errors.Is(err, readcap.ErrTooLarge) {
			w.Flush()
			return fmt.Errorf("stdin line %d: longer than %s: refused (one JSON value a line; is the input newline-separated?)", n, readcap.Size(MaxLineBytes))
		}
		if err != nil && err != io.EOF {
			w.Flush()
			return fmt.Errorf("stdin line %d: %w", n, err)
		}
		if i := tasks.InvalidUTF8(line); i >= 0 {
			w.Flush()
			return fmt.Errorf("stdin line %d: invalid UTF-8 at byte %d of the line", n, i+1)
		}
		v, aerr := answer(line)
		if aerr != nil {
			w.Flush()
			return fmt.Errorf("stdin line %d: %w", n, aerr)
		}
		if werr := enc.Encode(v); werr != nil {
			return fmt.Errorf("stdout: %w", werr)
		}
		if r.Buffered() == 0 || err == io.EOF {
			if ferr := w.Flush(); ferr != nil {
				return fmt.Errorf("stdout: %w", ferr)
			}
		}
		if err == io.EOF {
			return nil
		}
	}
}

// MaxLineBytes caps one input line of ServeLines (tokenize, verify,
// score): a line holds one JSON value, a text or a list of token ids, and
// 64 MiB is some 9 million ids.
const MaxLineBytes = 64 << 20

// readLine is bufio.Reader.ReadBytes('\n') that gives up with an error
// wrapping readcap.ErrTooLarge once the line passes max bytes.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		frag, err := r.ReadSlice('\n')
		if len(line)+len(frag) > max {
			return nil, readcap.ErrTooLarge
		}
		line = append(line, frag...)
		if err != bufio.ErrBufferFull {
			return line, err
		}
	}
}

// StdinIsTTY reports whether stdin is a terminal.
func StdinIsTTY() bool { return isatty.IsTerminal(os.Stdin.Fd()) }

// AskYesNo asks question on stderr and reads the answer from stdin: true
// for y or yes.
func AskYesNo(question string) bool {
	fmt.Fprintf(os.Stderr, "%s [y/N] ", question)
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	a := strings.ToLower(strings.TrimSpace(line))
	return a == "y" || a == "yes"
}

// ReadJSONStrings reads a stream of JSON strings (one per line, or any
// white space between them), refusing invalid UTF-8, which encoding/json
// would turn into U+FFFD silently. Errors name the value's position. An
// input over readcap.Stdin's cap (64 MiB) is an error saying so.
func ReadJSONStrings(r io.Reader) ([]string, error) {
	var out []string
	cr := readcap.Stdin.Reader(r, "")
	dec := json.NewDecoder(cr)
	for n := 1; dec.More(); n++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, readcap.ErrTooLarge) {
				return nil, err
			}
			return nil, fmt.Errorf("stdin value %d: want a JSON string: %v", n, err)
		}
		if i := tasks.InvalidUTF8(raw); i >= 0 {
			return nil, fmt.Errorf("stdin value %d: invalid UTF-8 at byte %d of the value", n, i+1)
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("stdin value %d: want a JSON string: %v", n, err)
		}
		out = append(out, s)
	}
	if err := readcap.Over(cr); err != nil { // More stops at a read error
		return nil, err
	}
	return out, nil
}
