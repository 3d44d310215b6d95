#!/usr/bin/env python3
"""The GPU check's run step: runs on the GPU machine (no Go, no network).

    python3 scripts/gpucheck/run.py OUT [--plugin P] [--only a,b,c,d,e,f,g,h,i,t] [--bin DIR]
    python3 scripts/gpucheck/run.py OUT --dry      # CI: engine cpu, PyTorch on the CPU

Run from anywhere; paths are taken relative to this file's repository. The
binaries come from --bin (default .gpucheck/ at the repository root, made by
scripts/gpucheck/prepare): cde-run, xla.test and hfbench, each plain or
xz-compressed (NAME.xz, unpacked under OUT/bin).

The PJRT CUDA plugin and the NVIDIA libraries are found in the installed
Python packages (jax_plugins/xla_cuda*/xla_cuda_plugin.so and nvidia/*/lib
under each site-packages directory); --plugin names the plugin instead.
Nothing is downloaded.

Each check runs on its own (a failure or timeout in one does not stop the
next) and OUT/summary.json and OUT/summary.md are rewritten after each, so
a run cut short keeps what finished. The checks (docs/scale.md):

  a  conformance: one actor step and one critic step (K = 4 heads), the
     forward and generation, xla:cuda against cde's cpu engine from the
     same weights and batch (backends/xla's conformance suite, its float32
     tolerances)
  b  score: cde-run score of tiny Llama, Qwen2, Qwen3 (F32, BF16) against
     an independent PyTorch forward on the same device, |diff| <= 1e-4
  c  export: a short run on a tiny Qwen3, cde-run export, HF transformers
     loads it: its log-probs equal cde-run score's within 1e-4, and
     AutoTokenizer gives cde's ids; the same for the second testbed's
     shipped model (assets/wordprob-qwen3: BF16, reduced Qwen3 BPE)
  d  hfbench: the Qwen3-0.6B shape on xla:cuda against PyTorch CUDA
  e  train: the default cde-run train and a PPO + multihead run, 50 steps,
     xla:cuda against the cpu engine: step time, and the first steps'
     metrics
  f  LoRA: a short LoRA run on a tiny Qwen3, cde-run export (a PEFT
     adapter) and export --merge; score --adapter equals the merged
     export's score, the plain PyTorch forward of the merged export
     agrees within 1e-4, and HF PEFT (PeftModel.from_pretrained on the
     base) gives cde's log-probs within 1e-4
  g  LoRA with a bfloat16 base: the same short LoRA run on a BF16 tiny Qwen3
     with model.lora.base_dtype float32 and bfloat16; the steps' actor and
     reward metrics agree within 1e-4 relative (bit for bit in --dry)
  h  generation at the Qwen3-0.6B shape (random weights): cde's decode
     with its loop on the device (CDE_GENERATE=device) at batch 1, 32 and
     64, and on the host at batch 32 (the loop before 2026-11-27), and
     continuous batching (64 responses of spread lengths, all at once and
     in 32 slots), against
     HF generate (gen_torch.py: eager, and its static cache compiled), with
     the bandwidth floor and peak memory; the figures are the result
  i  three GRPO steps of 8 prompts x 8 responses (up to 256 new tokens) of
     an HF Qwen3 at the 0.6B shape: cde-run train against TRL's
     GRPOTrainer (grpo_trl.py, its source carried in .trl/site), phase by
     phase; skips with the reason when TRL cannot be imported
  t  TensorBoard: a short run with train.logger [jsonl, tensorboard];
     TensorBoard's EventAccumulator reads its event file, and every
     metrics.jsonl value is there at its step, as float32 (skips, with the
     reason, where tensorboard is not installed)

--dry runs the same script with engine cpu for xla:cuda (check a then uses
GoMLX's go engine as the reference, its default), PyTorch on the CPU and
small sizes; what needs transformers is skipped, with the reason, when it is
not installed. Exit status: 0 when no check failed (skips allowed), 1
otherwise.
"""
import argparse
import glob
import gzip
import json
import lzma
import math
import os
import re
import shutil
import site
import statistics
import struct
import subprocess
import sys
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
HERE = os.path.join(ROOT, "scripts", "gpucheck")

# The tolerance of checks b and c (log-probs), from the issue: float32
# forwards of the same weights on the same device.
LOGPROB_TOL = 1e-4


class Ctx:
    pass


