#!/usr/bin/python3
"""PyTorch CPU reference for cde's GoMLX transformer graphs (backends/xla).

The model mirrors backends/xla/model.go exactly:

  * learned token embeddings [V, d] and position embeddings [max_len, d],
    added (no scaling);
  * L pre-LayerNorm blocks: LN1 -> q, k, v = h Wq, h Wk, h Wv (no biases) ->
    H-head causal attention softmax(q k^T / sqrt(dh) + bias) v with bias 0 or
    -1e9 -> h Wo (no bias) -> residual; LN2 -> ReLU(h W1 + b1) W2 + b2 ->
    residual;
  * a final LayerNorm (eps 1e-5, biased variance, gain and bias) and an
    untied LM head W [d, V] with no bias.

Weights are stored as [in, out] matrices applied as x @ W, like model.go.

Measurements (each one call, timed with time.perf_counter):

  score   the scoring graph: logits / temperature -> log-softmax -> log-prob of
          each target token and the entropy, over the padded [B, T] batch,
          under torch.no_grad.
  train   the PPO actor step: forward, clipped surrogate token-mean loss with
          the entropy and k3-KL terms (coefficients 0 by default, as in the
          default config), backward, global-norm clip, Adam with the same
          bias-correction and epsilon placement as net.go.
  sample  KV-cache sampling: prefill the padded prompts, then decode one
          token at a time with a per-layer [B, H, Tmax, dh] cache, Gumbel-max
          sampling with host-drawn noise; reports tokens/s.

Modes:
  default        run warmup + reps of each measurement, print one JSON object.
  --serve        line protocol for the Go harness: prints an info JSON line,
                 then for each stdin line "score" | "train" | "sample" runs one
                 repetition and prints {"op", "seconds"}; "quit" ends.
  --check DIR    load weights and a batch written by the Go harness, compare
                 scoring log-probs and one actor step with the Go results,
                 print a JSON object of differences.
"""

import argparse
import json
import math
import os
import re
import statistics
import sys
import time

import torch
import torch.nn.functional as F

PAD = 0
ADAM_B1, ADAM_B2, ADAM_EPS = 0.9, 0.999, 1e-8


def round_up(n, m):
    return (n + m - 1) // m * m


# ---------------------------------------------------------------- BLAS info


def blas_info():
    cfg = torch.__config__.show()
    info = {"torch_config_blas_info": None, "torch_config_lapack_info": None}
    for key, field in (("BLAS_INFO", "torch_config_blas_info"), ("LAPACK_INFO", "torch_config_lapack_info")):
        m = re.search(r"\b" + key + r"=([^,\s]+)", cfg)
        if m:
            info[field] = m.group(1)
    libs = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                fields = line.split()
                if len(fields) >= 6:
                    path = fields[-1]
                    base = os.path.basename(path).lower()
                    if any(k in base for k in ("blas", "lapack", "mkl", "blis", "atlas")):
                        libs.add(path)
    except OSError:
        pass
    libs = sorted(libs)
    info["loaded_blas_libraries"] = libs
    info["openblas_loaded"] = any("openblas" in p.lower() for p in libs)
    info["mkl_loaded"] = any("mkl" in os.path.basename(p).lower() for p in libs)
    if info["openblas_loaded"]:
        info["blas"] = "OpenBLAS (" + ", ".join(p for p in libs if "openblas" in p.lower() and "libopenblas" in p.lower()) + ")"
    elif info["mkl_loaded"]:
        info["blas"] = "MKL"
    elif libs:
        info["blas"] = "other: " + ", ".join(libs)
    else:
        info["blas"] = "none found in /proc/self/maps (reference BLAS or built-in kernels)"
    info["torch_mkldnn_enabled"] = bool(torch.backends.mkldnn.is_available())
    return info


# ---------------------------------------------------------------- model


