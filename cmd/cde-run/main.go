// Command cde-run trains, evaluates and inspects RLVR runs with pluggable
// exploration strategies.
//
//	cde-run train     [--config FILE] [--set key=value]... [--run-dir DIR [--overwrite]] [--resume DIR [--set key=value]...] [--dump-rollouts DIR] [--summary stderr|none] [--print-config]
//	cde-run pretrain  [--config FILE] [--set key=value]... [--out DIR]
//	cde-run eval      [--config FILE] [--set key=value]... [--checkpoint DIR | --run DIR]
//	cde-run shape     --config FILE --in ROLLOUT.json
//	cde-run plugins   check PATH
//	cde-run bench     -c BENCH.yaml [--jobs N]
//	cde-run tokenize  --model DIR [--decode]
//	cde-run verify
//	cde-run score     --model DIR
//	cde-run export    --run DIR --out HFDIR
//	cde-run generate  --model DIR
//	cde-run serve     (--model DIR | --checkpoint DIR) [--addr HOST:PORT] [--reload-dir DIR]
//	cde-run board     [--addr HOST:PORT] [--spec BENCH.yaml]... [DIR...]
//	cde-run version   (or --version)
//
// Every command has --help.
package main

import (
	"fmt"
	"os"

	"github.com/cde-rl/cde/internal/cli"
)

const usage = `cde-run: RLVR training with pluggable exploration strategies

Commands:
  train      train a policy (no flags: GRPO on the built-in arithmetic task)
  pretrain   make the supervised base policy that RL starts from
  eval       evaluate a checkpoint on the held-out sets (avg@k, pass@k)
  shape      apply a config's algorithm and strategies to a recorded batch
  plugins    check an out-of-process strategy plugin (plugins check PATH)
  bench      run arms x seeds head to head and write a report (bench -c BENCH.yaml)
  tokenize   token ids of JSON strings with a model's tokenizer.json (--decode reverses)
  verify     check {"response", "answer"} lines with the math verifier
  score      log-probs of {"prompt", "response"} lines under a Hugging Face model
  export     write a run's Hugging Face policy as a model directory (safetensors)
  generate   sample completions of a Hugging Face model
  serve      serve a policy over HTTP (OpenAI-compatible completions, weight reload)
  board      a local web page of runs and benches, live while they train
  agree      do two testbeds' bench verdicts agree? (signs, verdicts, rank correlation)
  version    the binary's module version and the commit it was built from

Run "cde-run COMMAND --help" for a command's flags. Every command also
takes --log-level debug|info|warn|error (default info).
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	cmds := map[string]func([]string) int{
		"train":    cmdTrain,
		"pretrain": cmdPretrain,
		"eval":     cmdEval,
		"shape":    cmdShape,
		"plugins":  cmdPlugins,
		"bench":    cmdBench,
		"tokenize": cmdTokenize,
		"verify":   cmdVerify,
		"score":    cmdScore,
		"export":   cmdExport,
		"generate": cmdGenerate,
		"serve":    cmdServe,
		"board":    cmdBoard,
		"agree":    cmdAgree,
		"version":  cmdVersion,
	}
	name := os.Args[1]
	if name == "-h" || name == "--help" || name == "help" {
		fmt.Print(usage)
		return
	}
	if name == "--version" || name == "-version" {
		name = "version"
	}
	f, ok := cmds[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "cde-run: unknown command %q\n\n%s", name, usage)
		os.Exit(2)
	}
	args, level, err := cli.TakeLogLevel(os.Args[2:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "cde-run %s: %v\n", name, err)
		os.Exit(2)
	}
	cli.LogLevel = level
	os.Exit(f(args))
}