def log(msg):
    print(f"[gpucheck {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def find_cuda(plugin):
    """The PJRT CUDA plugin and the NVIDIA library directories of the
    installed Python packages."""
    sites = [p for p in site.getsitepackages() + [site.getusersitepackages()] if os.path.isdir(p)]
    if not plugin:
        found = sorted(f for s in sites for f in glob.glob(os.path.join(s, "jax_plugins", "xla_cuda*", "xla_cuda_plugin.so")))
        if not found:
            raise RuntimeError("no jax_plugins/xla_cuda*/xla_cuda_plugin.so under " + ", ".join(sites) + ": install jax-cuda13-pjrt (or name a plugin with --plugin)")
        plugin = found[-1]
    libs = sorted(d for s in sites for d in glob.glob(os.path.join(s, "nvidia", "*", "lib")))
    return plugin, libs


def versions(ctx):
    v = {"python": sys.version.split()[0]}
    for mod in ("torch", "jax", "jaxlib", "transformers", "peft", "numpy"):
        try:
            v[mod] = __import__(mod).__version__
        except Exception:
            pass
    if ctx.plugin:
        vf = os.path.join(os.path.dirname(ctx.plugin), "version.py")
        if os.path.exists(vf):
            m = re.search(r"""_version\s*=\s*["']([^"']+)""", open(vf).read())
            if m:
                v["jax_cuda_plugin"] = m.group(1)
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
        v["gpu"] = q.stdout.strip()
    except Exception:
        v["gpu"] = "none (no nvidia-smi)"
    return v


def unpack(bin_dir, out_bin):
    """cde-run, xla.test and hfbench from bin_dir, unpacking NAME.xz."""
    os.makedirs(out_bin, exist_ok=True)
    paths = {}
    for name in ("cde-run", "xla.test", "hfbench"):
        plain, xz = os.path.join(bin_dir, name), os.path.join(bin_dir, name + ".xz")
        if os.path.exists(plain):
            paths[name] = os.path.abspath(plain)
        elif os.path.exists(xz):
            dst = os.path.join(out_bin, name)
            with lzma.open(xz) as src, open(dst, "wb") as f:
                shutil.copyfileobj(src, f)
            os.chmod(dst, 0o755)
            paths[name] = dst
    return paths


QWEN3_TOKENIZER_GZ = os.path.join(ROOT, "tokenizer", "testdata", "qwen3", "tokenizer.json.gz")


def check_tokenizer(path=QWEN3_TOKENIZER_GZ):
    """Checks that the Qwen3 tokenizer the checkpoints take is there and
    whole: the repository commits it gzipped, and tinyhf.py writes it out
    (Python's gzip) as a plain tokenizer.json into each checkpoint, where HF
    transformers reads it; the tree is not written to. Returns its size."""
    if not os.path.exists(path):
        raise RuntimeError(f"{path} is missing: the checkpoints need the Qwen3 tokenizer")
    n = 0
    with gzip.open(path) as f:
        while chunk := f.read(1 << 20):
            n += len(chunk)
    return f"{os.path.relpath(path, ROOT)} ({n / 1e6:.1f} MB decompressed)"


def run(ctx, name, cmd, timeout, cwd=None, env=None, stdin=None, stdout_file=None):
    """Runs cmd, its output to OUT/logs/NAME.log (stdout to stdout_file
    when given); raises on a non-zero exit or a timeout."""
    logf = os.path.join(ctx.out, "logs", name + ".log")
    e = dict(ctx.env)
    e.update(env or {})
    with open(logf, "a") as lf:
        lf.write(f"$ {' '.join(cmd)}\n")
        lf.flush()
        out = open(stdout_file, "w") if stdout_file else lf
        try:
            p = subprocess.run(cmd, cwd=cwd or ROOT, env=e, stdin=open(stdin) if stdin else None,
                               stdout=out, stderr=lf, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"{os.path.basename(cmd[0])} timed out after {timeout} s (log: logs/{name}.log)")
        finally:
            if stdout_file:
                out.close()
    if p.returncode != 0:
        raise RuntimeError(f"{os.path.basename(cmd[0])} exited {p.returncode} (log: logs/{name}.log): {tail(logf)}")
    return logf


def tail(path, n=3):
    with open(path, errors="replace") as f:
        return " | ".join(l.strip() for l in f.readlines()[-n:])


def need(ctx, *names):
    missing = [n for n in names if n not in ctx.bins]
    if missing:
        raise RuntimeError(f"missing binaries {missing} in {ctx.bin_dir}: run scripts/gpucheck/prepare")


# ---- a: conformance ----------------------------------------------------------

METRIC_RE = re.compile(r"^\s+\S+\.go:\d+: (actor|critic) (\S+)\s+cpu (\S+)\s+ref (\S+)\s+\|diff\| (\S+)\s+diff/bound (\S+)")
WEIGHT_RE = re.compile(r"w max\|diff\| (\S+)\s+d/b (\S+)")
FWD_RE = re.compile(r"^\s+\S+\.go:\d+: (\S.*?)\s+n=\d+\s+max\|diff\|=(\S+)\s+diff/bound=(\S+)")
RESULT_RE = re.compile(r"^--- (PASS|FAIL|SKIP): (\S+)")


def parse_conformance(logf):
    fig = {"metrics": {}, "max_weight_abs_diff": 0.0, "max_weight_diff_over_bound": 0.0,
           "max_forward_diff_over_bound": 0.0, "tests": {}}
    for line in open(logf, errors="replace"):
        if m := METRIC_RE.match(line):
            key = f"{m.group(1)}:{m.group(2)}"
            r = fig["metrics"].setdefault(key, {"cpu": float(m.group(3)), "ref": float(m.group(4)), "diff_over_bound": 0.0})
            r["diff_over_bound"] = max(r["diff_over_bound"], float(m.group(6)))
        elif m := WEIGHT_RE.search(line):
            fig["max_weight_abs_diff"] = max(fig["max_weight_abs_diff"], float(m.group(1)))
            fig["max_weight_diff_over_bound"] = max(fig["max_weight_diff_over_bound"], float(m.group(2)))
        elif m := FWD_RE.match(line):
            fig["max_forward_diff_over_bound"] = max(fig["max_forward_diff_over_bound"], float(m.group(3)))
        if m := RESULT_RE.match(line.strip()):
            fig["tests"][m.group(2)] = m.group(1)
    return fig


def check_a(ctx):
    need(ctx, "xla.test")
    ref = "go" if ctx.dry else ctx.engine
    variants = [("", {})]
    if not ctx.dry:
        # cde runs float32 products in float32 on xla:cuda unless
        # NVIDIA_TF32_OVERRIDE is set (backends/xla/pjrt.go cudaFloat32Env);
        # this variant lets XLA use TF32, to record what that costs
        # (GPUCHECK_A_NO_TF32 leaves it out, and GPUCHECK_A_NO_LOSS_REF the
        # policy-loss reference test, to save device time).
        # TestConformanceGenerate compares the cpu engine's generations
        # (the host loop) with the engine's (the device loop, since
        # 2026-11-27): the same tokens but at near-ties, log-probs,
        # entropies and pooled states within the forward's tolerance.
        if not ctx.env.get("GPUCHECK_A_NO_TF32"):
            variants.append(("_tf32", {"NVIDIA_TF32_OVERRIDE": "1"}))
    # XLA's deterministic-ops flag (atomics-free reductions and scatters,
    # no timing-based kernel choice), timed beside the default run so the
    # GPU figures say what determinism costs there (issue 57, item 7;
    # GPUCHECK_A_NO_DET leaves it out). In the dry run it is only listed.
    det = ("_det", {"XLA_FLAGS": (ctx.env.get("XLA_FLAGS", "") + " --xla_gpu_deterministic_ops=true").strip()})
    if not ctx.dry and not ctx.env.get("GPUCHECK_A_NO_DET"):
        variants.append(det)
    res = {"variants": [v[0] or "default" for v in variants] + ([] if not ctx.dry else ["(planned on a GPU) " + det[0] + " " + det[1]["XLA_FLAGS"]]),
           "reference": ref, "tolerance": "backends/xla/engine_conformance_test.go: forward 1e-5 abs+rel (5e-5 at init std 0.4); step metrics 1e-5 abs + 1e-4 rel; updated weights and Adam moments 1e-5 abs + 1e-4 rel"}
    status = "pass"
    for suffix, extra in variants:  # only the first decides the status
        env = {"CDE_CONFORMANCE_REF": ref, "CDE_TEST_PJRT_PLUGIN": ctx.plugin or ""}
        env.update(extra)
        logf = os.path.join(ctx.out, "logs", "a" + suffix + ".log")
        try:
            # The policy-loss reference test compiles one graph per loss
            # and batch (90 s on an H200): float32 only.
            tests = "TestConformance(Forward|ActorStep|CriticStep|Generate)" + ("" if suffix or ctx.env.get("GPUCHECK_A_NO_LOSS_REF") else "|TestActorLossMatchesReference")
            # GPUCHECK_A_TESTS replaces the list (a regular expression of
            # test names), to spend device time on one part.
            tests = ctx.env.get("GPUCHECK_A_TESTS") or tests
            t0 = time.time()
            run(ctx, "a" + suffix, [ctx.bins["xla.test"], "-test.run", f"^({tests})$", "-test.v"],
                timeout=ctx.t(300), cwd=os.path.join(ROOT, "backends", "xla"), env=env)
            ok = True
        except RuntimeError as e:
            ok = False
            res["error" + suffix] = str(e)
        fig = parse_conformance(logf)
        fig["wall_s"] = round(time.time() - t0, 1)
        fig["passed"] = ok and bool(fig["tests"]) and all(v == "PASS" for v in fig["tests"].values())
        res["run" + (suffix or "_default")] = fig
        if not suffix and not fig["passed"]:
            status = "fail"
    return status, res


# ---- b: score against PyTorch ------------------------------------------------

SCORE_INPUT = [
    {"prompt": "What is 12 times 7?", "response": " 12 times 7 is 84, so the answer is \\boxed{84}."},
    {"prompt": "<|im_start|>user\nName a prime.<|im_end|>\n<|im_start|>assistant\n", "response": "Seven.<|im_end|>"},
    {"prompt": "The quick brown fox", "response": " jumps over the lazy dog, again and again and again."},
    {"prompt": "x", "response": " y"},
]


def write_jsonl(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def score(ctx, name, model, out, engine=None, adapter=None):
    inp = os.path.join(ctx.work, "score-input.jsonl")
    write_jsonl(inp, SCORE_INPUT)
    cmd = [ctx.bins["cde-run"], "score", "--model", model, "--engine", engine or ctx.engine]
    if adapter:
        cmd += ["--adapter", adapter]
    if ctx.plugin:
        cmd += ["--pjrt-plugin", ctx.plugin]
    run(ctx, name, cmd, timeout=ctx.t(240), stdin=inp, stdout_file=out)
    with open(out) as f:
        rows = [json.loads(l) for l in f if l.strip()]
    for r, i in zip(rows, SCORE_INPUT):
        r.update(i)  # the texts beside the ids, for the tokenizer comparison
    write_jsonl(out, rows)
    return rows


def tiny(ctx, arch, dtype, seed):
    d = os.path.join(ctx.work, f"{arch}-{dtype.lower()}-{seed}")
    if not os.path.exists(os.path.join(d, "model.safetensors")):
        run(ctx, "tinyhf", [ctx.py, os.path.join(HERE, "tinyhf.py"), d, arch, dtype, str(seed)], timeout=120)
    return d


def check_b(ctx):
    need(ctx, "cde-run")
    pairs, res = [], {"tolerance": LOGPROB_TOL, "device": ctx.torch_device, "models": {}}
    for arch in ("llama", "qwen2", "qwen3"):
        for dtype in ("F32", "BF16"):
            d = tiny(ctx, arch, dtype, 1)
            out = os.path.join(ctx.work, f"score-{arch}-{dtype}.jsonl")
            score(ctx, "b", d, out)
            pairs += [d, out]
    ref = os.path.join(ctx.work, "b-ref.json")
    run(ctx, "b", [ctx.py, os.path.join(HERE, "ref_logprobs.py"), ctx.torch_device, ref] + pairs, timeout=ctx.t(300))
    status = "pass"
    for r in json.load(open(ref)):
        name = os.path.basename(r["model"])
        res["models"][name] = {"tokens": r["tokens"], "max_abs_diff": r["max_abs_diff"]}
        if not r["max_abs_diff"] <= LOGPROB_TOL:
            status = "fail"
    return status, res


# ---- c: train, export, transformers ------------------------------------------

def short_run(ctx, name, model_extra="", lr="1.0e-3", dtype="F32"):
    """Trains 2 GRPO steps with an entropy bonus (so the weights move) on the
    tiny Qwen3 of seed 3 (stored in dtype) and returns (its base directory,
    the run directory)."""
    base = tiny(ctx, "qwen3", dtype, 3)
    run_dir = os.path.join(ctx.work, f"{name}-run")
    shutil.rmtree(run_dir, ignore_errors=True)
    cfg = os.path.join(ctx.work, f"{name}.yaml")
    with open(cfg, "w") as f:
        f.write(f"""seed: 1
task: {{name: math, train: {os.path.join(ROOT, 'tasks', 'testdata', 'gsm8k', 'test.jsonl')}, tokenizer: {base}}}
model: {{hf: {base}, max_len: 320{model_extra}}}
rollout: {{n: 4, temperature: 1.0, max_response_tokens: 24}}
train: {{steps: 2, prompts_per_step: 2, actor_lr: {lr}, checkpoint_every: 2}}
algorithm: {{name: grpo}}
strategies: [{{name: entropy, coef: 0.05}}]
eval: {{at_start: false, every: 1000}}
backend: {{engine: "{ctx.engine}", pjrt_plugin: "{ctx.plugin or ''}"}}
""")
    run(ctx, name, [ctx.bins["cde-run"], "train", "--config", cfg, "--run-dir", run_dir], timeout=ctx.t(300))
    return base, run_dir


def check_c(ctx):
    need(ctx, "cde-run")
    base, run_dir = short_run(ctx, "c")
    exp = os.path.join(ctx.work, "c-export")
    shutil.rmtree(exp, ignore_errors=True)
    run(ctx, "c", [ctx.bins["cde-run"], "export", "--run", run_dir, "--out", exp, "--dtype", "f32"], timeout=ctx.t(120))
    before = score(ctx, "c", base, os.path.join(ctx.work, "c-score-base.jsonl"))
    after = score(ctx, "c", exp, os.path.join(ctx.work, "c-score-export.jsonl"))
    moved = max(abs(a - b) for x, y in zip(before, after) for a, b in zip(x["logprobs"], y["logprobs"]))
    res = {"tolerance": LOGPROB_TOL, "trained_logprob_change": moved, "files": sorted(os.listdir(exp))}
    if not moved > 1e-3:
        return "fail", dict(res, error=f"the export scores as the base model (max change {moved:.3g}): the run did not train")
    # The second testbed's shipped model (docs/results/transfer/TESTBED.md):
    # BF16 weights and Qwen3's BPE cut to 648 tokens, which HF's Rust
    # tokenizers has never loaded on the development machine.
    wordprob = os.path.join(ROOT, "assets", "wordprob-qwen3")
    score(ctx, "c", wordprob, os.path.join(ctx.work, "c-score-wordprob.jsonl"))
    try:
        import transformers  # noqa: F401
    except ImportError as e:
        return "skip", dict(res, reason=f"HF transformers is not installed here ({e}); train, export and score ran")
    ref = os.path.join(ctx.work, "c-ref.json")
    run(ctx, "c", [ctx.py, os.path.join(HERE, "ref_logprobs.py"), "--transformers", ctx.torch_device, ref,
                   exp, os.path.join(ctx.work, "c-score-export.jsonl"),
                   wordprob, os.path.join(ctx.work, "c-score-wordprob.jsonl")], timeout=ctx.t(300))
    keys = ("transformers", "model_class", "tokenizer_class", "tokenizer_id_mismatches", "max_abs_diff", "tokens")
    r, w = json.load(open(ref))
    res.update({k: r[k] for k in keys})
    res["wordprob"] = {k: w[k] for k in keys}
    ok = all(x["max_abs_diff"] <= LOGPROB_TOL and x["tokenizer_id_mismatches"] == 0 for x in (r, w))
    return ("pass" if ok else "fail"), res


# ---- f: LoRA, PEFT ---------------------------------------------------------------

def check_f(ctx):
    need(ctx, "cde-run")
    base, run_dir = short_run(ctx, "f", ", lora: {rank: 4, alpha: 8}", "1.0e-2")
    adapter, merged = os.path.join(ctx.work, "f-adapter"), os.path.join(ctx.work, "f-merged")
    for d in (adapter, merged):
        shutil.rmtree(d, ignore_errors=True)
    run(ctx, "f", [ctx.bins["cde-run"], "export", "--run", run_dir, "--out", adapter], timeout=ctx.t(120))
    run(ctx, "f", [ctx.bins["cde-run"], "export", "--run", run_dir, "--out", merged, "--merge"], timeout=ctx.t(120))
    plain = score(ctx, "f", base, os.path.join(ctx.work, "f-score-base.jsonl"))
    scored_ad = os.path.join(ctx.work, "f-score-adapter.jsonl")
    with_ad = score(ctx, "f", base, scored_ad, adapter=adapter)
    scored_merged = os.path.join(ctx.work, "f-score-merged.jsonl")
    by_merged = score(ctx, "f", merged, scored_merged)
    moved = max(abs(a - b) for x, y in zip(plain, with_ad) for a, b in zip(x["logprobs"], y["logprobs"]))
    same = all(x["logprobs"] == y["logprobs"] for x, y in zip(with_ad, by_merged))
    res = {"tolerance": LOGPROB_TOL, "adapter_files": sorted(os.listdir(adapter)), "trained_logprob_change": moved,
           "adapter_equals_merged_export": same}
    if not moved > 1e-3:
        return "fail", dict(res, error=f"base + adapter scores as the base (max change {moved:.3g}): the adapters did not train")
    if not same:
        return "fail", dict(res, error="score --adapter differs from the merged export's score")
    # The merged export through the plain PyTorch forward (no cde code).
    ref = os.path.join(ctx.work, "f-ref-plain.json")
    run(ctx, "f", [ctx.py, os.path.join(HERE, "ref_logprobs.py"), ctx.torch_device, ref, merged, scored_merged], timeout=ctx.t(300))
    res["merged_plain_max_abs_diff"] = json.load(open(ref))[0]["max_abs_diff"]
    if not res["merged_plain_max_abs_diff"] <= LOGPROB_TOL:
        return "fail", res
    try:
        import peft  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        return "skip", dict(res, reason=f"HF transformers or peft is not installed here ({e}); train, export, score --adapter and the plain reference ran")
    ref = os.path.join(ctx.work, "f-ref-peft.json")
    run(ctx, "f", [ctx.py, os.path.join(HERE, "ref_logprobs.py"), "--peft", adapter, ctx.torch_device, ref, base, scored_ad], timeout=ctx.t(300))
    r = json.load(open(ref))[0]
    res.update({k: r[k] for k in ("peft", "transformers", "model_class", "max_abs_diff", "tokens")})
    return ("pass" if r["max_abs_diff"] <= LOGPROB_TOL else "fail"), res


# ---- g: LoRA with a bfloat16 base -----------------------------------------------

# The tolerance of check g: two float32 computations of the same values,
# which XLA may fuse differently.
BF16_BASE_TOL = 1e-4


def check_g(ctx):
    """The same short LoRA run on a BF16 checkpoint with model.lora.base_dtype
    float32 and bfloat16: the bfloat16 base holds the checkpoint's values
    exactly and widens them where they are read, so the runs' step metrics
    and exported adapters must agree (bit for bit on the cpu engine)."""
    need(ctx, "cde-run")
    metrics, adapters = {}, {}
    for bd in ("float32", "bfloat16"):
        _, run_dir = short_run(ctx, f"g-{bd}", f", lora: {{rank: 4, alpha: 8, base_dtype: {bd}}}", "1.0e-2", dtype="BF16")
        metrics[bd] = read_metrics(os.path.join(run_dir, "metrics.jsonl"))
        out = os.path.join(ctx.work, f"g-{bd}-adapter")
        shutil.rmtree(out, ignore_errors=True)
        run(ctx, "g", [ctx.bins["cde-run"], "export", "--run", run_dir, "--out", out], timeout=ctx.t(120))
        with open(os.path.join(out, "adapter_model.safetensors"), "rb") as f:
            adapters[bd] = f.read()
    worst, compared = 0.0, 0
    for a, b in zip(metrics["float32"], metrics["bfloat16"]):
        for k, x in a.items():
            y = b.get(k)
            if isinstance(x, (int, float)) and isinstance(y, (int, float)) and k.startswith(("actor/", "reward/")):
                compared += 1
                worst = max(worst, abs(x - y) / max(1.0, abs(x)))
    res = {"tolerance": BF16_BASE_TOL, "steps": len(metrics["float32"]), "metrics_compared": compared,
           "max_rel_diff": worst, "adapters_identical": adapters["float32"] == adapters["bfloat16"]}
    if compared == 0 or len(metrics["float32"]) != len(metrics["bfloat16"]):
        return "fail", dict(res, error="no actor/reward metrics to compare, or the runs logged different numbers of steps")
    if ctx.dry and not (worst == 0 and res["adapters_identical"]):
        return "fail", dict(res, error="on the cpu engine the bfloat16 base must give the float32 base's run bit for bit")
    return ("pass" if worst <= BF16_BASE_TOL else "fail"), res


# ---- d: hfbench ----------------------------------------------------------------

class GPUMemSampler:
    """Samples nvidia-smi's per-process GPU memory every 0.25 s and keeps
    each pid's peak (MiB)."""

    def __init__(self):
        self.peak, self.stop, self.t = {}, threading.Event(), None
        self.ok = shutil.which("nvidia-smi") is not None

    def __enter__(self):
        if self.ok:
            self.t = threading.Thread(target=self.loop, daemon=True)
            self.t.start()
        return self

    def loop(self):
        while not self.stop.is_set():
            try:
                q = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                                   capture_output=True, text=True, timeout=10)
                for line in q.stdout.splitlines():
                    pid, mib = [x.strip() for x in line.split(",")]
                    self.peak[int(pid)] = max(self.peak.get(int(pid), 0), float(mib))
            except Exception:
                pass
            self.stop.wait(0.25)

    def __exit__(self, *a):
        self.stop.set()
        if self.t:
            self.t.join()


def check_d(ctx):
    need(ctx, "hfbench")
    js = os.path.join(ctx.work, "hfbench.json")
    cmd = [ctx.bins["hfbench"], "--engine", ctx.engine, "--torch-device", ctx.torch_device, "--python", ctx.py, "--json", js]
    if ctx.plugin:
        cmd += ["--pjrt-plugin", ctx.plugin]
    if ctx.dry:
        cmd += ["--layers", "1", "--batch", "2", "--seq", "80", "--decode", "4", "--reps", "1", "--decode-batches", "1,2"]
    with GPUMemSampler() as mem:
        # The sampler sees cde's process (hfbench) and PyTorch's (its child).
        run(ctx, "d", cmd, timeout=ctx.t(540))
    res = json.load(open(js))
    g, t = res.get("go", {}), res.get("torch", {})
    fig = {"shape": "Qwen3-0.6B (28 layers)" if not ctx.dry else "1 layer, 2 x 80 (dry)", "cde": {}, "torch": {}, "ratio_cde_over_torch": {}}
    for k in sorted(set(g) | set(t)):
        if k.endswith("_s"):
            fig["cde"][k], fig["torch"][k] = g.get(k), t.get(k)
            if g.get(k) and t.get(k):
                fig["ratio_cde_over_torch"][k] = g[k] / t[k]
        elif k.startswith("peak_gpu"):
            fig["torch"][k] = t[k]
    if mem.peak:
        # hfbench runs cde first, then PyTorch as a child: the first pid seen
        # is cde's.
        pids = list(mem.peak)
        fig["nvidia_smi_peak_mib"] = {"cde": mem.peak[pids[0]]}
        if len(pids) > 1:
            fig["nvidia_smi_peak_mib"]["torch"] = mem.peak[pids[-1]]
    fig["log"] = "logs/d.log"
    return "pass", fig


# ---- e: train on both engines --------------------------------------------------

def read_metrics(path):
    rows = []
    with open(path) as f:
        for line in f:
            if line.strip():
                rows.append(json.loads(line))
    return rows


def check_e(ctx):
    need(ctx, "cde-run")
    steps = 3 if ctx.dry else 50
    runs = {"default": [], "ppo_multihead": ["--set", "algorithm.name=ppo", "--set", "strategies=[{name: multihead, heads: 4}]"]}
    engines = ["cpu", "go"] if ctx.dry else ["cpu", ctx.engine]
    res, status = {"steps": steps, "engines": engines}, "pass"
    for name, extra in runs.items():
        per = {}
        for eng in engines:
            d = os.path.join(ctx.work, f"e-{name}-{eng.replace(':', '_')}")
            shutil.rmtree(d, ignore_errors=True)
            cmd = [ctx.bins["cde-run"], "train", "--run-dir", d, "--set", f"train.steps={steps}",
                   "--set", f"backend.engine={eng}"] + extra
            if ctx.plugin and eng.startswith("xla:"):
                cmd += ["--set", f"backend.pjrt_plugin={ctx.plugin}"]
            t0 = time.time()
            run(ctx, "e", cmd, timeout=ctx.t(420))
            rows = [r for r in read_metrics(os.path.join(d, "metrics.jsonl")) if "perf/step_s" in r]
            st = [r["perf/step_s"] for r in rows]
            per[eng] = {"wall_s": time.time() - t0, "steps": len(rows), "median_step_s": statistics.median(st) if st else None,
                        "first_step_s": st[0] if st else None, "rows": rows[:3]}
            # What finished so far, in case the run is cut short.
            res[name] = {"per_engine": {e: {k: v for k, v in r.items() if k != "rows"} for e, r in per.items()}}
            write_summary(ctx, dict(ctx.results, e={"status": "running", "figures": res, "seconds": 0}))
        a, b = per[engines[0]], per[engines[1]]
        diffs = {}
        for ra, rb in zip(a.pop("rows"), b.pop("rows")):
            for k, va in ra.items():
                vb = rb.get(k)
                if k.startswith("perf/") or not isinstance(va, (int, float)) or not isinstance(vb, (int, float)):
                    continue
                d = abs(va - vb) / max(1e-6, abs(va), abs(vb))
                if d > diffs.get(k, (0,))[0]:
                    diffs[k] = (d, ra.get("step"), va, vb)
        worst = sorted(diffs.items(), key=lambda kv: -kv[1][0])[:6]
        res[name] = {"per_engine": per, "ratio_median_step": (b["median_step_s"] / a["median_step_s"]) if a["median_step_s"] and b["median_step_s"] else None,
                     "first3_max_rel_diff": worst[0][1][0] if worst else 0.0,
                     "first3_worst": [{"metric": k, "rel_diff": v[0], "step": v[1], engines[0]: v[2], engines[1]: v[3]} for k, v in worst]}
        if a["steps"] != steps or b["steps"] != steps:
            status = "fail"
    return status, res


# ---- t: TensorBoard reads a run's event file ----------------------------------

def check_t(ctx):
    need(ctx, "cde-run")
    d = os.path.join(ctx.work, "t-run")
    shutil.rmtree(d, ignore_errors=True)
    steps = 6
    cmd = [ctx.bins["cde-run"], "train", "--run-dir", d, "--set", f"train.steps={steps}", "--set", "eval.every=3",
           "--set", "train.logger=[jsonl, tensorboard]", "--set", f"backend.engine={ctx.engine}"]
    if ctx.plugin and ctx.engine.startswith("xla:"):
        cmd += ["--set", f"backend.pjrt_plugin={ctx.plugin}"]
    run(ctx, "t", cmd, timeout=ctx.t(420))
    rows = read_metrics(os.path.join(d, "metrics.jsonl"))
    files = sorted(glob.glob(os.path.join(d, "events.out.tfevents.*")))
    res = {"event_files": [os.path.basename(f) for f in files], "metrics_rows": len(rows)}
    if len(files) != 1:
        return "fail", dict(res, error=f"{len(files)} event files in the run directory, want 1")
    try:
        import tensorboard
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError as e:
        return "skip", dict(res, reason=f"tensorboard is not installed here ({e}); the run wrote its event file")
    res["tensorboard"] = tensorboard.__version__
    acc = EventAccumulator(d, size_guidance={"scalars": 0})
    acc.Reload()
    got = {tag: {ev.step: ev.value for ev in acc.Scalars(tag)} for tag in acc.Tags()["scalars"]}
    compared, bad = 0, []
    for row in rows:
        for k, v in row.items():
            if k == "step":
                continue
            x = got.get(k, {}).get(row["step"])
            if x is None:
                bad.append(f"{k}@{row['step']} missing")
            elif v is None:
                if math.isfinite(x):
                    bad.append(f"{k}@{row['step']}: null in metrics.jsonl, {x} in TensorBoard")
            elif struct.unpack("<f", struct.pack("<f", v))[0] != x:
                bad.append(f"{k}@{row['step']}: metrics.jsonl {v}, TensorBoard {x}")
            compared += 1
    res.update({"scalars_compared": compared, "tags": len(got), "mismatches": bad[:10]})
    if bad or compared == 0:
        return "fail", dict(res, error=f"{len(bad)} of {compared} values differ or are missing")
    return "pass", res


# ---- h: generation throughput against PyTorch --------------------------------

# Check h's response lengths: a fixed spread in [16, 256] (64 values from a
# seeded generator); batch B uses the first B.
def spread_lengths():
    import random
    r = random.Random(42)
    return [r.randint(16, 256) for _ in range(64)]


_COMPILING = re.compile(r'Compiling "(.*)"')
_MEMUSE = re.compile(r"Memory usage: On Device: \[Code:([^,]*), Inputs:([^,]*), Outputs:([^,]*), Aliases:([^,]*), Temporary:([^\]]*)\]")
_UNITS = {"B": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}


def human_bytes(s):
    """go-humanize's Bytes ("512 B", "1.2 GB") back to bytes."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*([kKMGT]?B)\s*", s)
    if not m:
        raise ValueError(f"not a byte size: {s!r}")
    return float(m.group(1)) * _UNITS[m.group(2)]


def xla_memory(text):
    """The graphs go-xla compiled, from its compile log at klog verbosity 1
    (hfbench --xla-memory-log): per graph its device memory in MiB (code,
    inputs, outputs, aliases, temporary), largest inputs + outputs +
    temporary first."""
    name, out = None, []
    for line in text.splitlines():
        m = _COMPILING.search(line)
        if m:
            name = m.group(1)
            continue
        m = _MEMUSE.search(line)
        if m:
            parts = [human_bytes(x) / 2**20 for x in m.groups()]
            out.append(dict(zip(("graph", "code_mib", "inputs_mib", "outputs_mib", "aliases_mib", "temporary_mib"), [name] + parts)))
    out.sort(key=lambda g: -(g["inputs_mib"] + g["outputs_mib"] + g["temporary_mib"]))
    return out


def check_h(ctx):
    """cde's generation at the Qwen3-0.6B shape (benchmarks/hfbench's decode:
    the time per step from the difference of a long and a one-token
    generation) with the loop on the device and, for the before figure, on
    the host (CDE_GENERATE), against HF generate (gen_torch.py) on the same
    device, with the bandwidth floor and each side's peak memory."""
    need(ctx, "hfbench")
    lengths = spread_lengths()
    lf = os.path.join(ctx.work, "h-lengths.json")
    json.dump(lengths, open(lf, "w"))
    res = {"lengths": "64 values in [16, 256], random.Random(42); batch B takes the first B", "cde": {}}
    # The device loop needs integer ops that the cpu engine lacks: the dry
    # run takes the go engine.
    eng = "go" if ctx.dry else ctx.engine
    # The device loop's run also times continuous batching: 64 responses
    # whose lengths spread (1 in 128 vocabulary ids stops one, at most 512
    # tokens), all at once and in 32 slots (hfbench --spread).
    # device_bf16 is the device loop with rollout.dtype bfloat16.
    bf16 = ["--gen-dtype", "bfloat16"]
    if ctx.dry:
        loops = [("device", "1,2", 6, ["--spread", "3", "--spread-slots", "2", "--spread-max", "4"]), ("host", "2", 6, []),
                 ("device_bf16", "1,2", 6, bf16)]
        small = ["--layers", "1", "--reps", "1"]
    else:
        loops = [("device", "1,32,64", 64, ["--spread", "64", "--spread-slots", "32", "--spread-max", "512", "--spread-stop", "128"]),
                 ("host", "32", 32, []), ("device_bf16", "1,32,64", 64, bf16)]
        small = ["--reps", "1"]
    for name, batches, tokens, extra in loops:
        loop = name.split("_")[0]
        js = os.path.join(ctx.work, f"h-cde-{name}.json")
        cmd = [ctx.bins["hfbench"], "--engine", eng, "--only", "go", "--skip-forward", "--skip-train",
               "--decode", str(tokens), "--decode-batches", batches, "--json", js] + small + extra
        if ctx.plugin:
            cmd += ["--pjrt-plugin", ctx.plugin]
        # Where the device memory goes (issue 42, item 5): every graph the
        # float32 device loop compiles, with its inputs, outputs and
        # temporaries (go-xla also logs two lines per execution then, a few
        # microseconds against milliseconds a call).
        if name == "device":
            cmd += ["--xla-memory-log"]
        logf = os.path.join(ctx.out, "logs", "h.log")
        at = os.path.getsize(logf) if os.path.exists(logf) else 0
        try:
            with GPUMemSampler() as mem:
                run(ctx, "h", cmd, timeout=ctx.t(240), env={"CDE_GENERATE": loop})
        except RuntimeError as e:
            res["cde"][name] = {"error": str(e)[:300]}
            continue
        with open(logf, errors="replace") as f:
            f.seek(at)
            graphs = xla_memory(f.read())
        g = json.load(open(js)).get("go", {})
        r = {"engine": eng, "tokens": tokens, "dtype": "bfloat16" if extra == bf16 else "float32"}
        for nb in [int(x) for x in batches.split(",")]:
            step = g.get(f"decode{nb}_s", 0) / tokens
            r[f"batch{nb}_ms_per_step"] = 1e3 * step
            if nb > 1 and step > 0:
                ls = lengths[:nb]
                # No slot is freed early (neither side does): max(ls) steps.
                r[f"batch{nb}_tokens_per_s"] = sum(ls) / (max(ls) * step)
        r.update({k: v for k, v in g.items() if k.startswith("spread_")})
        if mem.peak:
            r["nvidia_smi_peak_mib"] = max(mem.peak.values())
        if name == "device":
            r["graphs_compiled"] = len(graphs)
            r["largest_graphs"] = graphs[:6]
        res["cde"][name] = r
        write_summary(ctx, dict(ctx.results, h={"status": "running", "figures": res, "seconds": 0}))
    tj = os.path.join(ctx.work, "h-torch.json")
    tcmd = [ctx.py, os.path.join(HERE, "gen_torch.py"), "--json", tj, "--device", ctx.torch_device, "--lengths", lf]
    if ctx.dry:
        tcmd += ["--small", "--layers", "1", "--dtypes", "float32", "--modes", "eager,static", "--batches", "2", "--tokens", "6"]
    else:
        tcmd += ["--dtypes", "float32,bfloat16", "--modes", "eager,compiled", "--batches", "32,64", "--tokens", "32"]
    try:
        with GPUMemSampler() as mem:
            run(ctx, "h", tcmd, timeout=ctx.t(300))
    except RuntimeError as e:
        res["torch_error"] = str(e)[:300]
    t = json.load(open(tj)) if os.path.exists(tj) else {}
    res["torch"] = t
    if mem.peak:
        res["torch_nvidia_smi_peak_mib"] = max(mem.peak.values())
    dev = res["cde"].get("device", {})
    if "error" in dev or not dev:
        return "fail", dict(res, error="cde's device loop did not run")
    if t.get("skip"):
        return "skip", dict(res, reason=t["skip"] + "; cde's side ran")
    # The targets of the issue, as ratios.
    floor = t.get("floor_ms_per_step", {}).get("float32")
    eager = next((r for r in t.get("runs", []) if r.get("mode") == "eager" and "error" not in r), None)
    ratios = {}
    if floor and dev.get("batch1_ms_per_step"):
        ratios["batch1_over_floor"] = dev["batch1_ms_per_step"] / floor
    if eager:
        for nb in (32, 64):
            if eager.get(f"batch{nb}_s") and dev.get(f"batch{nb}_ms_per_step"):
                ratios[f"batch{nb}_step_over_torch_eager"] = dev[f"batch{nb}_ms_per_step"] / (1e3 * eager[f"batch{nb}_s"] / eager[f"batch{nb}_steps"])
    # bfloat16 against PyTorch's bfloat16 and its floor (half the bytes).
    b16 = res["cde"].get("device_bf16", {})
    floor16 = t.get("floor_ms_per_step", {}).get("bfloat16")
    eager16 = next((r for r in t.get("runs", []) if r.get("mode") == "eager" and r.get("dtype") == "bfloat16" and "error" not in r), None)
    if floor16 and b16.get("batch1_ms_per_step"):
        ratios["bf16_batch1_over_floor"] = b16["batch1_ms_per_step"] / floor16
    if eager16:
        for nb in (32, 64):
            if eager16.get(f"batch{nb}_s") and b16.get(f"batch{nb}_ms_per_step"):
                ratios[f"bf16_batch{nb}_step_over_torch_eager"] = b16[f"batch{nb}_ms_per_step"] / (1e3 * eager16[f"batch{nb}_s"] / eager16[f"batch{nb}_steps"])
    res["ratios"] = ratios
    return "pass", res


