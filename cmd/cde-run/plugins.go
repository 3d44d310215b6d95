package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"gopkg.in/yaml.v3"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/core/strategytest"
	"github.com/cde-rl/cde/plugins"
)

const pluginsUsage = `usage: cde-run plugins check PATH [flags]

Starts the plugin at PATH, runs the strategy conformance kit against it
(core/strategytest: Needs, Hooks, Undeclared, Determinism, State; every
instance is a fresh plugin process) and prints a verdict. Exit status 0 when
the plugin conforms, 1 when a check fails, 2 on usage errors.

Flags:
`

// cmdPlugins implements `cde-run plugins check PATH`.
func cmdPlugins(args []string) int {
	fs := flag.NewFlagSet("plugins check", flag.ContinueOnError)
	params := fs.String("params", "", "the plugin's params as YAML or JSON, e.g. '{beta: 0.5}'")
	algoName := fs.String("algorithm", "grpo", "algorithm name given to the plugin and the kit (one of: "+strings.Join(core.Algorithms(), ", ")+")")
	algoParams := fs.String("algorithm-params", "", "the algorithm's keys as YAML or JSON, e.g. '{k: 1}' for grpo_passk (the kit's groups may hold one response)")
	sum := fs.String("sha256", "", "pin the binary's SHA-256")
	steps := fs.Int("steps", 3, "steps per check")
	callTimeout := fs.Duration("call-timeout", plugins.DefaultCallTimeout, "per-call deadline")
	startTimeout := fs.Duration("start-timeout", plugins.DefaultStartTimeout, "start and handshake deadline")
	verbose := fs.Bool("v", false, "show the plugin's logs")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), pluginsUsage)
		fs.PrintDefaults()
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fs.SetOutput(os.Stdout)
		fs.Usage()
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] != "check" {
		fmt.Fprintf(os.Stderr, "cde-run plugins: unknown subcommand %q (known: check)\n", args[0])
		return 2
	}
	if err := fs.Parse(args[1:]); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	path := ""
	if fs.NArg() > 0 {
		path = fs.Arg(0)
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			return 2
		}
	}
	if path == "" || fs.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "cde-run plugins check: want exactly one PATH")
		return 2
	}
	var pm map[string]any
	if *params != "" {
		if err := yaml.Unmarshal([]byte(*params), &pm); err != nil {
			fmt.Fprintf(os.Stderr, "cde-run plugins check: --params: %v\n", err)
			return 2
		}
	}
	var ap map[string]any
	if *algoParams != "" {
		if err := yaml.Unmarshal([]byte(*algoParams), &ap); err != nil {
			fmt.Fprintf(os.Stderr, "cde-run plugins check: --algorithm-params: %v\n", err)
			return 2
		}
	}
	algo, err := core.NewAlgorithm(*algoName, core.NewParams("algorithm", ap))
	if err != nil {
		fmt.Fprintf(os.Stderr, "cde-run plugins check: --algorithm: %v\n", err)
		return 2
	}
	log := zerolog.Nop()
	if *verbose {
		log = newLogger(os.Stderr, stderrIsTTY())
	}
	cfg := plugins.Config{Path: path, Params: pm, ParamsPath: "params", Algorithm: algo, SHA256: *sum,
		StartTimeout: *startTimeout, CallTimeout: *callTimeout, Log: log}
	// Start one instance first: a plugin that does not start gets that
	// error, not five failed checks.
	first, err := plugins.Open(cfg)
	if err != nil {
		fmt.Printf("FAIL %s: %v\n", path, err)
		return 1
	}
	pl, _ := plugins.Of(first)
	fmt.Printf("plugin %s (%s): hooks %s, needs %+v\n", first.Name(), path, pl.Hooks(), first.Needs())
	first.(core.Closer).Close()
	newStrategy := func() core.Strategy {
		s, err := plugins.Open(cfg)
		if err != nil {
			panic(err)
		}
		return s
	}
	opts := strategytest.Options{Algorithm: *algoName, AlgorithmParams: ap, Steps: *steps}
	failed := 0
	for _, c := range strategytest.Checks() {
		start := time.Now()
		err := c.Func(newStrategy, opts)
		if err != nil {
			failed++
			fmt.Printf("  FAIL %-12s %s\n", c.Name, strings.ReplaceAll(err.Error(), "\n", "\n       "))
			continue
		}
		fmt.Printf("  ok   %-12s %s\n", c.Name, time.Since(start).Round(time.Millisecond))
	}
	if failed > 0 {
		fmt.Printf("FAIL: %s fails %d of %d conformance checks\n", path, failed, len(strategytest.Checks()))
		return 1
	}
	fmt.Printf("PASS: %s conforms to the strategy contract (%d checks)\n", path, len(strategytest.Checks()))
	return 0
}
