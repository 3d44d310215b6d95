package plugins

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// pipeGrace is how long the host keeps reading a plugin's stdout and
// stderr after its process exited or was killed. Once every process of the
// plugin's group is dead the pipes end at once (EOF); only a process that
// left the group (setsid) can hold them open longer, and the host then
// stops reading instead of waiting for it.
const pipeGrace = time.Second

// killWait bounds go-plugin's own cleanup (Client.Kill: closing the
// connection, a graceful wait of up to 2 s, then waiting for its reader
// goroutines) after the process group was killed.
const killWait = pipeGrace + 4*time.Second

// maxStdoutLine bounds one line read from the plugin's stdout; the
// handshake line (with its base64 certificate) is under 2 KB.
const maxStdoutLine = 64 << 10

// procRunner starts and stops a plugin process for go-plugin (it is the
// runner.Runner that ClientConfig.RunnerFunc returns), in place of
// go-plugin's exec runner, which
//
//   - waits, when killing, until the plugin's stdout and stderr pipes end,
//     and a child that inherited them (sleep 1000 & in a wrapper script)
//     keeps them open forever: cde-run then hung in start-up cleanup;
//   - kills only the plugin process, not the children it started;
//   - drops whatever the plugin writes to its original stdout (fd 1) after
//     the handshake, and reports a line printed before the handshake as
//     "Unrecognized remote plugin message";
//   - panics (and so crashes cde-run) on a stderr line such as
//     {"@message": 5}, a JSON log line whose hclog fields are not strings,
//     and drops a log line whose @timestamp is not in hclog's format.
//
// This runner starts the plugin as the leader of its own process group
// (setProcAttrs), kills the whole group when the plugin exits or is
// killed, and stops reading its pipes pipeGrace after that; it hands
// go-plugin only the first stdout line (the handshake) and logs the rest,
// and it hands go-plugin stderr lines with the hclog fields made safe.
type procRunner struct {
	cmd   *exec.Cmd
	log   zerolog.Logger
	label string // the plugin's name in log lines

	outR, errR *os.File       // the host's ends of the plugin's stdout and stderr
	stdout     *io.PipeReader // what go-plugin reads: the first line of outR, then EOF
	stdoutW    *io.PipeWriter
	stderr     *io.PipeReader // what go-plugin reads: errR's lines, made safe
	stderrW    *io.PipeWriter
	pid        int
	watch      io.Closer     // the group's watchdog (watchGroup), nil without one
	done       chan struct{} // closed once the process is reaped
	waitErr    error
	abandon    sync.Once

	mu       sync.Mutex
	reaped   bool
	first    string // the first line the plugin printed on stdout
	hasFirst bool
}

func newProcRunner(cmd *exec.Cmd, log zerolog.Logger, label string) *procRunner {
	r := &procRunner{cmd: cmd, log: log, label: label, done: make(chan struct{})}
	r.stdout, r.stdoutW = io.Pipe()
	r.stderr, r.stderrW = io.Pipe()
	return r
}

// Start starts the process with fresh pipes for stdout and stderr and no
// stdin.
func (r *procRunner) Start(context.Context) error {
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return err
	}
	r.cmd.Stdin = nil
	r.cmd.Stdout, r.cmd.Stderr = outW, errW
	setProcAttrs(r.cmd)
	err = r.cmd.Start()
	outW.Close() // the plugin holds the write ends now
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		r.stdoutW.Close()
		r.stderrW.Close()
		return err
	}
	r.outR, r.errR, r.pid = outR, errR, r.cmd.Process.Pid
	// Before r.wait can kill the group: a watchdog that joins it later
	// would find the group gone, or a new one under the same id.
	if r.watch, err = watchGroup(r.pid); err != nil {
		r.log.Warn().Err(err).Str("plugin", r.label).Msg("no watchdog for the plugin's process group: if cde-run is killed with kill -9, the children the plugin started outlive it")
	}
	go r.wait()
	go r.pumpStdout()
	go r.pumpStderr()
	return nil
}

