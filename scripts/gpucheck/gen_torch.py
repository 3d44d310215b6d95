#!/usr/bin/env python3
"""PyTorch's side of gpucheck's check h: sampled generation at the
Qwen3-0.6B shape (random weights) with Hugging Face transformers, on one
device, in each dtype and mode asked for:

  eager     HF generate with its default dynamic cache
  static    HF generate with cache_implementation="static", not compiled
  compiled  the same with the forward compiled by torch.compile (what
            generate does by itself for a static cache)

For each: ms per token at batch 1 (prompt of --prompt tokens, --tokens new
tokens, every one kept: min_new_tokens), and tokens per second at each of
--batches, where response i stops at its own length from --lengths (a
fixed spread drawn from a seeded generator, the same list cde's side
reads): HF keeps a finished row in the batch, so the useful tokens are the
sum of the lengths and the time is the longest row's. Also the device's
copy bandwidth (bytes read and written by a device-to-device copy) and the
weights' bytes, whose quotient is the bandwidth floor of one decode step,
and each run's peak allocated memory.

    gen_torch.py --json OUT [--device cuda] [--dtypes float32,bfloat16]
                 [--modes eager,static,compiled] [--batches 32,64]
                 [--lengths FILE] [--layers 28] [--tokens 128]
"""
import argparse
import json
import sys
import time

import torch


def qwen3(layers, dtype, device, small):
    from transformers import Qwen3Config, Qwen3ForCausalLM
    if small:
        cfg = Qwen3Config(vocab_size=4096, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                          num_attention_heads=4, num_key_value_heads=2, head_dim=16, tie_word_embeddings=True,
                          max_position_embeddings=2048)
    else:
        # Qwen3-0.6B's shape (its config.json on the Hub).
        cfg = Qwen3Config(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=layers,
                          num_attention_heads=16, num_key_value_heads=8, head_dim=128, tie_word_embeddings=True,
                          max_position_embeddings=40960, rope_theta=1000000.0, rms_norm_eps=1e-6)
    torch.manual_seed(0)
    with torch.device(device):
        m = Qwen3ForCausalLM(cfg).to(dtype)
    m.eval()
    m.generation_config.pad_token_id = 0
    m.generation_config.eos_token_id = None  # random weights: no early stop but our own
    return m


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def copy_bandwidth(device):
    """Bytes read plus written per second by a device-to-device copy of
    1 GiB (the best of 10 after 3 warm-ups)."""
    n = (1 << 30) // 4 if device.startswith("cuda") else (1 << 26) // 4
    a = torch.empty(n, dtype=torch.float32, device=device)
    b = torch.empty_like(a)
    best = float("inf")
    for i in range(13):
        sync(device)
        t0 = time.perf_counter()
        b.copy_(a)
        sync(device)
        if i >= 3:
            best = min(best, time.perf_counter() - t0)
    return 2 * a.numel() * 4 / best


class StopAt:
    """Stops row i once it has lengths[i] new tokens (a per-row criterion,
    which HF generate applies row by row)."""

    def __init__(self, prompt_len, lengths, device):
        self.p = prompt_len
        self.lengths = torch.tensor(lengths, device=device)

    def __call__(self, input_ids, scores, **kw):
        return (input_ids.shape[1] - self.p) >= self.lengths


def generate(m, mode, ids, max_new, stop=None, min_new=None):
    from transformers import StoppingCriteriaList
    kw = dict(max_new_tokens=max_new, do_sample=True, temperature=1.0, top_k=0, top_p=1.0)
    if min_new:
        kw["min_new_tokens"] = min_new
    if stop is not None:
        kw["stopping_criteria"] = StoppingCriteriaList([stop])
    if mode != "eager":
        kw["cache_implementation"] = "static"
    if mode == "static":
        kw["disable_compile"] = True
    with torch.no_grad():
        return m.generate(ids, **kw)


def timed(device, fn):
    sync(device)
    t0 = time.perf_counter()
    out = fn()
    sync(device)
    return time.perf_counter() - t0, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--modes", default="eager,static,compiled")
    ap.add_argument("--batches", default="32,64")
    ap.add_argument("--lengths", default="", help="JSON list of response lengths (the longest is the max); default 16..256 spread")
    ap.add_argument("--layers", type=int, default=28)
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=128, help="new tokens at batch 1")
    ap.add_argument("--small", action="store_true", help="a tiny model (CI's dry run)")
    a = ap.parse_args()
    lengths = json.load(open(a.lengths)) if a.lengths else list(range(16, 257, 16))
    res = {"torch": torch.__version__, "device": a.device, "layers": a.layers, "prompt": a.prompt, "batch1_tokens": a.tokens,
           "runs": []}
    try:
        import transformers
        res["transformers"] = transformers.__version__
    except ImportError as e:
        res["skip"] = f"transformers is not installed ({e})"
        json.dump(res, open(a.json, "w"), indent=1)
        return 0
    if a.device.startswith("cuda"):
        res["gpu"] = torch.cuda.get_device_name()
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    res["copy_bytes_per_s"] = copy_bandwidth(a.device)

    def save():
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)

    for dname in a.dtypes.split(","):
        dtype = getattr(torch, dname)
        m = qwen3(a.layers, dtype, a.device, a.small)
        wbytes = sum(p.numel() * p.element_size() for p in m.parameters())
        res.setdefault("weight_bytes", {})[dname] = wbytes
        res.setdefault("floor_ms_per_step", {})[dname] = 1e3 * wbytes / res["copy_bytes_per_s"]
        g = torch.Generator(device="cpu").manual_seed(1)
        for mode in a.modes.split(","):
            r = {"dtype": dname, "mode": mode}
            try:
                ids = torch.randint(100, 4000, (1, a.prompt), generator=g).to(a.device)
                # Warm-up (compiles, cache allocation), then the timed run.
                generate(m, mode, ids, a.tokens, min_new=a.tokens)
                if a.device.startswith("cuda"):
                    torch.cuda.reset_peak_memory_stats()
                s, out = timed(a.device, lambda: generate(m, mode, ids, a.tokens, min_new=a.tokens))
                r["batch1_ms_per_token"] = 1e3 * s / (out.shape[1] - a.prompt)
                for b in [int(x) for x in a.batches.split(",") if x]:
                    ls = [lengths[i % len(lengths)] for i in range(b)]
                    ids = torch.randint(100, 4000, (b, a.prompt), generator=g).to(a.device)
                    stop = StopAt(a.prompt, ls, a.device)
                    generate(m, mode, ids, max(ls), stop=stop, min_new=None)
                    if a.device.startswith("cuda"):
                        torch.cuda.reset_peak_memory_stats()
                    s, out = timed(a.device, lambda: generate(m, mode, ids, max(ls), stop=stop))
                    r[f"batch{b}_s"] = s
                    r[f"batch{b}_tokens"] = sum(ls)
                    r[f"batch{b}_tokens_per_s"] = sum(ls) / s
                    r[f"batch{b}_steps"] = out.shape[1] - a.prompt
                    if a.device.startswith("cuda"):
                        r[f"batch{b}_peak_alloc_mib"] = torch.cuda.max_memory_allocated() / 2**20
                        r[f"batch{b}_peak_reserved_mib"] = torch.cuda.max_memory_reserved() / 2**20
            except Exception as e:  # one mode failing (torch.compile, say) never stops the rest
                r["error"] = f"{type(e).__name__}: {e}"[:400]
            res["runs"].append(r)
            save()
            print(json.dumps(r), flush=True)
        del m
        if a.device.startswith("cuda"):
            torch.cuda.empty_cache()
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
