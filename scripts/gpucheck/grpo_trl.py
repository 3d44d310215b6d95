#!/usr/bin/env python3
"""The peer's side of gpucheck's check i: TRL's GRPOTrainer, steps of 8
prompts x 8 responses (up to --tokens new tokens, sampled at temperature 1,
no vLLM) on an HF Qwen3 (the checkpoint cde trains in the same check), timed
phase by phase:

  generation   GRPOTrainer._generate (HF generate), device synchronised
  score        log-prob passes without gradients inside the step (old and
               reference log-probs, when TRL's settings make it compute any)
  update       the rest of the step: the loss's forward and backward and
               the optimizer step

TRL, datasets, dill and multiprocess are not installed on the GPU machine
and nothing can be fetched there: run.py puts their source (carried in a
git-ignored folder, .trl/site) on PYTHONPATH. Writes --json.

    grpo_trl.py --model DIR --tokenizer FILE --json OUT [--steps 3] [--tokens 256]
"""
import argparse
import json
import sys
import time

import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="an HF checkpoint folder (config.json, model.safetensors)")
    ap.add_argument("--tokenizer", required=True, help="tokenizer.json")
    ap.add_argument("--json", required=True)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    res = {"steps": []}

    def save():
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)

    try:
        import datasets
        import transformers
        import trl
        from trl import GRPOConfig, GRPOTrainer
    except Exception as e:
        res["error"] = f"TRL cannot be imported: {type(e).__name__}: {e}"
        save()
        print(res["error"])
        return 1
    res.update(trl=trl.__version__, transformers=transformers.__version__, datasets=datasets.__version__, torch=torch.__version__)
    dev = a.device
    cuda = dev.startswith("cuda")
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False

    def sync():
        if cuda:
            torch.cuda.synchronize()

    tok = transformers.PreTrainedTokenizerFast(tokenizer_file=a.tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    model = transformers.AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32).to(dev)
    model.generation_config.eos_token_id = tok.eos_token_id
    prompts = [f"Question {i}: what is {i} plus {2 * i + 1}? Answer:" for i in range(a.prompts)]
    ds = datasets.Dataset.from_dict({"prompt": prompts * (a.steps + 1)})

    def reward(completions, **kw):
        return [float(len(c) % 7) for c in completions]

    n = a.prompts * a.group
    cfg = GRPOConfig(output_dir=a.json + ".trl", per_device_train_batch_size=n, num_generations=a.group,
                     max_completion_length=a.tokens, max_steps=a.steps, learning_rate=1e-6, beta=0.0,
                     temperature=1.0, use_vllm=False, bf16=False, fp16=False, logging_steps=1, report_to="none",
                     save_strategy="no", shuffle_dataset=False, seed=0, gradient_checkpointing=False)
    tr = GRPOTrainer(model=model, reward_funcs=reward, args=cfg, train_dataset=ds, processing_class=tok)
    phase = {"generation": 0.0, "score": 0.0}

    def wrap(name, key=None):
        orig = getattr(tr, name)

        def w(*args, **kw):
            sync()
            t0 = time.perf_counter()
            out = orig(*args, **kw)
            sync()
            k = key or ("score" if not torch.is_grad_enabled() else None)
            if k:
                phase[k] += time.perf_counter() - t0
            return out
        setattr(tr, name, w)

    wrap("_generate", "generation")
    wrap("_get_per_token_logps_and_entropies")

    class Timer(transformers.TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            sync()
            phase["generation"] = phase["score"] = 0.0
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            sync()
            s = time.perf_counter() - self.t0
            row = {"step": state.global_step, "step_s": s, "generation_s": phase["generation"], "score_s": phase["score"],
                   "update_s": s - phase["generation"] - phase["score"]}
            if cuda:
                row["peak_alloc_mib"] = torch.cuda.max_memory_allocated() / 2**20
            res["steps"].append(row)
            save()
            print(json.dumps(row), flush=True)

    tr.add_callback(Timer())
    tr.train()
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