// wait reaps the process; once it has exited, the rest of its group is
// killed first (children must not outlive the plugin).
func (r *procRunner) wait() {
	waitExited(r.pid)
	r.mu.Lock()
	killGroup(r.pid)
	if r.watch != nil {
		r.watch.Close() // killed with the group already
	}
	r.waitErr = r.cmd.Wait()
	r.reaped = true
	r.mu.Unlock()
	close(r.done)
	r.abandonPipes()
}

// abandonPipes closes the host's ends of the plugin's pipes pipeGrace
// from now (once), which ends the readers even if a process outside the
// group still holds the write ends.
func (r *procRunner) abandonPipes() {
	r.abandon.Do(func() {
		time.AfterFunc(pipeGrace, func() {
			r.outR.Close()
			r.errR.Close()
		})
	})
}

// pumpStdout passes the first stdout line to go-plugin (the handshake, or
// what the plugin printed instead) and logs every later line: after the
// handshake a Go plugin's os.Stdout is forwarded over gRPC, but writes to
// fd 1 itself (a child process, C code) arrive here.
func (r *procRunner) pumpStdout() {
	defer r.stdoutW.Close()
	br := bufio.NewReaderSize(r.outR, 4096)
	for first := true; ; first = false {
		line, err := readLine(br, maxStdoutLine)
		if err != nil && line == "" {
			return
		}
		if first {
			r.mu.Lock()
			r.first, r.hasFirst = line, true
			r.mu.Unlock()
			if _, werr := r.stdoutW.Write([]byte(line + "\n")); werr != nil {
				return
			}
		} else if s := strings.TrimRight(line, "\r"); s != "" {
			relayLine(r.log, r.label, "stdout", s)
		}
		if err != nil {
			return
		}
	}
}

// pumpStderr passes the plugin's stderr to go-plugin line by line, each
// made safe by safeLogLine. go-plugin logs hclog JSON lines at their level,
// lines tagged [INFO], [WARN]... at that level and a panic's lines as
// errors, and every other line at debug level, which the host does not
// show: those lines (a C library's or a child's messages, a non-Go
// plugin's print to stderr) are logged here instead, at info level with
// "stream":"stderr". go-plugin still gets them all (for the stderr tail
// quoted in crash messages).
func (r *procRunner) pumpStderr() {
	defer r.stderrW.Close()
	defer flushDropped(r.log, r.label)
	br := bufio.NewReaderSize(r.errR, 4096)
	inPanic := false
	for {
		line, err := readLine(br, maxStderrLine)
		if err != nil && line == "" {
			return
		}
		line = safeLogLine(line)
		if shown := goPluginShows(line, &inPanic); !shown {
			if s := strings.TrimSpace(line); s != "" {
				relayLine(r.log, r.label, "stderr", s)
			}
		}
		if _, werr := r.stderrW.Write([]byte(line + "\n")); werr != nil {
			return
		}
		if err != nil {
			return
		}
	}
}

// goPluginShows mirrors go-plugin's reading of a stderr line (its
// Client.logStderr): whether it logs the line at a level the host shows,
// that is a JSON object with an @level, a line tagged [INFO], [WARN] or
// [ERROR] ([TRACE] and [DEBUG] count as shown: they are debug output on
// purpose), or a line of a panic (from a line starting "panic: " or
// "fatal error: " on, every untagged line).
func goPluginShows(line string, inPanic *bool) bool {
	var m map[string]any
	if json.Unmarshal([]byte(line), &m) == nil && m != nil {
		_, hasLevel := m["@level"]
		return hasLevel
	}
	for _, tag := range []string{"[TRACE]", "[DEBUG]", "[INFO]", "[WARN]", "[ERROR]"} {
		if strings.HasPrefix(line, tag) {
			return true
		}
	}
	if strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: ") {
		*inPanic = true
	}
	return *inPanic
}

// maxStderrLine bounds one stderr line (a longer one is cut).
const maxStderrLine = 1 << 20

// hclogTime is the @timestamp layout go-plugin parses in a plugin's JSON
// log lines.
const hclogTime = "2006-01-02T15:04:05.000000Z07:00"

