package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/cde-rl/cde/internal/cli"
	"github.com/cde-rl/cde/session"
)

const generateHelp = `usage: cde-run generate (--model DIR [--adapter PEFTDIR] | --run DIR [--step N]) [--logprobs] [--n N] [--temperature T] [--max-tokens M] [--engine E] [--pjrt-plugin P] < prompts.jsonl

Samples completions of a Hugging Face model (Llama, Qwen2, Qwen3, Mistral),
for a quick look at a checkpoint. Each input line is a JSON string, the raw
prompt (no special tokens are added: write the chat template's markup in
it); each output line is {"prompt": ..., "completions": [{"text", "tokens",
"truncated"}, ...]}, with --logprobs also "token_ids" and "logprobs". Sampling stops at the model's stop ids, by Hugging
Face's rule: generation_config.json's eos_token_id, else config.json's,
else tokenizer_config.json's eos_token. --adapter merges a PEFT LoRA
adapter into DIR's weights (W + (lora_alpha / r) B A), as score does.

`

func cmdGenerate(args []string) int {
	fs := flag.NewFlagSet("generate", flag.ContinueOnError)
	o := session.GenerateOptions{}
	fs.StringVar(&o.Model, "model", "", "Hugging Face model directory (or --run)")
	run := fs.String("run", "", "a run that trained a Hugging Face model: its checkpoint, exported to a temporary directory")
	step := fs.Int("step", -1, "with --run: the checkpoint step (default: the newest complete one)")
	fs.StringVar(&o.Adapter, "adapter", "", "with --model: a PEFT LoRA adapter directory merged into the weights")
	fs.BoolVar(&o.LogProbs, "logprobs", false, "add each completion's token_ids and logprobs (at the sampling temperature)")
	fs.StringVar(&o.Engine, "engine", "auto", "compute engine: auto, cpu, go, or xla:cpu, xla:cuda, xla:tpu in a build with -tags xla (docs/engine.md)")
	fs.StringVar(&o.PJRTPlugin, "pjrt-plugin", "", "the xla:* engines' PJRT plugin, a file or a directory (backend.pjrt_plugin; default: the standard search)")
	fs.IntVar(&o.N, "n", 1, "completions per prompt")
	fs.Float64Var(&o.Temperature, "temperature", 1, "sampling temperature, in (0, 10]")
	fs.IntVar(&o.MaxTokens, "max-tokens", 64, "new tokens per completion, at most")
	fs.Uint64Var(&o.Seed, "seed", 1, "sampling seed")
	fs.Usage = func() { fmt.Fprint(fs.Output(), generateHelp); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "cde-run generate: takes no arguments")
		return 2
	}
	if o.Adapter != "" && o.Model == "" {
		fmt.Fprintln(os.Stderr, "cde-run generate: --adapter applies to --model (a run's adapters are in its checkpoint)")
		return 2
	}
	prompts, err := cli.ReadJSONStrings(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cde-run generate:", err)
		return 1
	}
	dir, done, err := session.ModelDir(o.Model, *run, *step, cli.NewLogger(os.Stderr, cli.StderrIsTTY()))
	if err != nil {
		fmt.Fprintln(os.Stderr, "cde-run generate:", err)
		return 1
	}
	defer done()
	o.Model = dir
	outs, err := session.GenerateHF(o, prompts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cde-run generate:", err)
		return 1
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for i, p := range prompts {
		enc.Encode(map[string]any{"prompt": p, "completions": outs[i]})
	}
	os.Stdout.Write(buf.Bytes())
	return 0
}