class Model(torch.nn.Module):
    """The causal transformer of backends/xla/model.go (policy variant)."""

    def __init__(self, vocab, layers, d_model, heads, ff, max_len, init_std=0.02, seed=1):
        super().__init__()
        if d_model % heads != 0:
            raise ValueError("d_model must be a multiple of heads")
        self.vocab, self.layers, self.d, self.heads, self.ff, self.max_len = vocab, layers, d_model, heads, ff, max_len
        self.dh = d_model // heads
        g = torch.Generator().manual_seed(seed)
        proj = init_std / math.sqrt(2 * layers)

        def normal(std, *shape):
            return torch.nn.Parameter(torch.randn(*shape, generator=g) * std)

        def const(v, *shape):
            return torch.nn.Parameter(torch.full(shape, float(v)))

        # Names follow the GoMLX variables: "/layer0/wq" -> "layer0_wq".
        p = torch.nn.ParameterDict()
        p["embed_tokens"] = normal(init_std, vocab, d_model)
        p["embed_positions"] = normal(init_std, max_len, d_model)
        for l in range(layers):
            s = "layer%d_" % l
            p[s + "ln1_gain"] = const(1, d_model)
            p[s + "ln1_bias"] = const(0, d_model)
            p[s + "wq"] = normal(init_std, d_model, d_model)
            p[s + "wk"] = normal(init_std, d_model, d_model)
            p[s + "wv"] = normal(init_std, d_model, d_model)
            p[s + "wo"] = normal(proj, d_model, d_model)
            p[s + "ln2_gain"] = const(1, d_model)
            p[s + "ln2_bias"] = const(0, d_model)
            p[s + "w1"] = normal(init_std, d_model, ff)
            p[s + "b1"] = const(0, ff)
            p[s + "w2"] = normal(proj, ff, d_model)
            p[s + "b2"] = const(0, d_model)
        p["final_ln_gain"] = const(1, d_model)
        p["final_ln_bias"] = const(0, d_model)
        p["lm_w"] = normal(init_std, d_model, vocab)
        self.p = p

    def param_count(self):
        return sum(t.numel() for t in self.parameters())

    def load_go_vars(self, named):
        """Copies GoMLX variables {"/layer0/wq": tensor} into the parameters."""
        seen = set()
        with torch.no_grad():
            for name, t in named.items():
                key = name.strip("/").replace("/", "_")
                if key not in self.p:
                    raise KeyError("GoMLX variable %s has no torch parameter %s" % (name, key))
                if tuple(self.p[key].shape) != tuple(t.shape):
                    raise ValueError("%s: shape %s vs torch %s" % (name, tuple(t.shape), tuple(self.p[key].shape)))
                self.p[key].copy_(t)
                seen.add(key)
        missing = set(self.p.keys()) - seen
        if missing:
            raise KeyError("torch parameters without a GoMLX variable: %s" % sorted(missing))

    def _ln(self, x, prefix):
        return F.layer_norm(x, (self.d,), self.p[prefix + "gain"], self.p[prefix + "bias"], 1e-5)

    def _split(self, x):  # [B,T,d] -> [B,H,T,dh]
        b, t, _ = x.shape
        return x.view(b, t, self.heads, self.dh).transpose(1, 2)

    def _merge(self, x):  # [B,H,T,dh] -> [B,T,d]
        b, _, t, _ = x.shape
        return x.transpose(1, 2).reshape(b, t, self.d)

    def _attend(self, q, k, v, bias):
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(self.dh)) + bias
        return torch.matmul(torch.softmax(scores, dim=-1), v)

    def block(self, l, x, bias, kv_fn=None):
        s = "layer%d_" % l
        p = self.p
        h = self._ln(x, s + "ln1_")
        q = self._split(h @ p[s + "wq"])
        k = self._split(h @ p[s + "wk"])
        v = self._split(h @ p[s + "wv"])
        if kv_fn is not None:
            k, v = kv_fn(l, k, v)
        a = self._merge(self._attend(q, k, v, bias))
        x = x + a @ p[s + "wo"]
        h = self._ln(x, s + "ln2_")
        h = F.relu(h @ p[s + "w1"] + p[s + "b1"])
        return x + (h @ p[s + "w2"] + p[s + "b2"])

    def embed(self, tokens, positions):
        return F.embedding(tokens, self.p["embed_tokens"]) + F.embedding(positions, self.p["embed_positions"])

    def hidden(self, tokens):
        b, t = tokens.shape
        pos = torch.arange(t).unsqueeze(0).expand(b, t)
        x = self.embed(tokens, pos)
        bias = causal_bias(t)
        for l in range(self.layers):
            x = self.block(l, x, bias)
        return self._ln(x, "final_ln_")

    def logits(self, h):
        return h @ self.p["lm_w"]


