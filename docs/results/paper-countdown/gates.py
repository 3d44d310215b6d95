#!/usr/bin/python3
"""The testbed gates (issue #14 item 2), measured again on the plain-GRPO
arm of the paper-countdown bench (5 seeds), against the base row.

    python3 docs/results/paper-countdown/gates.py docs/results/paper-countdown

Per seed: avg@64 (pass@1 estimated from 64 samples) and pass@64 on each eval
set for the base (runs/base/seed-S, the step-0 evaluation) and at the end of
GRPO training (runs/grpo/seed-S, step 200), the peak pass@64 over the
evaluations (base, steps 100 and 200); rollout entropy (nats/token) averaged
over the first and last 10 training steps; the training-batch PPL AUROC of
correct vs incorrect responses averaged over the first and last 20 steps.
"""
import json
import os
import sys

root = sys.argv[1] if len(sys.argv) > 1 else "."


def rows(arm, seed):
    return [json.loads(l) for l in open(os.path.join(root, "runs", arm, "seed-%d" % seed, "metrics.jsonl"))]


seeds = sorted(int(d.split("-")[1]) for d in os.listdir(os.path.join(root, "runs", "grpo")))
sets = ["c3", "c4", "ood", "mean"]
print("seed | entropy first10 -> last10 (change) | AUROC first20 -> last20 | " +
      " | ".join("%s avg@64 base -> end | %s pass@64 base -> peak -> end" % (s, s) for s in sets))
for s in seeds:
    base = rows("base", s)[0]
    g = rows("grpo", s)
    ev = [r for r in g if "val/mean/avg@64" in r]
    ent = [r["rollout/entropy"] for r in g if "rollout/entropy" in r]
    au = [r["calib/auroc"] for r in g if "calib/auroc" in r]
    e0, e1 = sum(ent[:10]) / 10, sum(ent[-10:]) / 10
    cols = []
    for st in sets:
        a, p = "val/%s/avg@64" % st, "val/%s/pass@64" % st
        peak = max([base[p]] + [r[p] for r in ev])
        cols.append("%.3f -> %.3f | %.3f -> %.3f -> %.3f" % (base[a], ev[-1][a], base[p], peak, ev[-1][p]))
    print("%d | %.3f -> %.3f (%+.0f%%) | %.3f -> %.3f | %s" % (s, e0, e1, 100 * (e1 / e0 - 1),
          sum(au[:20]) / 20, sum(au[-20:]) / 20, " | ".join(cols)))
