package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/cde-rl/cde/backends/xla/safetensors"
	"github.com/cde-rl/cde/internal/cli"
	"github.com/cde-rl/cde/session"
)

const exportHelp = `usage: cde-run export --run DIR [--step N] --out HFDIR [--dtype f32|bf16]

Writes the policy of a run that trained a Hugging Face model (model.hf) as a
model directory HF transformers, vLLM and SGLang load: config.json,
model.safetensors and the tokenizer and generation files of model.hf. The
checkpoint is step N, or the newest complete one. HFDIR must not exist.

`

func cmdExport(args []string) int {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	run := fs.String("run", "", "run directory (required)")
	step := fs.Int("step", -1, "checkpoint step (default: the newest complete one)")
	out := fs.String("out", "", "new output directory (required)")
	dtype := fs.String("dtype", "f32", "weight type: f32 (exact) or bf16")
	fs.Usage = func() { fmt.Fprint(fs.Output(), exportHelp); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	dt := safetensors.DType(strings.ToUpper(*dtype))
	if *run == "" || *out == "" || fs.NArg() > 0 || (dt != safetensors.F32 && dt != safetensors.BF16) {
		fmt.Fprintln(os.Stderr, "cde-run export: --run and --out are required, --dtype is f32 or bf16")
		return 2
	}
	if err := session.ExportHF(*run, *step, *out, dt, cli.NewLogger(os.Stderr, cli.StderrIsTTY())); err != nil {
		fmt.Fprintln(os.Stderr, "cde-run export:", err)
		return 1
	}
	return 0
}