def causal_bias(t):
    """0 where key <= query, -1e9 elsewhere, [1,1,T,T] (as causalBias)."""
    allowed = torch.ones(t, t, dtype=torch.bool).tril()
    return torch.zeros(t, t).masked_fill(~allowed, -1e9).view(1, 1, t, t)


def token_log_probs(lp, targets):
    tlp = lp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    ent = -(lp.exp() * lp).sum(-1)
    return tlp, ent


def masked_mean(x, mask):
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


# ---------------------------------------------------------------- data


class Batch:
    """The padded [B, T] layout of backend.go's layout(): prompt ++ response,
    PAD elsewhere; the target of response token t of row i sits at position
    len(prompt_i) - 1 + t."""

    def __init__(self, prompts, responses, old_lps, advs, max_len, seq_pad=8):
        b = len(prompts)
        max_l = max(len(p) + len(r) for p, r in zip(prompts, responses))
        t = min(round_up(max_l, seq_pad), max_len)
        if max_l > t:
            raise ValueError("sequence of %d tokens exceeds max_len %d" % (max_l, max_len))
        tokens = torch.full((b, t), PAD, dtype=torch.long)
        targets = torch.zeros(b, t, dtype=torch.long)
        mask = torch.zeros(b, t)
        adv = torch.zeros(b, t)
        old = torch.zeros(b, t)
        rows, cols = [], []
        for i, (p, r) in enumerate(zip(prompts, responses)):
            seq = list(p) + list(r)
            tokens[i, : len(seq)] = torch.tensor(seq, dtype=torch.long)
            for j, tok in enumerate(r):
                at = len(p) - 1 + j
                targets[i, at] = tok
                mask[i, at] = 1
                adv[i, at] = advs[i][j]
                old[i, at] = old_lps[i][j]
                rows.append(i)
                cols.append(at)
        self.b, self.t = b, t
        self.tokens, self.targets, self.mask, self.adv, self.old_lp = tokens, targets, mask, adv, old
        self.ref_lp = old.clone()  # kl_coef 0: the reference log-probs are the old ones (as backend.go)
        self.rows, self.cols = torch.tensor(rows), torch.tensor(cols)
        self.lengths = [len(r) for r in responses]


def synthetic(vocab, b, prompt, response, seed=1):
    """Random prompts and responses in [3, V), old log-probs -4.6 and N(0,1)
    advantages, like backends/xla/bench_test.go's benchRollout."""
    g = torch.Generator().manual_seed(seed)
    prompts = torch.randint(3, vocab, (b, prompt), generator=g).tolist()
    responses = torch.randint(3, vocab, (b, response), generator=g).tolist()
    old = [[-4.6] * response for _ in range(b)]
    adv = torch.randn(b, response, generator=g).tolist()
    return prompts, responses, old, adv


# ---------------------------------------------------------------- graphs


@torch.no_grad()
def score(model, batch, temperature=1.0):
    """The scoring graph: per-position target log-prob and entropy [B, T]."""
    lp = torch.log_softmax(model.logits(model.hidden(batch.tokens)) * (1.0 / temperature), dim=-1)
    return token_log_probs(lp, batch.targets)


