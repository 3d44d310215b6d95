#!/usr/bin/python3
"""PyTorch side of hfbench: the Qwen3 forward of backends/xla/testdata/hf_ref.py
with random weights, timed at the same shapes with 2 threads.

    torch_hf.py DIR BATCH SEQ DECODE TRAIN_BATCH [MICRO] [--skip-train]
                [--device=cpu|cuda] [--decode-batches=1,32] [--lora=R [--base-bf16]]

Prints one JSON object: forward_s, train_s (forward, backward, Adam; with
MICRO > 0 the train batch goes through in parts of MICRO sequences whose
gradients add up before the one Adam step, as cde's train.micro_batch_size),
decodeN_s for each decode batch N (DECODE tokens with a KV cache and
Gumbel-max sampling, prefill excluded), peak_gib (VmHWM) and, on cuda,
peak_gpu_gib_PHASE (torch.cuda.max_memory_allocated per phase). On cuda
every timed region ends with torch.cuda.synchronize(), and float32 matrix
products stay float32 (TF32 off, PyTorch's default).

--lora=R trains LoRA adapters of rank R (alpha 2R) on all seven
projections instead of every weight, as PEFT computes them (x W^T +
(alpha/r) (x A^T) B^T, A ~ U(+-1/sqrt(in)), B = 0): the base weights take no
gradient and have no Adam state. --base-bf16 stores them in bfloat16 for
the train step; the forward widens them to float32 (hf_ref's forward
converts every weight to the compute dtype as it starts) and computes in
float32, as cde's model.lora.base_dtype: bfloat16.
"""
import json
import math
import sys
import time

import torch

sys.path.insert(0, __file__.rsplit("/", 3)[0] + "/backends/xla/testdata")
from hf_ref import forward, inv_freq, rms, rot_half  # noqa: E402

torch.set_num_threads(2)


def flag(name, default):
    for a in sys.argv:
        if a.startswith("--" + name + "="):
            return a.split("=", 1)[1]
    return default


DEV = flag("device", "cpu")
CUDA = DEV.startswith("cuda")


def sync():
    if CUDA:
        torch.cuda.synchronize()


def peak(out, phase):
    if CUDA:
        out["peak_gpu_gib_" + phase] = torch.cuda.max_memory_allocated() / 2**30
        torch.cuda.reset_peak_memory_stats()


