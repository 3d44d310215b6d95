package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/internal/cli"
	"github.com/cde-rl/cde/internal/readcap"
	"github.com/cde-rl/cde/session"
	"github.com/cde-rl/cde/trainer"
	"github.com/rs/zerolog"
)

func cmdShape(args []string) int {
	fs := cli.NewFlagSet("shape", "shape --config FILE --in ROLLOUT.json [--set key=value]...")
	var cf cli.ConfigFlags
	cf.Register(fs)
	in := fs.String("in", "", "rollout file (docs/rollout-format.md), e.g. from train --dump-rollouts")
	if code, done := cli.Parse(fs, args); done {
		return code
	}
	cfg, err := cf.Load()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cde-run shape:", err)
		return 1
	}
	out, err := shape(cfg, *in, zerolog.New(os.Stderr))
	if err != nil {
		fmt.Fprintln(os.Stderr, "cde-run shape:", err)
		return 1
	}
	os.Stdout.Write(out)
	return 0
}

// shape applies the config's algorithm and strategies to a recorded batch.
func shape(cfg *trainer.Config, in string, log zerolog.Logger) ([]byte, error) {
	if in == "" {
		return nil, fmt.Errorf("--in ROLLOUT.json is required")
	}
	// Capped here, not in core (which imports the standard library
	// only): /dev/zero or a wrong huge file is refused by name.
	data, err := readcap.Rollout.ReadFile(in)
	if err != nil {
		return nil, err
	}
	r, err := core.ReadRollout(bytes.NewReader(data), in)
	if err != nil {
		return nil, err
	}
	return shapeRollout(cfg, r, in, log)
}

// shapeRollout is shape on a rollout already read from the file in.
func shapeRollout(cfg *trainer.Config, r *core.Rollout, in string, log zerolog.Logger) ([]byte, error) {
	o, err := session.Shape(cfg, r, in, log)
	if err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(o, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}
