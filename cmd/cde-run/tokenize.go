package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/cde-rl/cde/internal/cli"
	"github.com/cde-rl/cde/tokenizer"
)

func cmdTokenize(args []string) int {
	fs := flag.NewFlagSet("tokenize", flag.ContinueOnError)
	model := fs.String("model", "", "model directory holding tokenizer.json or tokenizer.json.gz (required)")
	decode := fs.Bool("decode", false, "read JSON arrays of ids, write JSON strings")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), tokenizer.CLIHelp)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "cde-run tokenize: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *model == "" {
		fmt.Fprintln(os.Stderr, "cde-run tokenize: --model DIR is required")
		return 2
	}
	tok, err := tokenizer.Load(*model)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cde-run tokenize:", err)
		return 1
	}
	if err := cli.ServeLines(os.Stdin, os.Stdout, func(line []byte) (any, error) { return tok.JSONLine(line, *decode) }); err != nil {
		fmt.Fprintln(os.Stderr, "cde-run tokenize:", err)
		return 1
	}
	return 0
}