def main():
    d, B, T, D = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    TB = int(sys.argv[5]) or B
    pos = [a for a in sys.argv[6:] if not a.startswith("--")]
    if CUDA:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    MB = int(pos[0]) if pos and int(pos[0]) > 0 else TB
    cfg = json.load(open(d + "/config.json"))
    V, H, L, F = cfg["vocab_size"], cfg["hidden_size"], cfg["num_hidden_layers"], cfg["intermediate_size"]
    nh, nkv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    g = torch.Generator().manual_seed(1)
    W = {"model.embed_tokens.weight": torch.randn(V, H, generator=g) * 0.02, "model.norm.weight": torch.ones(H)}
    for l in range(L):
        p = f"model.layers.{l}."
        W[p + "input_layernorm.weight"] = torch.ones(H)
        W[p + "post_attention_layernorm.weight"] = torch.ones(H)
        for n, shape in [("self_attn.q_proj", (nh * hd, H)), ("self_attn.k_proj", (nkv * hd, H)), ("self_attn.v_proj", (nkv * hd, H)),
                         ("self_attn.o_proj", (H, nh * hd)), ("mlp.gate_proj", (F, H)), ("mlp.up_proj", (F, H)), ("mlp.down_proj", (H, F))]:
            W[p + n + ".weight"] = torch.randn(*shape, generator=g) * 0.02
        W[p + "self_attn.q_norm.weight"] = torch.ones(hd)
        W[p + "self_attn.k_norm.weight"] = torch.ones(hd)
    W = {k: v.to(DEV) for k, v in W.items()}
    out = {}
    tokens = torch.randint(0, 150000, (B, T), generator=g).to(DEV)
    targets = torch.randint(0, 150000, (B, T), generator=g).to(DEV)
    if CUDA:
        # hf_ref builds positions and masks without naming a device.
        torch.set_default_device(DEV)
        torch.cuda.reset_peak_memory_stats()
    with torch.no_grad():
        # warm-up: on cuda at the timed shape (kernel selection), on cpu short
        forward(cfg, W, tokens if CUDA else tokens[:, :8], torch.float32)
        sync()
        t0 = time.perf_counter()
        lp = forward(cfg, W, tokens, torch.float32).gather(-1, targets.unsqueeze(-1))
        sync()
        out["forward_s"] = time.perf_counter() - t0
        del lp
    peak(out, "forward")
    print(f"torch forward_s: {out['forward_s']:.2f}", file=sys.stderr)
    if "--skip-train" not in sys.argv:
        R = int(flag("lora", "0"))
        lora = None
        if R > 0:
            P = W
            if "--base-bf16" in sys.argv:
                P = {k: v.to(torch.bfloat16) for k, v in W.items()}
                W = None  # the float32 weights are not kept
            pairs = {}
            for k, w in P.items():
                m = k[:-len(".weight")]
                if k.endswith("_proj.weight"):
                    out_dim, in_dim = w.shape
                    a = (torch.rand(R, in_dim, generator=g) * 2 - 1) / math.sqrt(in_dim)
                    pairs[m] = {"A": a.to(DEV).requires_grad_(True), "B": torch.zeros(out_dim, R, device=DEV).requires_grad_(True)}
            lora = (2.0, pairs)  # alpha / r = 2R / R
            trained = [t for ab in pairs.values() for t in ab.values()]
        else:
            P = {k: v.clone().requires_grad_(True) for k, v in W.items()}
            trained = list(P.values())
        opt = torch.optim.Adam(trained, lr=1e-6)
        old = torch.full((TB, T - 64), -12.0, device=DEV)
        adv = torch.tensor([(i % 2) * 2 - 1.0 for i in range(TB)], device=DEV).unsqueeze(1)

        def step():
            opt.zero_grad()
            for lo in range(0, TB, MB):
                hi = min(lo + MB, TB)
                lp = forward(cfg, P, tokens[lo:hi], torch.float32, lora)[:, 63:T - 1].gather(-1, targets[lo:hi, 64:].unsqueeze(-1)).squeeze(-1)
                ratio = torch.exp(lp - old[lo:hi])
                a = adv[lo:hi]
                # this part's share of the mean over all TB x (T - 64) tokens
                loss = torch.maximum(-a * ratio, -a * ratio.clamp(0.8, 1.2)).sum() / old.numel()
                loss.backward()
            torch.nn.utils.clip_grad_norm_(trained, 1.0)
            opt.step()

        if CUDA:
            step()  # warm-up: kernels load and Adam's state is made, as cde's first call compiles
            sync()
        t0 = time.perf_counter()
        step()
        sync()
        out["train_s"] = time.perf_counter() - t0
        print(f"torch train_s: {out['train_s']:.3f}", file=sys.stderr)
        if W is None:  # --base-bf16: decode reads float32 weights again
            W = {k: v.float() for k, v in P.items()}
        del P, opt, trained, lora
        peak(out, "train")
    inv = inv_freq(cfg, hd)
    eps = cfg["rms_norm_eps"]
    inv = inv.to(DEV)
    gd = torch.Generator(device=DEV).manual_seed(2)
    with torch.no_grad():
        for nb in [int(x) for x in flag("decode-batches", "1,32").split(",")]:
            x0 = torch.randint(0, 150000, (nb, 16), generator=g, device="cpu").to(DEV)
            # prefill: build the caches
            cache = []
            pos = torch.arange(16, dtype=torch.float32)

            def layer(x, l, pos, cache_l):
                p = f"model.layers.{l}."
                b, t, _ = x.shape
                ang = torch.outer(pos, inv)
                cos = torch.cat((ang.cos(), ang.cos()), -1)
                sin = torch.cat((ang.sin(), ang.sin()), -1)
                h = rms(x, W[p + "input_layernorm.weight"], eps)
                q = (h @ W[p + "self_attn.q_proj.weight"].T).view(b, t, nh, hd)
                k = (h @ W[p + "self_attn.k_proj.weight"].T).view(b, t, nkv, hd)
                v = (h @ W[p + "self_attn.v_proj.weight"].T).view(b, t, nkv, hd)
                q = rms(q, W[p + "self_attn.q_norm.weight"], eps).transpose(1, 2)
                k = rms(k, W[p + "self_attn.k_norm.weight"], eps).transpose(1, 2)
                v = v.transpose(1, 2)
                q = q * cos + rot_half(q) * sin
                k = k * cos + rot_half(k) * sin
                if cache_l is not None:
                    k = torch.cat((cache_l[0], k), 2)
                    v = torch.cat((cache_l[1], v), 2)
                kk, vv = k.repeat_interleave(nh // nkv, 1), v.repeat_interleave(nh // nkv, 1)
                s = q @ kk.transpose(-1, -2) / math.sqrt(hd)
                if t > 1:
                    s = s + torch.full((t, t), float("-inf"), device=DEV).triu(1)
                a = (torch.softmax(s, -1) @ vv).transpose(1, 2).reshape(b, t, nh * hd)
                x = x + a @ W[p + "self_attn.o_proj.weight"].T
                h = rms(x, W[p + "post_attention_layernorm.weight"], eps)
                x = x + (torch.nn.functional.silu(h @ W[p + "mlp.gate_proj.weight"].T) * (h @ W[p + "mlp.up_proj.weight"].T)) @ W[p + "mlp.down_proj.weight"].T
                return x, (k, v)

            x = W["model.embed_tokens.weight"][x0]
            for l in range(L):
                x, kv = layer(x, l, pos, None)
                cache.append(kv)
            tok = torch.argmax(rms(x[:, -1:], W["model.norm.weight"], eps) @ W["model.embed_tokens.weight"].T, -1)
            sync()
            t0 = time.perf_counter()
            for step in range(D):
                x = W["model.embed_tokens.weight"][tok]
                p = torch.tensor([16.0 + step], device=DEV)
                for l in range(L):
                    x, cache[l] = layer(x, l, p, cache[l])
                logits = rms(x, W["model.norm.weight"], eps) @ W["model.embed_tokens.weight"].T
                # Gumbel-max sampling, as cde's sampler does (noise drawn each step).
                u = torch.rand(logits.shape, generator=gd, device=DEV).clamp_min(1e-20)
                tok = torch.argmax(torch.log_softmax(logits, -1) - torch.log(-torch.log(u)), -1)
            sync()
            out[f"decode{nb}_s"] = time.perf_counter() - t0
            peak(out, f"decode{nb}")
            print(f"torch decode{nb}_s: {out[f'decode{nb}_s']:.2f}", file=sys.stderr)
    # Memory read bandwidth as PyTorch's vectorised reduction sees it (1 GiB).
    big = torch.ones(1 << 28, device="cpu")
    best = 0.0
    for _ in range(5):
        t0 = time.perf_counter()
        big.sum()
        best = max(best, (1 << 30) / (time.perf_counter() - t0) / 1e9)
    out["bandwidth_gbs"] = best
    del big
    # VmHWM: ru_maxrss would carry the Go parent's peak across fork and exec.
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            out["peak_gib"] = int(line.split()[1]) / 1024 / 1024
    out["threads"] = torch.get_num_threads()
    # Debian's torch is built with BLAS_INFO=generic: the BLAS is whatever
    # libblas.so.3 points to, so name the library actually mapped.
    libs = sorted({l.split()[-1] for l in open("/proc/self/maps") if "blas" in l.lower() and "/" in l})
    print("torch BLAS: " + (", ".join(libs) or "none mapped (reference BLAS or built-in kernels)"), file=sys.stderr)
    out["blas_openblas"] = 1.0 if any("openblas" in l for l in libs) else 0.0
    print(json.dumps(out))


if __name__ == "__main__":
    main()
