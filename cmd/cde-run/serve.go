package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cde-rl/cde/internal/cli"
	"github.com/cde-rl/cde/serve"
)

func cmdServe(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runServe(ctx, args, os.Stdout, os.Stderr)
}

// runServe is cmdServe with its context and outputs given (tests).
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var lo serve.LoadOptions
	var o serve.Options
	fs.StringVar(&lo.Model, "model", "", "Hugging Face model directory")
	fs.StringVar(&lo.Adapter, "adapter", "", "with --model: a PEFT LoRA adapter directory merged into the weights")
	fs.StringVar(&lo.Checkpoint, "checkpoint", "", "cde run directory, checkpoint directory, or directory holding policy.gob")
	fs.IntVar(&lo.Step, "step", -1, "with --checkpoint RUN_DIR: the checkpoint step (default: the newest complete one)")
	fs.StringVar(&lo.Engine, "engine", "auto", "compute engine: auto, cpu, go or xla:...")
	fs.IntVar(&lo.MaxLen, "max-len", 0, "with --model: longest prompt + completion in tokens (default: max_position_embeddings, at most 8192)")
	addr := fs.String("addr", serve.DefaultAddr, "listen address HOST:PORT (port 0 picks a free one; an empty host is 127.0.0.1)")
	fs.StringVar(&o.Name, "name", "", "served model name (default: the directory's base name)")
	fs.StringVar(&o.ReloadDir, "reload-dir", "", "the only directory weight reload reads (default: none, reload off)")
	fs.StringVar(&o.Token, "token", "", "bearer token of weight reload (default: $CDE_SERVE_TOKEN)")
	fs.IntVar(&o.MaxN, "max-n", 1024, "largest n per request")
	fs.IntVar(&o.MaxRows, "max-batch", 4096, "largest prompts x n per request")
	fs.DurationVar(&o.RequestTimeout, "request-timeout", 10*time.Minute, "longest one completions request may take, waiting included; past it generation stops and the answer is 503")
	fs.IntVar(&o.MaxQueue, "max-queue", 64, "completions requests that may wait behind the running one; one more is answered 429 with Retry-After")
	fs.Usage = func() { fmt.Fprint(fs.Output(), serve.Help); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if (lo.Model == "") == (lo.Checkpoint == "") || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "cde-run serve: give exactly one of --model DIR and --checkpoint DIR, and no arguments")
		return 2
	}
	if o.Token == "" {
		o.Token = os.Getenv("CDE_SERVE_TOKEN")
	}
	if o.Name == "" {
		o.Name = filepath.Base(filepath.Clean(lo.Model + lo.Checkpoint))
	}
	log := cli.NewLogger(stderr, false)
	o.Log = log
	lo.Log = log
	err := func() error {
		if (o.ReloadDir == "") != (o.Token == "") {
			log.Warn().Msg("weight reload is off: it needs both --reload-dir and a token (--token or CDE_SERVE_TOKEN)")
		}
		m, err := serve.Load(lo)
		if err != nil {
			return err
		}
		defer m.Close()
		s, err := serve.New(m, o)
		if err != nil {
			return err
		}
		ln, err := serve.Listen(*addr, log)
		if err != nil {
			return err
		}
		log.Info().Str("model", o.Name).Str("engine", lo.Engine).Bool("reload", s.ReloadEnabled()).Msg("serving")
		fmt.Fprintf(stdout, "listening on http://%s\n", ln.Addr())
		err = serve.Serve(ctx, ln, s, time.Minute)
		log.Info().Msg("stopped")
		return err
	}()
	if err != nil {
		fmt.Fprintln(stderr, "cde-run serve:", err)
		return 1
	}
	return 0
}