# ---- i: one GRPO step against TRL ------------------------------------------------

def check_i(ctx):
    """Three GRPO steps of 8 prompts x 8 responses (up to 256 new tokens) of
    an HF Qwen3 at the 0.6B shape (random weights), cde-run train on the
    engine against TRL's GRPOTrainer on the same device, phase by phase.
    cde's update runs in micro-batches of 16 rows (train.micro_batch_size):
    its memory estimate refuses one pass of 64 rows of a 152k vocabulary
    on a 141 GB machine (253 GB at model.max_len 640); TRL takes its
    default, one pass of the 64."""
    need(ctx, "cde-run")
    arch, tokens, steps, prompts, n = ("qwen3", 12, 2, 1, 4) if ctx.dry else ("qwen3-0.6b", 256, 3, 8, 8)
    base = tiny(ctx, arch, "F32", 1)
    run_dir = os.path.join(ctx.work, "i-run")
    shutil.rmtree(run_dir, ignore_errors=True)
    cfg = os.path.join(ctx.work, "i.yaml")
    with open(cfg, "w") as f:
        f.write(f"""seed: 1
task: {{name: math, train: {os.path.join(ROOT, 'tasks', 'testdata', 'gsm8k', 'test.jsonl')}, tokenizer: {base}}}
model: {{hf: {base}, max_len: {320 if ctx.dry else 640}}}
rollout: {{n: {n}, temperature: 1.0, max_response_tokens: {tokens}}}
train: {{steps: {steps}, prompts_per_step: {prompts}, micro_batch_size: {16 if not ctx.dry else 0}}}
algorithm: {{name: grpo}}
eval: {{at_start: false, every: 1000}}
backend: {{engine: "{ctx.engine}", pjrt_plugin: "{ctx.plugin or ''}"}}
""")
    res = {"shape": arch, "prompts": prompts, "responses_per_prompt": n, "max_new_tokens": tokens, "steps": steps}
    t0 = time.time()
    with GPUMemSampler() as mem:
        run(ctx, "i", [ctx.bins["cde-run"], "train", "--config", cfg, "--run-dir", run_dir], timeout=ctx.t(300))
    rows = [r for r in read_metrics(os.path.join(run_dir, "metrics.jsonl")) if "perf/step_s" in r]
    res["cde"] = {"wall_s": time.time() - t0, "steps": [
        {"step_s": r["perf/step_s"], "generation_s": r.get("perf/gen_s"), "update_s": r.get("perf/update_s"),
         "tokens": r.get("perf/tokens")} for r in rows]}
    if mem.peak:
        res["cde"]["nvidia_smi_peak_mib"] = max(mem.peak.values())
    if len(rows) != steps:
        return "fail", dict(res, error=f"cde ran {len(rows)} of {steps} steps")
    tj = os.path.join(ctx.work, "i-trl.json")
    site_dir = os.path.join(ROOT, ".trl", "site")
    env = {"PYTHONPATH": site_dir} if os.path.isdir(site_dir) else {}
    try:
        with GPUMemSampler() as mem:
            run(ctx, "i", [ctx.py, os.path.join(HERE, "grpo_trl.py"), "--model", base, "--tokenizer", os.path.join(base, "tokenizer.json"),
                           "--json", tj, "--steps", str(steps), "--tokens", str(tokens), "--prompts", str(prompts), "--group", str(n),
                           "--device", ctx.torch_device], timeout=ctx.t(300), env=env)
    except RuntimeError as e:
        res["trl_error"] = str(e)[:300]
    trl = json.load(open(tj)) if os.path.exists(tj) else {}
    res["trl"] = trl
    if mem.peak:
        res["trl_nvidia_smi_peak_mib"] = max(mem.peak.values())
    if not trl.get("steps"):
        return "skip", dict(res, reason=(trl.get("error") or res.get("trl_error") or "TRL did not run") + "; cde's steps ran")
    # Steady state: the median of the steps after the first (compiles).
    def med(xs):
        return statistics.median(xs) if xs else None
    c_later = rows[1:] or rows
    t_later = trl["steps"][1:] or trl["steps"]
    res["median_step_s_after_first"] = {"cde": med([r["perf/step_s"] for r in c_later]), "trl": med([r["step_s"] for r in t_later])}
    m = res["median_step_s_after_first"]
    if m["cde"] and m["trl"]:
        res["ratio_cde_over_trl"] = m["cde"] / m["trl"]
    return "pass", res


