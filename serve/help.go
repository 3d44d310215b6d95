package serve

// Help is the help text of cde-run serve (its flags follow it).
const Help = `usage: cde-run serve (--model DIR [--adapter PEFTDIR] | --checkpoint DIR [--step N]) [--addr HOST:PORT] [--reload-dir DIR]

Serves a policy over HTTP with the subset of the OpenAI-compatible API that
vLLM serves and RL trainers use: /v1/completions (token-id or text prompts,
n, temperature, max_tokens, stop_token_ids, logprobs, seed),
/v1/chat/completions (messages rendered with the model's chat template, so
an ordinary OpenAI client works) and SGLang's POST /update_weights_from_disk,
so a trainer can generate on other processes (rollout.servers) and push new
weights to them. Fields it cannot honour are refused (400), never ignored.

--model is a Hugging Face model directory (config.json, safetensors weights,
tokenizer.json, tokenizer_config.json); --adapter merges a PEFT LoRA adapter
into its weights (W + (lora_alpha / r) B A; a weight reload then replaces
the merged weights). --checkpoint is cde's: a run
directory (its newest complete checkpoint, or --step N), one of its
checkpoints/step-N directories, or a directory holding a policy.gob of cde's
own transformer (character tokenizer); a LoRA run's checkpoint holds its
adapters, served on its model.hf's weights. A run is served from any working
directory: its tokenizer and model directory, when relative, are looked for
from here and then from each directory above the run; its training data is
not read.

It listens on 127.0.0.1 unless --addr names another host (then it warns).
Weight reload is off unless --reload-dir and a token (--token or
CDE_SERVE_TOKEN) are both given; a reload must carry "Authorization: Bearer
TOKEN" and name that directory, the only one it reads. Once ready it prints
"listening on http://HOST:PORT" on stdout; logs go to stderr; SIGINT or
SIGTERM stops it after the requests in progress. Endpoints: docs/serve.md.

`
