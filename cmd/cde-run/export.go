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

const exportHelp = `usage: cde-run export --run DIR [--step N] --out OUTDIR [--dtype f32|bf16] [--merge]

Writes the policy of a run that trained a Hugging Face model (model.hf) as a
model directory HF transformers, vLLM and SGLang load: config.json,
model.safetensors and the tokenizer and generation files of model.hf. The
checkpoint is step N, or the newest complete one. OUTDIR must not exist.

A run that trained LoRA adapters (model.lora) exports them as a PEFT
adapter directory (adapter_config.json, adapter_model.safetensors in
float32, PEFT's key names: base_model.model.<module>.lora_A.weight [r, in]
and .lora_B.weight [out, r]), which PeftModel.from_pretrained and
cde-run score|generate|serve --adapter load on model.hf; with --merge it
writes the merged model instead, W + (alpha / r) B A, as above.

`

func cmdExport(args []string) int {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	run := fs.String("run", "", "run directory (required)")
	step := fs.Int("step", -1, "checkpoint step (default: the newest complete one)")
	out := fs.String("out", "", "new output directory (required)")
	dtype := fs.String("dtype", "f32", "weight type: f32 (exact) or bf16 (full models only; adapters are f32)")
	merge := fs.Bool("merge", false, "a LoRA run: write the merged model instead of the PEFT adapter")
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
	lora, err := session.IsLoRARun(*run)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cde-run export:", err)
		return 1
	}
	log := cli.NewLogger(os.Stderr, cli.StderrIsTTY())
	switch {
	case *merge && !lora:
		fmt.Fprintln(os.Stderr, "cde-run export: --merge applies to a run that trained LoRA adapters (model.lora); this one trained the full model")
		return 2
	case lora && !*merge:
		if dt != safetensors.F32 {
			fmt.Fprintln(os.Stderr, "cde-run export: a PEFT adapter is written in f32; --dtype bf16 applies with --merge")
			return 2
		}
		err = session.ExportAdapter(*run, *step, *out, log)
	default:
		err = session.ExportHF(*run, *step, *out, dt, log)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cde-run export:", err)
		return 1
	}
	return 0
}
