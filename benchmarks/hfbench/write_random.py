#!/usr/bin/python3
"""Writes a random checkpoint shaped like Qwen3-0.6B (28 layers, d 1024,
16/8 heads of 128, ff 3072, vocabulary 151,936, tied head), BF16, with the
Qwen3 tokenizer files of tokenizer/testdata/qwen3 beside it (its
tokenizer.json.gz written out as a plain tokenizer.json), so a whole
training step of that shape can be timed where the real model cannot be
downloaded (the weights are N(0, 0.02), norm gains 1: its outputs are
noise, its cost is the real model's).

    write_random.py OUTDIR [LAYERS]
"""
import gzip
import json
import os
import shutil
import struct
import sys

import numpy as np


def main():
    out = sys.argv[1]
    L = int(sys.argv[2]) if len(sys.argv) > 2 else 28
    V, H, F, nh, nkv, hd = 151936, 1024, 3072, 16, 8, 128
    cfg = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": V, "hidden_size": H,
           "intermediate_size": F, "head_dim": hd, "num_hidden_layers": L, "num_attention_heads": nh,
           "num_key_value_heads": nkv, "rms_norm_eps": 1e-6, "max_position_embeddings": 40960,
           "rope_theta": 1000000.0, "tie_word_embeddings": True, "hidden_act": "silu", "torch_dtype": "bfloat16",
           "bos_token_id": 151643, "eos_token_id": 151645}
    shapes = {"model.embed_tokens.weight": (V, H), "model.norm.weight": (H,)}
    for l in range(L):
        p = f"model.layers.{l}."
        shapes.update({p + "input_layernorm.weight": (H,), p + "post_attention_layernorm.weight": (H,),
                       p + "self_attn.q_proj.weight": (nh * hd, H), p + "self_attn.k_proj.weight": (nkv * hd, H),
                       p + "self_attn.v_proj.weight": (nkv * hd, H), p + "self_attn.o_proj.weight": (H, nh * hd),
                       p + "self_attn.q_norm.weight": (hd,), p + "self_attn.k_norm.weight": (hd,),
                       p + "mlp.gate_proj.weight": (F, H), p + "mlp.up_proj.weight": (F, H), p + "mlp.down_proj.weight": (H, F)})
    rng = np.random.default_rng(1)
    os.makedirs(out, exist_ok=True)
    header, offset, names = {}, 0, sorted(shapes)
    for n in names:
        size = int(np.prod(shapes[n])) * 2
        header[n] = {"dtype": "BF16", "shape": list(shapes[n]), "data_offsets": [offset, offset + size]}
        offset += size
    hb = json.dumps(header).encode()
    hb += b" " * (-len(hb) % 8)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for n in names:
            shape = shapes[n]
            if n.endswith("norm.weight"):
                x = np.ones(shape, dtype=np.float32)
            else:
                x = (rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02))
            bits = x.view(np.uint32)
            bf = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)  # round to nearest even
            f.write(bf.tobytes())
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    tok = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tokenizer", "testdata", "qwen3")
    if os.path.exists(os.path.join(tok, "tokenizer.json")):
        shutil.copy(os.path.join(tok, "tokenizer.json"), os.path.join(out, "tokenizer.json"))
    else:  # the repository commits it gzipped
        with gzip.open(os.path.join(tok, "tokenizer.json.gz")) as src, open(os.path.join(out, "tokenizer.json"), "wb") as dst:
            shutil.copyfileobj(src, dst)
    for name in ("tokenizer_config.json", "LICENSE"):
        shutil.copy(os.path.join(tok, name), os.path.join(out, name))


if __name__ == "__main__":
    main()
