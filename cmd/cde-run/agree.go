package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cde-rl/cde/bench"
	"github.com/cde-rl/cde/internal/cli"
)

const agreeSynopsis = "agree --a VERDICTS.json... --b VERDICTS.json... [--label-a NAME] [--label-b NAME] [--metric A_METRIC=B_METRIC]... [--later-wins] [--out FILE]"

const agreeHelp = `usage: cde-run ` + agreeSynopsis + `

Do two testbeds' verdicts agree? Reads the verdicts.json of benches on
testbed A (--a, repeatable: their claims are pooled) and on testbed B
(--b), pairs the claims that compare the same two arms on the same metric
(a metric of A is matched to B's --metric name when one is given, else to
the same name), and writes a Markdown report: per metric, each arm's
effect, interval and verdict on both testbeds, how many effects have the
same sign (with the probability of as many by chance), how many verdicts
that are conclusive on both agree, and the rank correlation of the effects
(Spearman's, with a 95% interval by Fisher's z and a permutation p value).
A claim in two files of one side is an error unless --later-wins, when
the later file's replaces it (a rerun of some arms) and the report lists
it. It judges nothing: every effect and verdict is read as written. See
docs/bench.md ("Do verdicts transfer?").

`

func cmdAgree(args []string) int { return runAgree(args, os.Stdout, os.Stderr) }

func runAgree(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agree", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var as, bs, metrics cli.StringList
	fs.Var(&as, "a", "a verdicts.json of testbed A (repeatable)")
	fs.Var(&bs, "b", "a verdicts.json of testbed B (repeatable)")
	fs.Var(&metrics, "metric", "A_METRIC=B_METRIC: judge A's metric against this metric of B (repeatable), e.g. val/mean/pass@256=val/mean/pass@32")
	labelA := fs.String("label-a", "A", "testbed A's name in the report")
	labelB := fs.String("label-b", "B", "testbed B's name in the report")
	laterWins := fs.Bool("later-wins", false, "a claim (same arms and metric) in two files of one side: the later file's replaces the earlier (a rerun of some arms); the report lists each replaced claim. Without it, that is an error")
	out := fs.String("out", "", "write the report to FILE (default: standard output)")
	fs.Usage = func() { fmt.Fprint(fs.Output(), agreeHelp); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	fail := func(err error) int { fmt.Fprintf(stderr, "cde-run agree: %v\n", err); return 1 }
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "cde-run agree: unexpected argument %q (files go after --a and --b)\n", fs.Arg(0))
		return 2
	}
	if len(as) == 0 || len(bs) == 0 {
		fmt.Fprintln(stderr, "cde-run agree: give at least one --a and one --b verdicts.json")
		return 2
	}
	mapping := map[string]string{}
	for _, m := range metrics {
		a, b, ok := strings.Cut(m, "=")
		if !ok || a == "" || b == "" {
			fmt.Fprintf(stderr, "cde-run agree: --metric %q: want A_METRIC=B_METRIC\n", m)
			return 2
		}
		mapping[a] = b
	}
	va, ra, err := bench.ReadVerdicts(*laterWins, as...)
	if err != nil {
		return fail(err)
	}
	vb, rb, err := bench.ReadVerdicts(*laterWins, bs...)
	if err != nil {
		return fail(err)
	}
	ag := bench.Agree(*labelA, *labelB, va, vb, mapping)
	ag.ReplacedA, ag.ReplacedB = ra, rb
	if len(ag.Metrics) == 0 {
		return fail(fmt.Errorf("no claim of A (%d) matches one of B (%d) by arms and metric; map metrics with --metric", len(va), len(vb)))
	}
	report := ag.Markdown()
	if *out == "" {
		_, err = io.WriteString(stdout, report)
	} else {
		err = os.WriteFile(*out, []byte(report), 0o644)
	}
	if err != nil {
		return fail(err)
	}
	return 0
}
