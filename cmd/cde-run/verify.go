package main

import (
	"fmt"
	"io"
	"os"

	"github.com/cde-rl/cde/internal/cli"
	"github.com/cde-rl/cde/tasks"
)

// cmdVerify implements `cde-run verify`.
func cmdVerify(args []string) int {
	for _, a := range args {
		if a == "-h" || a == "--help" || a == "-help" || a == "help" {
			fmt.Print(tasks.VerifyHelp)
			return 0
		}
	}
	if len(args) > 0 {
		fmt.Fprintf(os.Stderr, "cde-run verify: unexpected argument %q\n\n%s", args[0], tasks.VerifyHelp)
		return 2
	}
	if err := runVerify(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "cde-run verify: %v\n", err)
		return 1
	}
	return 0
}

// runVerify answers each JSONL line of in with one JSONL line on out.
func runVerify(in io.Reader, out io.Writer) error {
	v := tasks.NewMathVerifier()
	return cli.ServeLines(in, out, func(line []byte) (any, error) { return tasks.VerifyJSONLine(v, line) })
}
