#!/usr/bin/python3
"""Independent PyTorch reference for cde's Hugging Face architectures.

A plain PyTorch forward of LlamaForCausalLM, Qwen2ForCausalLM,
Qwen3ForCausalLM and MistralForCausalLM written from the published model
definitions (no transformers import): RMSNorm, rotary embeddings in the
rotate-half convention (Llama-3.1 rope scaling included), grouped-query
attention, SwiGLU MLP, Qwen2's q/k/v biases, Qwen3's per-head q/k RMSNorm,
tied or separate LM head. Weights are read from model.safetensors with a
small parser (8-byte header length, JSON header, little-endian data), so
the reference shares no code with the Go side.

    hf_ref.py DIR BATCH.json [--f64] [--device=cuda] [--adapter=PEFTDIR]
    hf_ref.py DIR STEP.json --train [--adapter=PEFTDIR]

BATCH.json: {"tokens": [[...], ...], "targets": [[...], ...]}. Prints
{"logprobs": [[...], ...]}: log p(targets[b][t] | tokens[b][:t+1]) at
temperature 1, computed in float32 (float64 with --f64), on the CPU or on the device
--device names (float32 matrix products in full float32 there: TF32 off).

With --train, STEP.json: {"prompts": [[...]], "responses": [[...]],
"old_logprobs": [[...]], "advantages": [[...]], "clip_low", "clip_high"}.
Prints {"loss", "grad_norm"}: the PPO clipped surrogate, token-mean over
every response token of the batch, max(-A r, -A clip(r, 1-cl, 1+ch)) with
r = exp(log p - old), and the global L2 norm of its gradient over every
weight (tied embeddings counted once), by autograd.

--adapter=PEFTDIR reads a PEFT LoRA adapter (adapter_config.json: r,
lora_alpha; adapter_model.safetensors: base_model.model.<module>.lora_A.weight
[r, in] and .lora_B.weight [out, r]). Scoring merges it by hand into the
weights, W + (lora_alpha / r) B @ A; --train keeps A and B apart, adds
(lora_alpha / r) (x A^T) B^T to each adapted projection, freezes the base
weights, and the gradient norm is over the adapters' A and B only.
"""

import json
import math
import struct
import sys

import torch

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        t = torch.frombuffer(bytearray(data[b:e]), dtype=DTYPES[info["dtype"]])
        out[name] = t.reshape(info["shape"]).to(torch.float32)
    return out


def inv_freq(cfg, head_dim):
    theta = cfg.get("rope_theta", 10000.0)
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    rs = cfg.get("rope_scaling")
    if rs and rs.get("rope_type", rs.get("type")) == "llama3":
        factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        old = rs["original_max_position_embeddings"]
        lo_wave, hi_wave = old / lo, old / hi
        wave = 2 * math.pi / inv
        scaled = torch.where(wave > lo_wave, inv / factor, inv)
        smooth = (old / wave - lo) / (hi - lo)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = (wave >= hi_wave) & (wave <= lo_wave)
        inv = torch.where(medium, smoothed, scaled)
    return inv


