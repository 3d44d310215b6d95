// Package localserve starts `cde-run serve` processes on this machine for
// tests and benchmarks of remote generation: each is started with the given
// arguments, and its URL is read from the one line it prints once the model
// is loaded and the socket bound, "listening on http://HOST:PORT".
package localserve

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Proc is one running server.
type Proc struct {
	URL    string
	Cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
}

// Start runs bin with args (which should include `serve` and
// `--addr 127.0.0.1:0`) and waits up to wait for its "listening on" line.
// On failure the process is killed and the error carries its stderr.
func Start(bin string, wait time.Duration, args ...string) (*Proc, error) {
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &Proc{Cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		cmd.Wait()
		close(p.done)
	}()
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if url, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "listening on "); ok {
				lines <- url
				break
			}
		}
		io.Copy(io.Discard, stdout) // keep the pipe drained
	}()
	select {
	case url := <-lines:
		p.URL = url
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("%s %s exited before listening: %s", bin, strings.Join(args, " "), p.Stderr())
	case <-time.After(wait):
		p.Kill()
		return nil, fmt.Errorf("%s %s: no \"listening on\" line within %s: %s", bin, strings.Join(args, " "), wait, p.Stderr())
	}
}

// Kill stops the process (SIGKILL) and waits for it.
func (p *Proc) Kill() error {
	if p.Cmd.Process == nil {
		return errors.New("not started")
	}
	p.Cmd.Process.Kill()
	<-p.done
	return nil
}

// Stderr is what the process logged so far (its last 4 KiB).
func (p *Proc) Stderr() string {
	s := p.stderr.String()
	if len(s) > 4096 {
		s = "..." + s[len(s)-4096:]
	}
	return s
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