class Actor:
    """The PPO actor step of net.go's buildActorTrain + adamUpdate."""

    def __init__(self, model, lr=1e-4, max_grad_norm=1.0, clip_low=0.2, clip_high=0.2,
                 ent_coef=0.0, kl_coef=0.0, temperature=1.0):
        self.model = model
        self.params = list(model.parameters())
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]
        self.step_count = 0
        self.lr, self.max_grad_norm = lr, max_grad_norm
        self.clip_low, self.clip_high = clip_low, clip_high
        self.ent_coef, self.kl_coef, self.temperature = ent_coef, kl_coef, temperature

    def step(self, batch):
        model = self.model
        lp = torch.log_softmax(model.logits(model.hidden(batch.tokens)) * (1.0 / self.temperature), dim=-1)
        logp, ent = token_log_probs(lp, batch.targets)
        ratio = torch.exp(logp - batch.old_lp)
        clipped = torch.clamp(ratio, 1.0 - self.clip_low, 1.0 + self.clip_high)
        loss1 = -batch.adv * ratio
        loss2 = -batch.adv * clipped
        pg = torch.maximum(loss1, loss2)
        d = batch.ref_lp - logp
        kl = torch.exp(d) - d - 1.0
        mask = batch.mask
        pg_loss = masked_mean(pg, mask)
        ent_mean = masked_mean(ent, mask)
        kl_mean = masked_mean(kl, mask)
        # The coefficients stay in the graph even at 0, as in net.go (where
        # they are inputs of the compiled graph).
        loss = pg_loss - self.ent_coef * ent_mean + self.kl_coef * kl_mean
        grads = torch.autograd.grad(loss, self.params)
        with torch.no_grad():
            norm = torch.sqrt(sum((g * g).sum() for g in grads))
            scale = torch.clamp(self.max_grad_norm / (norm + 1e-6), max=1.0)
            self.step_count += 1
            t = self.step_count
            lr_t = self.lr * math.sqrt(1 - ADAM_B2 ** t) / (1 - ADAM_B1 ** t)
            for p, g, m, v in zip(self.params, grads, self.m, self.v):
                g = g * scale
                m.mul_(ADAM_B1).add_(g, alpha=1 - ADAM_B1)
                v.mul_(ADAM_B2).addcmul_(g, g, value=1 - ADAM_B2)
                p.sub_(m * lr_t / (v.sqrt() + ADAM_EPS))
            clipfrac = masked_mean((loss2 > loss1).float(), mask)
            nll = masked_mean(-logp, mask)
        return {"actor/loss": loss.item(), "actor/pg_loss": pg_loss.item(), "actor/pg_clipfrac": clipfrac.item(),
                "actor/entropy": ent_mean.item(), "actor/kl": kl_mean.item(), "actor/grad_norm": norm.item(),
                "actor/nll": nll.item()}


@torch.no_grad()
def generate(model, prompts, max_tokens, temperature=1.0, eos=-1, prompt_pad=4, gen=None):
    """KV-cache sampling as backend.go's Generate: prefill the prompts padded to
    a multiple of prompt_pad, then one decode step per token with a
    [B, H, Tmax, dh] cache per layer, attention over all Tmax keys masked to
    positions <= pos, Gumbel-max sampling with noise drawn per step. Returns
    tokens [B, N], their log-probs and the entropies."""
    b = len(prompts)
    lens = torch.tensor([len(p) for p in prompts])
    pp = round_up(int(lens.max()), prompt_pad)
    tmax = pp + max_tokens
    if tmax > model.max_len:
        raise ValueError("prompt %d + max tokens %d exceeds max_len %d" % (pp, max_tokens, model.max_len))
    tokens = torch.full((b, pp), PAD, dtype=torch.long)
    for i, p in enumerate(prompts):
        tokens[i, : len(p)] = torch.tensor(p, dtype=torch.long)
    rows = torch.arange(b)
    inv_t = 1.0 / temperature
    caches = [[torch.zeros(b, model.heads, tmax, model.dh), torch.zeros(b, model.heads, tmax, model.dh)]
              for _ in range(model.layers)]

    def noise():
        u = torch.rand(b, model.vocab, generator=gen).clamp_(min=1e-30)
        return -torch.log(-torch.log(u))

    def pick(h):
        lp = torch.log_softmax(model.logits(h) * inv_t, dim=-1)
        tok = torch.argmax(lp + noise(), dim=-1)
        tok_lp = lp.gather(-1, tok.unsqueeze(-1)).squeeze(-1)
        ent = -(lp.exp() * lp).sum(-1)
        return tok, tok_lp, ent

    # Prefill.
    def keep(l, k, v):
        caches[l][0][:, :, :pp] = k
        caches[l][1][:, :, :pp] = v
        return k, v

    x = model.embed(tokens, torch.arange(pp).unsqueeze(0).expand(b, pp))
    bias = causal_bias(pp)
    for l in range(model.layers):
        x = model.block(l, x, bias, keep)
    h = model._ln(x, "final_ln_")
    tok, tok_lp, ent = pick(h[rows, lens - 1])
    out_tok, out_lp, out_ent = [tok], [tok_lp], [ent]
    done = tok == eos
    pos = lens.clone()
    key_idx = torch.arange(tmax).unsqueeze(0)

    # Decode.
    def update(l, k, v):
        kc, vc = caches[l]
        kc[rows, :, pos] = k[:, :, 0]
        vc[rows, :, pos] = v[:, :, 0]
        return kc, vc

    for _ in range(max_tokens - 1):
        if bool(done.all()):
            break
        x = model.embed(tok.unsqueeze(1), pos.unsqueeze(1))  # [B,1,d]
        bias = torch.zeros(b, tmax).masked_fill(key_idx > pos.unsqueeze(1), -1e9).view(b, 1, 1, tmax)
        for l in range(model.layers):
            x = model.block(l, x, bias, update)
        h = model._ln(x, "final_ln_")[:, 0]
        tok, tok_lp, ent = pick(h)
        out_tok.append(tok)
        out_lp.append(tok_lp)
        out_ent.append(ent)
        done = done | (tok == eos)
        pos = pos + 1
    return torch.stack(out_tok, 1), torch.stack(out_lp, 1), torch.stack(out_ent, 1)


