package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/cde-rl/cde/bench"
	"github.com/cde-rl/cde/board"
	"github.com/cde-rl/cde/internal/cli"
)

const boardSynopsis = "board [--addr HOST:PORT] [--spec BENCH.yaml]... [--stale DURATION] [DIR...]"

const boardHelp = `usage: cde-run ` + boardSynopsis + `

A local web page for the runs and benches under the directories DIR
(default: runs), live while they train: a run's metrics against the step,
several runs overlaid; a bench's arm x seed grid (pending, running with its
step and ETA, done, failed), curves with a band over seeds per arm, the
results table, the claims' verdicts (provisional until the bench is done)
and pass@k. The page updates itself every 2 s. Read-only: it serves only
what lies under the directories named (GET only; no dot-dot or symbolic
link leads out), and listens on 127.0.0.1 unless --addr names another host.
A bench's full grid and live verdicts need its bench file: a shipped preset
named in its commands.txt is found by itself, any other is given with
--spec. See docs/board.md.

`

func cmdBoard(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runBoard(ctx, args, os.Stdout, os.Stderr)
}

// runBoard is cmdBoard with its context and outputs given (tests).
func runBoard(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("board", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", board.DefaultAddr, "listen address HOST:PORT (port 0 picks a free one; an empty host is 127.0.0.1; another host than loopback shows the runs to anyone who can reach it)")
	var specs cli.StringList
	fs.Var(&specs, "spec", "a bench file (repeatable) for the benches whose commands.txt names a file of that name, or whose directory has its name: their whole arm x seed grid and live verdicts (shipped presets are found without it)")
	stale := fs.Duration("stale", 2*time.Minute, "an unfinished run whose lock is not seen held counts as running while its metrics.jsonl was written this recently")
	fs.Usage = func() { fmt.Fprint(fs.Output(), boardHelp); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	dirs := fs.Args()
	if len(dirs) == 0 {
		dirs = []string{"runs"}
	}
	log := cli.NewLogger(stderr, false)
	o := board.Options{Dirs: dirs, StaleAfter: *stale}
	for _, f := range specs {
		spec, err := bench.Load(f)
		if err != nil {
			fmt.Fprintln(stderr, "cde-run board: --spec:", err)
			return 2
		}
		o.Specs = append(o.Specs, spec)
	}
	host, port, err := net.SplitHostPort(*addr)
	if err != nil {
		fmt.Fprintf(stderr, "cde-run board: --addr %q: want HOST:PORT: %v\n", *addr, err)
		return 2
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if ip := net.ParseIP(host); !(host == "localhost" || (ip != nil && ip.IsLoopback())) {
		log.Warn().Str("host", host).Msg("listening beyond loopback: anyone who can reach this port can read the runs and benches served")
		o.AnyHost = true
	}
	s, err := board.New(o)
	if err != nil {
		fmt.Fprintln(stderr, "cde-run board:", err)
		return 1
	}
	defer s.Close()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		fmt.Fprintln(stderr, "cde-run board:", err)
		return 1
	}
	fmt.Fprintf(stdout, "board of %s on http://%s/\n", strings.Join(dirs, ", "), ln.Addr())
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 2 * time.Minute, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		fmt.Fprintln(stderr, "cde-run board:", err)
		return 1
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	return 0
}