CHECKS = {"a": ("conformance: actor and critic step (K=4) against the cpu engine", check_a),
          "b": ("score: tiny Llama, Qwen2, Qwen3 (F32, BF16) against PyTorch", check_b),
          "c": ("export: short run, export, HF transformers loads it", check_c),
          "d": ("hfbench: Qwen3-0.6B shape against PyTorch", check_d),
          "e": ("train: default and PPO + multihead, against the cpu engine", check_e),
          "f": ("LoRA: short run, export as a PEFT adapter, PEFT loads it", check_f),
          "g": ("LoRA with a bfloat16 base: the float32 base's run", check_g),
          "h": ("generation at the Qwen3-0.6B shape: device and host loops against HF generate", check_h),
          "i": ("GRPO steps of an HF Qwen3 (0.6B shape): cde-run train against TRL's GRPOTrainer", check_i),
          "t": ("TensorBoard: its EventAccumulator reads a run's event file as metrics.jsonl", check_t)}


def write_summary(ctx, results):
    with open(os.path.join(ctx.out, "summary.json"), "w") as f:
        json.dump({"mode": "dry" if ctx.dry else "gpu", "env": ctx.extra_env, "engine": ctx.engine, "torch_device": ctx.torch_device,
                   "plugin": ctx.plugin, "versions": ctx.versions, "date": time.strftime("%Y-%m-%d"), "checks": results}, f, indent=1)
    md = [f"# GPU check ({'dry run: cpu engine, PyTorch CPU' if ctx.dry else ctx.engine}), {time.strftime('%Y-%m-%d')}", "",
          "Versions: " + ", ".join(f"{k} {v}" for k, v in ctx.versions.items()), ""]
    if ctx.extra_env:
        md += ["Environment: " + " ".join(f"`{k}={v}`" for k, v in ctx.extra_env.items()), ""]
    if ctx.plugin:
        md += [f"Plugin: `{ctx.plugin}`", ""]
    md += ["| check | what | status | seconds | figures |", "|---|---|---|---|---|"]
    for k, r in results.items():
        figs = json.dumps(r.get("figures", {}), sort_keys=True)
        if len(figs) > 600:
            figs = figs[:600] + "... (summary.json)"
        why = (r.get("reason") or r.get("error") or "").replace("|", "\\|")
        md.append(f"| {k} | {CHECKS[k][0]} | **{r['status']}** {why} | {r['seconds']:.0f} | `{figs}` |")
    with open(os.path.join(ctx.out, "summary.md"), "w") as f:
        f.write("\n".join(md) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="output folder (created): summary.json, summary.md, logs/")
    ap.add_argument("--dry", action="store_true", help="engine cpu for xla:cuda, PyTorch on the CPU, small sizes (CI)")
    ap.add_argument("--plugin", default="", help="the PJRT CUDA plugin (default: found in the installed Python packages)")
    ap.add_argument("--bin", default=os.path.join(ROOT, ".gpucheck"), help="folder of cde-run, xla.test, hfbench (plain or .xz)")
    ap.add_argument("--only", default="abcdefghit", help="checks to run, e.g. a,b or abc")
    ap.add_argument("--python", default=sys.executable, help="the Python for the PyTorch and transformers parts")
    ap.add_argument("--env", action="append", default=[], metavar="K=V", help="set an environment variable for every check (repeatable)")
    ap.add_argument("--timeout-scale", type=float, default=1.0, help="multiplies every check's timeout")
    a = ap.parse_args()
    ctx = Ctx()
    ctx.dry, ctx.out, ctx.py, ctx.bin_dir = a.dry, os.path.abspath(a.out), a.python, a.bin
    ctx.t = lambda s: s * a.timeout_scale
    os.makedirs(os.path.join(ctx.out, "logs"), exist_ok=True)
    ctx.work = os.path.join(ctx.out, "work")
    os.makedirs(ctx.work, exist_ok=True)
    ctx.env = dict(os.environ)
    for kv in a.env:
        k, sep, v = kv.partition("=")
        if not sep or not k:
            ap.error(f"--env {kv!r}: want K=V")
        ctx.env[k] = v
    ctx.extra_env = dict(kv.partition("=")[::2] for kv in a.env)
    ctx.plugin = ""
    if a.dry:
        ctx.engine, ctx.torch_device = "cpu", "cpu"
    else:
        ctx.engine, ctx.torch_device = "xla:cuda", "cuda"
        ctx.plugin, libs = find_cuda(a.plugin)
        ctx.env["LD_LIBRARY_PATH"] = ":".join(libs + [p for p in [os.environ.get("LD_LIBRARY_PATH", "")] if p])
        # Grow GPU memory as needed (the plugin's default takes 75% at start),
        # so XLA and PyTorch can run one after the other and the peak is seen.
        ctx.env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    ctx.versions = versions(ctx)
    tok = check_tokenizer()
    ctx.bins = unpack(a.bin, os.path.join(ctx.out, "bin"))
    log(f"engine {ctx.engine}, PyTorch on {ctx.torch_device}, plugin {ctx.plugin or '-'}, binaries {sorted(ctx.bins)}, Qwen3 tokenizer {tok}")
    results = ctx.results = {}
    for key in [k for k in "abcdefghit" if k in a.only]:
        log(f"check {key}: {CHECKS[key][0]}")
        t0 = time.time()
        try:
            status, fig = CHECKS[key][1](ctx)
            r = {"status": status, "figures": fig}
            if "reason" in fig:
                r["reason"] = fig.pop("reason")
            if "error" in fig:
                r["error"] = fig.pop("error")
        except Exception as e:  # one check's failure never stops the rest
            r = {"status": "error", "error": f"{type(e).__name__}: {e}", "figures": {}}
        r["seconds"] = time.time() - t0
        results[key] = r
        log(f"check {key}: {r['status']} in {r['seconds']:.0f} s {r.get('error') or r.get('reason') or ''}")
        write_summary(ctx, results)
    print(open(os.path.join(ctx.out, "summary.md")).read())
    return 0 if all(r["status"] in ("pass", "skip") for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