// safeLogLine returns line unchanged unless it is a JSON object whose
// hclog fields go-plugin would choke on: a non-string @message or @level
// becomes its JSON text as a string, and an @timestamp that is not a
// string in hclog's layout is dropped (go-plugin would otherwise drop the
// whole line to debug level).
func safeLogLine(line string) string {
	if !strings.HasPrefix(strings.TrimSpace(line), "{") {
		return line
	}
	var m map[string]any
	if json.Unmarshal([]byte(line), &m) != nil || m == nil {
		return line
	}
	changed := false
	for _, k := range []string{"@message", "@level"} {
		if v, ok := m[k]; ok {
			if _, isStr := v.(string); !isStr {
				b, _ := json.Marshal(v)
				m[k] = string(b)
				changed = true
			}
		}
	}
	if v, ok := m["@timestamp"]; ok {
		s, isStr := v.(string)
		if _, err := time.Parse(hclogTime, s); !isStr || err != nil {
			delete(m, "@timestamp")
			changed = true
		}
	}
	if !changed {
		return line
	}
	b, err := json.Marshal(m)
	if err != nil {
		return line
	}
	return string(b)
}

// readLine reads one line without its newline, keeping at most max bytes
// of it.
func readLine(br *bufio.Reader, max int) (string, error) {
	var b []byte
	for {
		chunk, isPrefix, err := br.ReadLine()
		if len(b) < max {
			b = append(b, chunk[:min(len(chunk), max-len(b))]...)
		}
		if err != nil || !isPrefix {
			return string(b), err
		}
	}
}

// notHandshake returns the first line the plugin printed on stdout when it
// is not a go-plugin handshake line
// (CORE-VERSION|APP-VERSION|NETWORK|ADDRESS|PROTOCOL|...).
func (r *procRunner) notHandshake() (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.hasFirst {
		return "", false
	}
	return r.first, !isHandshakeLine(r.first)
}

// firstLine returns the first line the plugin printed on stdout (ok false
// when it printed none, so far or ever).
func (r *procRunner) firstLine() (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.first, r.hasFirst
}

func isHandshakeLine(line string) bool {
	parts := strings.Split(strings.TrimSpace(line), "|")
	if len(parts) < 4 {
		return false
	}
	for _, p := range parts[:2] {
		if _, err := strconv.ParseUint(p, 10, 32); err != nil {
			return false
		}
	}
	return true
}

// Kill sends SIGKILL to the plugin's process group (unless the plugin was
// already reaped: its group was killed then) and stops reading its pipes
// pipeGrace later. It does not wait.
func (r *procRunner) Kill(context.Context) error {
	if r.cmd.Process == nil {
		return nil
	}
	r.mu.Lock()
	if !r.reaped {
		killGroup(r.pid)
		if err := r.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			r.log.Debug().Err(err).Str("plugin", r.label).Msg("killing the plugin process")
		}
	}
	r.mu.Unlock()
	r.abandonPipes()
	return nil
}

// Wait waits until the process is reaped.
func (r *procRunner) Wait(context.Context) error {
	<-r.done
	return r.waitErr
}

// Stdout is what go-plugin reads for the handshake.
func (r *procRunner) Stdout() io.ReadCloser { return r.stdout }

// Stderr is the plugin's stderr (its log lines), made safe.
func (r *procRunner) Stderr() io.ReadCloser { return r.stderr }

// Name is the executable's path.
func (r *procRunner) Name() string { return r.cmd.Path }

// ID is the process id ("" before Start).
func (r *procRunner) ID() string {
	if r.pid == 0 {
		return ""
	}
	return strconv.Itoa(r.pid)
}

// Diagnose adds nothing: the host words start-up errors itself.
func (r *procRunner) Diagnose(context.Context) string { return "" }

// PluginToHost: host and plugin share the file system and network.
func (r *procRunner) PluginToHost(network, address string) (string, string, error) {
	return network, address, nil
}

// HostToPlugin: host and plugin share the file system and network.
func (r *procRunner) HostToPlugin(network, address string) (string, string, error) {
	return network, address, nil
}
