#!/usr/bin/env python3
"""Writes the tiny Hugging Face checkpoints scripts/gpucheck scores.

    tinyhf.py OUTDIR ARCH DTYPE SEED

ARCH is llama, qwen2, qwen3 or qwen3-0.6b (Qwen3-0.6B's shape, 2.4 GB in
F32, for the timing checks); DTYPE is F32 or BF16. The checkpoint has the
real Qwen3 vocabulary size (151936), so the Qwen3 tokenizer in
tokenizer/testdata/qwen3 (copied beside it, tokenizer.json.gz written out
as a plain tokenizer.json) fits every architecture, and is
otherwise small: width 32, 2 layers. Each architecture exercises its own
parts: llama has grouped-query attention, Llama-3.1 rope scaling and an
untied head; qwen2 has q/k/v biases and a tied head; qwen3 has per-head
q/k RMSNorm with head_dim 12 != 32 / 4 heads, and a tied head.

The parameter names and shapes are written here from the published model
definitions, not from cde's code, so a shape cde gets wrong is an error when
it loads the file. Only numpy and the standard library are used; a seed
gives the same bytes for a given numpy version (numpy does not promise its
normal sampler across versions). Weights are N(0, 0.2), norm gains
1 + N(0, 0.2); BF16 rounds float32 to nearest even.
"""
import gzip
import json
import os
import shutil
import struct
import sys

import numpy as np

V, H, L, F = 151936, 32, 2, 48
CONFIGS = {
    "llama": {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": V, "hidden_size": H,
              "intermediate_size": F, "num_hidden_layers": L, "num_attention_heads": 4, "num_key_value_heads": 2,
              "rms_norm_eps": 1e-5, "max_position_embeddings": 512, "rope_theta": 500000.0,
              "tie_word_embeddings": False, "bos_token_id": 151643, "eos_token_id": 151645,
              "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                               "original_max_position_embeddings": 64}},
    "qwen2": {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": V, "hidden_size": H,
              "intermediate_size": F, "num_hidden_layers": L, "num_attention_heads": 4, "num_key_value_heads": 1,
              "rms_norm_eps": 1e-6, "max_position_embeddings": 512, "rope_theta": 10000.0,
              "tie_word_embeddings": True, "use_sliding_window": False, "eos_token_id": 151645},
    "qwen3": {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": V, "hidden_size": H,
              "intermediate_size": F, "num_hidden_layers": L, "num_attention_heads": 4, "num_key_value_heads": 2,
              "head_dim": 12, "rms_norm_eps": 1e-6, "max_position_embeddings": 512, "rope_theta": 1000000.0,
              "tie_word_embeddings": True, "eos_token_id": 151645},
    # Qwen3-0.6B's shape (its config.json on the Hub), for the timing checks
    # (h, i): weights N(0, 0.02), norm gains 1 + N(0, 0.02).
    "qwen3-0.6b": {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": V, "hidden_size": 1024,
                   "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16,
                   "num_key_value_heads": 8, "head_dim": 128, "rms_norm_eps": 1e-6, "max_position_embeddings": 40960,
                   "rope_theta": 1000000.0, "tie_word_embeddings": True, "eos_token_id": 151645, "std": 0.02},
}


def shapes(cfg):
    H, L, F = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["intermediate_size"]
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim", H // nh)
    arch = cfg["model_type"]
    out = {"model.embed_tokens.weight": (V, H), "model.norm.weight": (H,)}
    if not cfg["tie_word_embeddings"]:
        out["lm_head.weight"] = (V, H)
    for l in range(L):
        p = f"model.layers.{l}."
        out[p + "input_layernorm.weight"] = (H,)
        out[p + "post_attention_layernorm.weight"] = (H,)
        out[p + "self_attn.q_proj.weight"] = (nh * hd, H)
        out[p + "self_attn.k_proj.weight"] = (nkv * hd, H)
        out[p + "self_attn.v_proj.weight"] = (nkv * hd, H)
        out[p + "self_attn.o_proj.weight"] = (H, nh * hd)
        if arch == "qwen2":
            out[p + "self_attn.q_proj.bias"] = (nh * hd,)
            out[p + "self_attn.k_proj.bias"] = (nkv * hd,)
            out[p + "self_attn.v_proj.bias"] = (nkv * hd,)
        if arch == "qwen3":
            out[p + "self_attn.q_norm.weight"] = (hd,)
            out[p + "self_attn.k_norm.weight"] = (hd,)
        out[p + "mlp.gate_proj.weight"] = (F, H)
        out[p + "mlp.up_proj.weight"] = (F, H)
        out[p + "mlp.down_proj.weight"] = (H, F)
    return out


def bf16_bytes(x):
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16  # round to nearest even
    return r.astype(np.uint16).tobytes()


def write_safetensors(path, tensors, dtype):
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        x = tensors[name]
        b = x.astype("<f4").tobytes() if dtype == "F32" else bf16_bytes(x)
        header[name] = {"dtype": dtype, "shape": list(x.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def main():
    out, arch, dtype, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    if arch not in CONFIGS or dtype not in ("F32", "BF16"):
        sys.exit(f"tinyhf.py: arch {arch!r} (llama, qwen2, qwen3, qwen3-0.6b), dtype {dtype!r} (F32, BF16)")
    cfg = dict(CONFIGS[arch], torch_dtype={"F32": "float32", "BF16": "bfloat16"}[dtype])
    std = cfg.pop("std", 0.2)
    rng = np.random.default_rng(seed)
    tensors = {}
    for name, shape in shapes(cfg).items():
        x = rng.standard_normal(shape).astype(np.float32) * np.float32(std)
        if name.endswith("norm.weight"):
            x += np.float32(1)
        tensors[name] = x
    os.makedirs(out, exist_ok=True)
    write_safetensors(os.path.join(out, "model.safetensors"), tensors, dtype)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    copy_tokenizer(out)


QWEN3_TOKENIZER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tokenizer", "testdata", "qwen3")


def copy_tokenizer(out, tok=QWEN3_TOKENIZER_DIR):
    """Copies the Qwen3 tokenizer files into out: tokenizer.json (from
    tokenizer.json.gz, which the repository commits, when the plain file is
    absent), tokenizer_config.json and LICENSE."""
    plain = os.path.join(tok, "tokenizer.json")
    if os.path.exists(plain):
        shutil.copy(plain, os.path.join(out, "tokenizer.json"))
    else:
        with gzip.open(plain + ".gz") as src, open(os.path.join(out, "tokenizer.json"), "wb") as dst:
            shutil.copyfileobj(src, dst)
    for name in ("tokenizer_config.json", "LICENSE"):
        shutil.copy(os.path.join(tok, name), os.path.join(out, name))


if __name__ == "__main__":
    main()
