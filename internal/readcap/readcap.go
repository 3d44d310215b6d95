// Package readcap reads a file or a stream whole, up to a cap. A config,
// bench or rollout file far larger than any real one (a wrong path, a huge
// file, /dev/zero, a pipe or device that never ends) is an error naming
// the path and the cap, returned once the cap is passed, instead of a
// process that reads until the machine runs out of memory.
//
// A FIFO nobody writes to blocks in open or read; cde-run's commands end
// at the first signal until their work has begun (cli.SignalContext), so
// such a read never holds the process.
package readcap

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// Limit is one kind of input and its cap.
type Limit struct {
	What string // the kind of input, first word of the error: "config"
	Max  int64  // bytes
	Hint string // why an input this large is a mistake, for the error
	// Object, when true, refuses an input whose first byte other than
	// JSON white space is not '{' as soon as that byte is read, so a
	// device or stream of garbage (/dev/zero, /dev/urandom) fails at once
	// rather than at the cap.
	Object bool
}

// The caps of cde-run's inputs.
var (
	// Config is a YAML config (--config, a run's config.yaml).
	Config = Limit{"config", 16 << 20, "a config is a few KB; is it the right file?", false}
	// Bench is a bench file and the config file its base: names.
	Bench = Limit{"bench file", 16 << 20, "a bench file is a few KB; is it the right file?", false}
	// Rollout is a rollout file (docs/rollout-format.md), a JSON object.
	// The largest realistic one: a batch of
	// examples/paper-qwen3-4b-ppo.yaml, 2048 responses of up to 3072
	// tokens with 4 value heads, at the 134 bytes a token that
	// --dump-rollouts writes with 4 heads, is 0.85 GB.
	Rollout = Limit{"rollout file", 2 << 30, "a batch of 2048 responses x 3072 tokens with 4 value heads is about 0.85 GB; is it the right file?", true}
	// Stdin is the whole standard input of a command that reads it at
	// once (generate's prompts).
	Stdin = Limit{"stdin", 64 << 20, "prompts are a few KB each; is it the right input?", false}
)

// ErrTooLarge is what every over-the-cap error wraps.
var ErrTooLarge = errors.New("over the size cap")

// TooLargeError says which input passed which cap.
type TooLargeError struct {
	Limit
	Name string // the path ("" for a stream named by What alone)
}

func (e *TooLargeError) Error() string {
	name := e.What
	if e.Name != "" {
		name += " " + e.Name
	}
	return fmt.Sprintf("%s: larger than %s: refused (%s)", name, Size(e.Max), e.Hint)
}

func (e *TooLargeError) Unwrap() error { return ErrTooLarge }

// ReadFile reads path whole. A regular file over the cap is refused
// before it is read; anything else (a device, a pipe) is read up to the
// cap and one byte more. Errors of open and read are returned as they are.
func (l Limit) ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := int64(0)
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		if fi.Size() > l.Max {
			return nil, &TooLargeError{l, path}
		}
		size = fi.Size()
	}
	return l.read(f, path, size)
}

// Read reads r to its end, or to the cap; name labels the error (the path,
// or "" for a stream What names).
func (l Limit) Read(r io.Reader, name string) ([]byte, error) {
	return l.read(r, name, 0)
}

func (l Limit) read(r io.Reader, name string, size int64) ([]byte, error) {
	buf := make([]byte, 0, min(size, l.Max)+512)
	checked := !l.Object
	for {
		if !checked {
			if i := firstNonSpace(buf); i >= 0 {
				if buf[i] != '{' {
					return nil, l.notObject(name, buf[i])
				}
				checked = true
			}
		}
		if int64(len(buf)) > l.Max {
			return nil, &TooLargeError{l, name}
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // grow
		}
		want := min(int64(cap(buf)), l.Max+1)
		n, err := r.Read(buf[len(buf):want])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			if int64(len(buf)) > l.Max {
				return nil, &TooLargeError{l, name}
			}
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func firstNonSpace(b []byte) int {
	for i, c := range b {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return i
		}
	}
	return -1
}

func (l Limit) notObject(name string, c byte) error {
	if name == "" {
		name = l.What
	}
	return fmt.Errorf("%s: want a JSON object (a %s), and it starts with byte %#02x", name, l.What, c)
}

// Reader wraps r so that reading past the cap fails with the cap's error
// (for a decoder that reads a stream as it goes).
func (l Limit) Reader(r io.Reader, name string) io.Reader {
	return &capped{r: r, l: l, name: name}
}

type capped struct {
	r    io.Reader
	l    Limit
	name string
	n    int64
}

func (c *capped) Read(p []byte) (int, error) {
	if c.n > c.l.Max {
		return 0, &TooLargeError{c.l, c.name}
	}
	if rest := c.l.Max + 1 - c.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.l.Max {
		return 0, &TooLargeError{c.l, c.name}
	}
	return n, err
}

// Over is the cap's error when r, from Reader, was read past its cap,
// else nil (for a reader whose errors a decoder may not pass on).
func Over(r io.Reader) error {
	if c, ok := r.(*capped); ok && c.n > c.l.Max {
		return &TooLargeError{c.l, c.name}
	}
	return nil
}

// Size writes a byte count the way the caps are given: 16 MiB, 4 GiB.
func Size(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
