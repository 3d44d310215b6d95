package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/rs/zerolog"
	"go.yaml.in/yaml/v3"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/core/strategytest"
	"github.com/cde-rl/cde/internal/cli"
	"github.com/cde-rl/cde/plugins"
	"github.com/cde-rl/cde/plugins/skeleton"
)

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
		fmt.Fprint(fs.Output(), plugins.Usage)
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
	if args[0] == "new" {
		return cmdPluginsNew(args[1:])
	}
	if args[0] != "check" {
		fmt.Fprintf(os.Stderr, "cde-run plugins: unknown subcommand %q (known: check, new)\n", args[0])
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
		log = cli.NewLogger(os.Stderr, cli.StderrIsTTY())
	}
	cfg := plugins.Config{Path: path, Params: pm, ParamsPath: "params", Algorithm: algo, SHA256: *sum,
		StartTimeout: *startTimeout, CallTimeout: *callTimeout, Log: log}
	if !plugins.Check(os.Stdout, cfg, strategytest.Options{Algorithm: *algoName, AlgorithmParams: ap, Steps: *steps}) {
		return 1
	}
	return 0
}

// cmdPluginsNew implements `cde-run plugins new`.
func cmdPluginsNew(args []string) int {
	fs := flag.NewFlagSet("plugins new", flag.ContinueOnError)
	lang := fs.String("lang", "", "the plugin's language: "+strings.Join(skeleton.Langs, ", "))
	name := fs.String("name", "", "the strategy's name, metrics explore/NAME/... (default: DIR's base name)")
	py := fs.String("python", "", "the interpreter a Python plugin's shebang names (default: the first python3 that imports grpc, google.protobuf and numpy)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), plugins.Usage)
		fs.PrintDefaults()
	}
	// Flags may come before or after DIR.
	var dir string
	rest := args
	for len(rest) > 0 {
		if err := fs.Parse(rest); err != nil {
			if err == flag.ErrHelp {
				return 0
			}
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		if dir != "" {
			fmt.Fprintln(os.Stderr, "cde-run plugins new: want exactly one DIR")
			return 2
		}
		dir, rest = fs.Arg(0), fs.Args()[1:]
	}
	if dir == "" || *lang == "" {
		fmt.Fprintln(os.Stderr, "cde-run plugins new: want --lang python|go|node and one DIR")
		return 2
	}
	files, err := skeleton.Write(*lang, dir, skeleton.Options{Name: *name, Python: *py})
	if err != nil {
		fmt.Fprintln(os.Stderr, "cde-run plugins new:", err)
		return 1
	}
	for _, f := range files {
		fmt.Println("wrote", f)
	}
	fmt.Println(skeleton.NextSteps(*lang, dir, files))
	return 0
}