# ---------------------------------------------------------------- bench


class Bench:
    def __init__(self, a):
        self.a = a
        ff = a.ff if a.ff > 0 else a.ff_mult * a.d_model
        self.ff = ff
        need = max(round_up(a.prompt + a.response, a.seq_pad), round_up(a.prompt, a.prompt_pad) + a.response)
        self.max_len = a.max_len if a.max_len > 0 else max(64, need)
        self.model = Model(a.vocab, a.layers, a.d_model, a.heads, ff, self.max_len, seed=a.seed)
        prompts, responses, old, adv = synthetic(a.vocab, a.batch, a.prompt, a.response, a.seed)
        self.prompts = prompts
        self.batch = Batch(prompts, responses, old, adv, self.max_len, a.seq_pad)
        self.actor = Actor(self.model, lr=a.lr, max_grad_norm=a.max_grad_norm, clip_low=a.clip_low,
                           clip_high=a.clip_high, ent_coef=a.ent_coef, kl_coef=a.kl_coef, temperature=a.temperature)
        self.gen = torch.Generator().manual_seed(a.seed)

    def info(self):
        a = self.a
        return {
            "torch_version": torch.__version__,
            "python": sys.version.split()[0],
            "threads": torch.get_num_threads(),
            "interop_threads": torch.get_num_interop_threads(),
            "blas": blas_info(),
            "config": {"vocab": a.vocab, "layers": a.layers, "d_model": a.d_model, "heads": a.heads, "ff": self.ff,
                       "max_len": self.max_len, "batch": a.batch, "prompt": a.prompt, "response": a.response,
                       "score_seq_len": self.batch.t, "sample_prompt_len": round_up(a.prompt, a.prompt_pad),
                       "temperature": a.temperature, "clip_low": a.clip_low, "clip_high": a.clip_high,
                       "ent_coef": a.ent_coef, "kl_coef": a.kl_coef, "lr": a.lr, "max_grad_norm": a.max_grad_norm},
            "param_count": self.model.param_count(),
        }

    def run(self, op):
        t0 = time.perf_counter()
        if op == "score":
            score(self.model, self.batch, self.a.temperature)
        elif op == "train":
            self.actor.step(self.batch)
        elif op == "sample":
            generate(self.model, self.prompts, self.a.response, self.a.temperature, eos=-1,
                     prompt_pad=self.a.prompt_pad, gen=self.gen)
        else:
            raise ValueError("unknown op %r" % op)
        return time.perf_counter() - t0


def run_bench(a):
    bench = Bench(a)
    out = bench.info()
    ops = [o for o in a.only.split(",") if o]
    results = {}
    for op in ops:
        for i in range(a.warmup):
            bench.run(op)
        samples = [bench.run(op) for _ in range(a.reps)]
        r = {"median_s": statistics.median(samples), "samples_s": samples}
        if op == "sample":
            r["tokens_per_s_median"] = a.batch * a.response / r["median_s"]
        results[op] = r
        print("torch_ref: %s median %.4f s" % (op, r["median_s"]), file=sys.stderr)
    out["results"] = results
    print(json.dumps(out))


def serve(a):
    bench = Bench(a)
    print(json.dumps(bench.info()), flush=True)
    for line in sys.stdin:
        op = line.strip()
        if not op:
            continue
        if op == "quit":
            break
        try:
            print(json.dumps({"op": op, "seconds": bench.run(op)}), flush=True)
        except Exception as e:  # report and keep serving
            print(json.dumps({"op": op, "error": repr(e)}), flush=True)


# ---------------------------------------------------------------- check


