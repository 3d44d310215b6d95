package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/cde-rl/cde/session"
	"github.com/cde-rl/cde/tasks"
)

const generateHelp = `usage: cde-run generate --model DIR [--n N] [--temperature T] [--max-tokens M] [--engine E] [--pjrt-plugin P] < prompts.jsonl

Samples completions of a Hugging Face model (Llama, Qwen2, Qwen3, Mistral),
for a quick look at a checkpoint. Each input line is a JSON string, the raw
prompt (no special tokens are added: write the chat template's markup in
it); each output line is {"prompt": ..., "completions": [{"text", "tokens",
"truncated"}, ...]}. Sampling stops at the model's stop ids, by Hugging
Face's rule: generation_config.json's eos_token_id, else config.json's,
else tokenizer_config.json's eos_token.

`

func cmdGenerate(args []string) int {
	fs := flag.NewFlagSet("generate", flag.ContinueOnError)
	o := session.GenerateOptions{}
	fs.StringVar(&o.Model, "model", "", "Hugging Face model directory (required)")
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
	if o.Model == "" || fs.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "cde-run generate: --model DIR is required and takes no arguments")
		return 2
	}
	var prompts []string
	dec := json.NewDecoder(os.Stdin)
	for line := 1; dec.More(); line++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			fmt.Fprintf(os.Stderr, "cde-run generate: stdin value %d: want a JSON string: %v\n", line, err)
			return 1
		}
		// encoding/json would turn invalid UTF-8 into U+FFFD silently.
		if i := tasks.InvalidUTF8(raw); i >= 0 {
			fmt.Fprintf(os.Stderr, "cde-run generate: stdin value %d: invalid UTF-8 at byte %d of the value\n", line, i+1)
			return 1
		}
		var p string
		if err := json.Unmarshal(raw, &p); err != nil {
			fmt.Fprintf(os.Stderr, "cde-run generate: stdin value %d: want a JSON string: %v\n", line, err)
			return 1
		}
		prompts = append(prompts, p)
	}
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