def rms(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rot_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def read_adapter(d):
    acfg = json.load(open(d + "/adapter_config.json"))
    scale = acfg["lora_alpha"] / acfg["r"]
    pairs = {}
    prefix = "base_model.model."
    for name, t in read_safetensors(d + "/adapter_model.safetensors").items():
        assert name.startswith(prefix), name
        module, which = name[len(prefix):].rsplit(".lora_", 1)
        pairs.setdefault(module, {})[which.split(".")[0]] = t
    return scale, pairs


def merge_adapter(W, scale, pairs):
    W = dict(W)
    for module, ab in pairs.items():
        W[module + ".weight"] = W[module + ".weight"] + scale * (ab["B"] @ ab["A"])
    return W


def forward(cfg, W, tokens, dt, lora=None):
    arch = cfg["architectures"][0]
    d, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads", nh)
    hd = cfg.get("head_dim") or d // nh
    eps = cfg["rms_norm_eps"]
    W = {k: v.to(dt) for k, v in W.items()}
    B, T = tokens.shape
    dev = tokens.device
    x = W["model.embed_tokens.weight"][tokens]
    pos = torch.arange(T, dtype=torch.float32, device=dev)
    ang = torch.outer(pos, inv_freq(cfg, hd).to(dev))  # float32, as transformers
    cos = torch.cat((ang.cos(), ang.cos()), -1).to(dt)
    sin = torch.cat((ang.sin(), ang.sin()), -1).to(dt)
    mask = torch.full((T, T), float("-inf"), dtype=dt, device=dev).triu(1)

    def lin(h, name):
        y = h @ W[name + ".weight"].T
        if name + ".bias" in W:
            y = y + W[name + ".bias"]
        if lora is not None and name in lora[1]:
            ab = lora[1][name]
            y = y + ((h @ ab["A"].T) @ ab["B"].T) * lora[0]
        return y

    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms(x, W[p + "input_layernorm.weight"], eps)
        q = lin(h, p + "self_attn.q_proj").view(B, T, nh, hd)
        k = lin(h, p + "self_attn.k_proj").view(B, T, nkv, hd)
        v = lin(h, p + "self_attn.v_proj").view(B, T, nkv, hd)
        if arch == "Qwen3ForCausalLM":
            q = rms(q, W[p + "self_attn.q_norm.weight"], eps)
            k = rms(k, W[p + "self_attn.k_norm.weight"], eps)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        q = q * cos + rot_half(q) * sin
        k = k * cos + rot_half(k) * sin
        rep = nh // nkv
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(hd) + mask
        a = torch.softmax(s, dim=-1) @ v
        a = a.transpose(1, 2).reshape(B, T, nh * hd)
        x = x + lin(a, p + "self_attn.o_proj")
        h = rms(x, W[p + "post_attention_layernorm.weight"], eps)
        g = lin(h, p + "mlp.gate_proj")
        x = x + lin(torch.nn.functional.silu(g) * lin(h, p + "mlp.up_proj"), p + "mlp.down_proj")
    h = rms(x, W["model.norm.weight"], eps)
    head = W["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings", False) else W["lm_head.weight"]
    return torch.log_softmax(h @ head.T, dim=-1)


def train_step(cfg, W, step, adapter=None):
    lora = None
    if adapter is None:
        params = {k: v.clone().requires_grad_(True) for k, v in W.items()}
        trained = params
    else:
        scale, pairs = adapter
        lora = (scale, {m: {k: t.clone().requires_grad_(True) for k, t in ab.items()} for m, ab in pairs.items()})
        params = W
        trained = {m + k: t for m, ab in lora[1].items() for k, t in ab.items()}
    terms = []
    for p, r, old, adv in zip(step["prompts"], step["responses"], step["old_logprobs"], step["advantages"]):
        full = torch.tensor([p + r], dtype=torch.int64)
        lp = forward(cfg, params, full, torch.float32, lora)[0]
        n = len(p)
        idx = torch.arange(n - 1, n - 1 + len(r))
        logp = lp[idx, torch.tensor(r)]
        ratio = torch.exp(logp - torch.tensor(old, dtype=torch.float32))
        a = torch.tensor(adv, dtype=torch.float32)
        clipped = ratio.clamp(1 - step["clip_low"], 1 + step["clip_high"])
        terms.append(torch.maximum(-a * ratio, -a * clipped))
    loss = torch.cat(terms).mean()
    loss.backward()
    sq = sum((q.grad.double() ** 2).sum() for q in trained.values() if q.grad is not None)
    return {"loss": loss.item(), "grad_norm": math.sqrt(sq.item())}


def main():
    d, batch = sys.argv[1], sys.argv[2]
    adir = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--adapter=")), None)
    adapter = read_adapter(adir) if adir else None
    if "--train" in sys.argv:
        cfg = json.load(open(d + "/config.json"))
        W = read_safetensors(d + "/model.safetensors")
        print(json.dumps(train_step(cfg, W, json.load(open(batch)), adapter)))
        return
    dt = torch.float64 if "--f64" in sys.argv else torch.float32
    dev = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--device=")), "cpu")
    if dev.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = False
    cfg = json.load(open(d + "/config.json"))
    W = read_safetensors(d + "/model.safetensors")
    if adapter is not None:
        W = merge_adapter(W, *adapter)
    W = {k: v.to(dev) for k, v in W.items()}
    b = json.load(open(batch))
    tokens = torch.tensor(b["tokens"], dtype=torch.int64, device=dev)
    targets = torch.tensor(b["targets"], dtype=torch.int64, device=dev)
    with torch.no_grad():
        lp = forward(cfg, W, tokens, dt)
        out = lp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    print(json.dumps({"logprobs": out.tolist()}))


if __name__ == "__main__":
    main()