def load_vars(path, manifest_vars):
    data = torch.frombuffer(bytearray(open(path, "rb").read()), dtype=torch.float32)
    out = {}
    for v in manifest_vars:
        n = 1
        for d in v["dims"]:
            n *= d
        out[v["name"]] = data[v["offset"]: v["offset"] + n].clone().view(*v["dims"])
    return out


def check(a):
    """Compares scoring and one actor step with the Go results in a.check."""
    d = a.check
    man = json.load(open(os.path.join(d, "manifest.json")))
    c = man["config"]
    model = Model(c["vocab"], c["layers"], c["d_model"], c["heads"], c["ff"], c["max_len"])
    init = load_vars(os.path.join(d, man["init_file"]), man["vars"])
    model.load_go_vars(init)
    out = {"torch_version": torch.__version__, "param_count": model.param_count(), "engine": man.get("engine")}
    batch = Batch(man["prompts"], man["responses"], man["old_logprobs"], man["advantages"], c["max_len"],
                  c.get("seq_pad", 8))
    tlp, ent = score(model, batch, man.get("temperature", 1.0))
    got_lp = tlp[batch.rows, batch.cols]
    got_ent = ent[batch.rows, batch.cols]
    want_lp = torch.tensor([x for row in man["score_logprobs"] for x in row])
    want_ent = torch.tensor([x for row in man["score_entropies"] for x in row])
    out["score_logprob_max_abs_diff"] = (got_lp - want_lp).abs().max().item()
    out["score_entropy_max_abs_diff"] = (got_ent - want_ent).abs().max().item()
    u = man["update"]
    actor = Actor(model, lr=u["lr"], max_grad_norm=u["max_grad_norm"], clip_low=u["clip_low"],
                  clip_high=u["clip_high"], ent_coef=u["ent_coef"], kl_coef=u["kl_coef"],
                  temperature=u["temperature"])
    metrics = actor.step(batch)
    out["train_metrics_torch"] = metrics
    out["train_metrics_go"] = man["train_metrics"]
    out["train_metric_max_rel_diff"] = max(
        abs(metrics[k] - v) / max(abs(v), 1e-6) for k, v in man["train_metrics"].items() if k in metrics)
    after = load_vars(os.path.join(d, man["after_file"]), man["vars"])
    lr = u["lr"]
    max_diff, n_big, n = 0.0, 0, 0
    with torch.no_grad():
        for name, want in after.items():
            got = model.p[name.strip("/").replace("/", "_")]
            diff = (got - want).abs()
            max_diff = max(max_diff, diff.max().item())
            # Adam's first step moves every weight by about lr * sign(grad);
            # a sign flip of a near-zero gradient moves it by 2 lr the other
            # way. Count weights whose update differs by more than lr / 10.
            n_big += int((diff > lr / 10).sum().item())
            n += diff.numel()
    out["train_param_max_abs_diff"] = max_diff
    out["train_param_frac_diff_gt_lr_over_10"] = n_big / max(n, 1)
    out["adam_lr"] = lr
    print(json.dumps(out))


# ---------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab", type=int, default=101)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ff-mult", type=int, default=4, help="feed-forward width = ff_mult * d_model (model.ff 0)")
    ap.add_argument("--ff", type=int, default=0, help="feed-forward width; overrides --ff-mult when > 0")
    ap.add_argument("--max-len", type=int, default=0, help="position embeddings (0 = max(64, needed))")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--prompt", type=int, default=11)
    ap.add_argument("--response", type=int, default=32)
    ap.add_argument("--prompt-pad", type=int, default=4, help="Generate pads prompts to this multiple")
    ap.add_argument("--seq-pad", type=int, default=8, help="scoring/training pads sequences to this multiple")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", default="score,train,sample", help="measurements to run")
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--clip-low", type=float, default=0.2)
    ap.add_argument("--clip-high", type=float, default=0.2)
    ap.add_argument("--ent-coef", type=float, default=0.0)
    ap.add_argument("--kl-coef", type=float, default=0.0)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--max-grad-norm", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--serve", action="store_true", help="line protocol for the Go harness")
    ap.add_argument("--check", default="", help="directory written by the Go harness to compare against")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    if a.check:
        check(a)
    elif a.serve:
        serve(a)
    else:
        run_bench(a)


if __name__ == "__main__":
    main()
