#!/usr/bin/env python3
"""Packs a bench directory's per-problem records and metrics for committing.

    python3 records.py BENCH_DIR OUT_DIR [--metrics-arms ARM,ARM...]

A leaderboard bench writes about 1.25 MB per arm-seed under BENCH_DIR/runs
(checkpoints aside), too much to commit for 140 arm-seeds. This keeps what
every reported metric needs, from each run's last evaluation of each set
(the final one, n = eval.final_k samples per problem):

  OUT_DIR/records.csv.xz  one row per (arm, seed, set, problem): n, the
      correct samples c (pass@k and pass^k are functions of n and c),
      distinct correct solutions, and maj@k for k = 1, 2, 4, ..., n (1 when
      the plurality answer of the first k samples is correct, ties to the
      earliest; core.MajAtK), recomputed here from the samples' answer keys
      and correctness as written in the run's evals/SET/step-N.json;
  OUT_DIR/metrics.tar.xz  every run's metrics.jsonl (training and
      evaluation rows) as written, less the perf/* keys (timings of this
      machine under its load, not properties of the methods); with
      --metrics-arms, only those arms' runs (the others are committed with
      another bench).

Standard library only.
"""
import csv
import io
import json
import lzma
import os
import sys
import tarfile


def maj_at_k(answers, hits, k):
    """core.MajAtK over the first k samples: answers are indices into the
    problem's keys (-1: no answer), hits '1'/'0' per sample."""
    count, first, best = {}, {}, None
    for i in range(min(k, len(answers))):
        a = answers[i]
        if a < 0:
            continue
        first.setdefault(a, i)
        count[a] = count.get(a, 0) + 1
        if best is None or count[a] > count[best] or (count[a] == count[best] and first[a] < first[best]):
            best = a
    return best is not None and hits[first[best]] == "1"


def last_eval(set_dir):
    steps = sorted(f for f in os.listdir(set_dir) if f.startswith("step-") and f.endswith(".json"))
    with open(os.path.join(set_dir, steps[-1])) as f:
        return json.load(f)


def main(bench, out, metrics_arms=None):
    runs = os.path.join(bench, "runs")
    os.makedirs(out, exist_ok=True)
    ks, rows, metrics = None, [], []
    for arm in sorted(os.listdir(runs)):
        for seed in sorted(os.listdir(os.path.join(runs, arm))):
            run = os.path.join(runs, arm, seed)
            if not os.path.exists(os.path.join(run, "DONE")):
                continue
            if os.path.exists(os.path.join(run, "metrics.jsonl")) and (metrics_arms is None or arm in metrics_arms):
                metrics.append((os.path.join(arm, seed, "metrics.jsonl"), os.path.join(run, "metrics.jsonl")))
            evals = os.path.join(run, "evals")
            for s in sorted(os.listdir(evals)):
                d = last_eval(os.path.join(evals, s))
                n = d["n"]
                if ks is None:
                    ks = [1 << j for j in range(n.bit_length()) if 1 << j <= n]
                for i, prob in enumerate(d["problems"]):
                    row = [arm, seed.removeprefix("seed-"), d["set"], d["step"], prob, n, d["correct"][i],
                           d["distinct"][i] if d.get("distinct") else ""]
                    if d.get("answers"):
                        row += [int(maj_at_k(d["answers"][i], d["hits"][i], k)) for k in ks]
                    else:
                        row += [""] * len(ks)
                    rows.append(row)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["arm", "seed", "set", "step", "problem", "n", "correct", "distinct"] + [f"maj@{k}" for k in ks])
    w.writerows(rows)
    with lzma.open(os.path.join(out, "records.csv.xz"), "wt", preset=9) as f:
        f.write(buf.getvalue())
    with tarfile.open(os.path.join(out, "metrics.tar.xz"), "w:xz", preset=9) as t:
        for name, path in metrics:
            with open(path) as f:
                data = "".join(json.dumps({k: v for k, v in json.loads(line).items() if not k.startswith("perf/")},
                                          separators=(",", ":")) + "\n" for line in f).encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    print(f"{len(rows)} problem rows, {len(metrics)} metrics files -> {out}")


if __name__ == "__main__":
    args = sys.argv[1:]
    arms = None
    if len(args) == 4 and args[2] == "--metrics-arms":
        arms, args = set(args[3].split(",")), args[:2]
    if len(args) != 2:
        sys.exit(__doc__)
    main(args[0], args[1], arms)
