#!/usr/bin/env python3
"""Independent log-probs of cde-run score's output, for scripts/gpucheck.

    ref_logprobs.py DEVICE OUT.json MODEL_DIR SCORED.jsonl [MODEL_DIR SCORED.jsonl]...

For each pair: MODEL_DIR is a Hugging Face checkpoint, SCORED.jsonl is what
`cde-run score --model MODEL_DIR` wrote (prompt_ids, response_ids,
logprobs). Each line's ids are run through backends/xla/testdata/hf_ref.py's
plain PyTorch forward (no cde code, no transformers) in float32 on DEVICE
(TF32 off), and OUT.json gets, per pair, the reference log-probs of every
response token and the largest |cde - reference|.

With --transformers first (`ref_logprobs.py --transformers DEVICE OUT.json
DIR SCORED.jsonl`), DIR is loaded with HF transformers' AutoModelForCausalLM
and AutoTokenizer instead, and the tokenizer's ids for each prompt and
response text are compared with the ids cde gave.

With --peft ADAPTER first (`ref_logprobs.py --peft ADAPTER DEVICE OUT.json
BASE SCORED.jsonl`), BASE is loaded with transformers and the PEFT LoRA
adapter ADAPTER on it with peft's PeftModel.from_pretrained (adapters
unmerged, as PEFT runs them), and SCORED.jsonl is what `cde-run score
--model BASE --adapter ADAPTER` wrote.
"""
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "backends", "xla", "testdata"))
from hf_ref import forward, read_safetensors  # noqa: E402


def lines(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def plain(device, model_dir, scored):
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    W = {k: v.to(device) for k, v in read_safetensors(os.path.join(model_dir, "model.safetensors")).items()}
    out = []
    with torch.no_grad():
        for s in scored:
            full = s["prompt_ids"] + s["response_ids"]
            tokens = torch.tensor([full[:-1]], dtype=torch.int64, device=device)
            targets = torch.tensor([full[1:]], dtype=torch.int64, device=device)
            lp = forward(cfg, W, tokens, torch.float32).gather(-1, targets.unsqueeze(-1)).squeeze(-1)[0]
            out.append(lp[len(s["prompt_ids"]) - 1:].tolist())
    return out, {}


def with_transformers(device, model_dir, scored):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    try:
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    except TypeError:  # transformers before the dtype argument
        model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32)
    model = model.to(device).eval()
    tok = AutoTokenizer.from_pretrained(model_dir)
    out, id_mismatch = [], 0
    with torch.no_grad():
        for s in scored:
            if "prompt" in s and tok.encode(s["prompt"], add_special_tokens=False) != s["prompt_ids"]:
                id_mismatch += 1
            if "response" in s and tok.encode(s["response"], add_special_tokens=False) != s["response_ids"]:
                id_mismatch += 1
            full = s["prompt_ids"] + s["response_ids"]
            logits = model(torch.tensor([full], device=device)).logits[0].float()
            lp = torch.log_softmax(logits, -1)[:-1].gather(-1, torch.tensor(full[1:], device=device).unsqueeze(-1)).squeeze(-1)
            out.append(lp[len(s["prompt_ids"]) - 1:].tolist())
    import transformers
    return out, {"transformers": transformers.__version__, "tokenizer_class": type(tok).__name__,
                 "tokenizer_id_mismatches": id_mismatch, "model_class": type(model).__name__}


def with_peft(adapter):
    def run(device, model_dir, scored):
        from peft import PeftModel
        from transformers import AutoModelForCausalLM
        try:
            base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        except TypeError:  # transformers before the dtype argument
            base = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32)
        model = PeftModel.from_pretrained(base, adapter).to(device).eval()
        out = []
        with torch.no_grad():
            for s in scored:
                full = s["prompt_ids"] + s["response_ids"]
                logits = model(input_ids=torch.tensor([full], device=device)).logits[0].float()
                lp = torch.log_softmax(logits, -1)[:-1].gather(-1, torch.tensor(full[1:], device=device).unsqueeze(-1)).squeeze(-1)
                out.append(lp[len(s["prompt_ids"]) - 1:].tolist())
        import peft
        import transformers
        return out, {"peft": peft.__version__, "transformers": transformers.__version__, "model_class": type(model).__name__}
    return run


def main():
    args = sys.argv[1:]
    mode = plain
    if args and args[0] == "--transformers":
        mode, args = with_transformers, args[1:]
    elif args and args[0] == "--peft":
        mode, args = with_peft(args[1]), args[2:]
    device, out_path, pairs = args[0], args[1], args[2:]
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    result = []
    for model_dir, scored_path in zip(pairs[::2], pairs[1::2]):
        scored = lines(scored_path)
        ref, extra = mode(device, model_dir, scored)
        worst = 0.0
        for s, r in zip(scored, ref):
            if len(s["logprobs"]) != len(r):
                sys.exit(f"{scored_path}: {len(s['logprobs'])} log-probs from cde, {len(r)} from the reference")
            worst = max([worst] + [abs(a - b) for a, b in zip(s["logprobs"], r)])
        result.append(dict(extra, model=model_dir, tokens=sum(len(r) for r in ref), max_abs_diff=worst, reference=ref))
    with open(out_path, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
