#!/usr/bin/python3
"""The testbed gates (issue #14 item 2) from the metrics of plain GRPO runs.

    python3 docs/results/countdown-gates/gates.py docs/results/countdown-gates/metrics-seed*.jsonl

Per run: held-out avg@64 (pass@1 estimated from 64 samples) at the first and
last eval; pass@64 at the first eval, its peak and the last; rollout entropy
(nats/token) averaged over the first and last 10 steps; the training-batch PPL
AUROC of correct vs incorrect responses averaged over the first and last 20
steps.
"""
import json
import sys

print("run | avg@64 base -> end | pass@64 base -> peak -> end | entropy first10 -> last10 (change) | AUROC first20 -> last20")
for path in sys.argv[1:]:
    rows = [json.loads(line) for line in open(path)]
    ev = [r for r in rows if "val/mean/avg@64" in r]
    ent = [r["rollout/entropy"] for r in rows if "rollout/entropy" in r]
    au = [r["calib/auroc"] for r in rows if "calib/auroc" in r]
    p = [r["val/mean/pass@64"] for r in ev]
    e0, e1 = sum(ent[:10]) / 10, sum(ent[-10:]) / 10
    print("%s | %.3f -> %.3f | %.3f -> %.3f -> %.3f | %.3f -> %.3f (%+.0f%%) | %.3f -> %.3f" % (
        path.rsplit("/", 1)[-1], ev[0]["val/mean/avg@64"], ev[-1]["val/mean/avg@64"], p[0], max(p), p[-1],
        e0, e1, 100 * (e1 / e0 - 1), sum(au[:20]) / 20, sum(au[-20:]) / 20))
