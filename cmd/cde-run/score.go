package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/cde-rl/cde/backends/xla"
	"github.com/cde-rl/cde/internal/cli"
	"github.com/cde-rl/cde/session"
	"github.com/cde-rl/cde/tokenizer"
)

const scoreHelp = `usage: cde-run score (--model DIR [--adapter PEFTDIR] | --run DIR [--step N]) [--engine E] [--pjrt-plugin P] < in.jsonl > out.jsonl

Scores responses with a Hugging Face causal LM (LlamaForCausalLM,
Qwen2ForCausalLM, Qwen3ForCausalLM, MistralForCausalLM): DIR holds
config.json, model.safetensors (or shards with model.safetensors.index.json)
and tokenizer.json; --run DIR scores with a run's checkpoint instead
(exported to a temporary directory). Each input line is {"prompt": str, "response": str}; each
output line is
  {"prompt_ids": [...], "response_ids": [...], "logprobs": [...]}
where prompt and response are tokenized separately with no special tokens
added (special-token text maps to its token), and
logprobs[j] = log p(response_ids[j] | prompt_ids ++ response_ids[:j]) at
temperature 1, computed in float32. The prompt must give at least one token.

--adapter PEFTDIR scores under DIR's weights plus a PEFT LoRA adapter
(adapter_config.json, adapter_model.safetensors), merged at load:
W' = W + (lora_alpha / r) B A. rsLoRA, DoRA and the other PEFT options that
change the computation are refused by name. A LoRA run's --run scores with
its adapters merged the same way.

`

func cmdScore(args []string) int {
	fs := flag.NewFlagSet("score", flag.ContinueOnError)
	model := fs.String("model", "", "Hugging Face model directory (or --run)")
	run := fs.String("run", "", "a run that trained a Hugging Face model: its checkpoint, exported to a temporary directory")
	step := fs.Int("step", -1, "with --run: the checkpoint step (default: the newest complete one)")
	adapter := fs.String("adapter", "", "with --model: a PEFT LoRA adapter directory merged into the weights")
	engine := fs.String("engine", "auto", "compute engine: auto, cpu, go, or xla:cpu, xla:cuda, xla:tpu in a build with -tags xla (docs/engine.md)")
	plugin := fs.String("pjrt-plugin", "", "the xla:* engines' PJRT plugin, a file or a directory (backend.pjrt_plugin; default: the standard search)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), scoreHelp)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "cde-run score: takes no arguments")
		return 2
	}
	if *adapter != "" && *model == "" {
		fmt.Fprintln(os.Stderr, "cde-run score: --adapter applies to --model (a run's adapters are in its checkpoint)")
		return 2
	}
	dir, done, err := session.ModelDir(*model, *run, *step, cli.NewLogger(os.Stderr, cli.StderrIsTTY()))
	if err != nil {
		fmt.Fprintln(os.Stderr, "cde-run score:", err)
		return 1
	}
	defer done()
	if err := runScore(dir, *adapter, *engine, *plugin, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "cde-run score:", err)
		return 1
	}
	return 0
}

func runScore(dir, adapter, engine, pjrtPlugin string, in io.Reader, out io.Writer) error {
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return err
	}
	m, err := xla.LoadHFAdapter(dir, adapter, engine, pjrtPlugin)
	if err != nil {
		return err
	}
	defer m.Close()
	return cli.ServeLines(in, out, func(line []byte) (any, error) {
		var req struct{ Prompt, Response *string }
		dec := json.NewDecoder(bytes.NewReader(line))
		if err := dec.Decode(&req); err != nil {
			return nil, fmt.Errorf(`want a JSON object {"prompt": string, "response": string}: %v`, err)
		}
		if req.Prompt == nil || req.Response == nil {
			return nil, errors.New(`missing string field "prompt" or "response"`)
		}
		r, err := m.Score(tok.Encode, *req.Prompt, *req.Response)
		if err != nil {
			return nil, err
		}
		return r, nil
	})
}
