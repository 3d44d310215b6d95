#!/usr/bin/python3
"""The descriptive figures of README.md's revision (issue #27) that are not
claims: recomputed from the committed runs, independently of cde's code.

    python3 docs/results/paper-countdown/audit.py docs/results/paper-countdown

Prints, over the 5 seeds:
  - the training-batch PPL AUROC averaged over the first and the last 20
    logged steps (gates.py's windows), per arm, and each GRPO seed's change,
    also with steps 1-20 as the first window;
  - the Figure-6 gap PPL(incorrect)/PPL(correct): per seed the median over
    the first and the last 20 steps, then the mean over seeds;
  - GRPO's c3 pass@64 per seed at the base and at the end;
  - the SimHash arms' final mean response length per seed;
  - avg@64 and pass@64 (mean over sets) of the schedule arms, and staircase
    minus no decay on pass@64 with a crossed percentile bootstrap (4,000
    resamples: seeds with replacement, one draw of the 300 problems of each
    set shared by the drawn seeds; random.Random(7)).
"""
import json
import math
import os
import random
import statistics
import sys

root = sys.argv[1] if len(sys.argv) > 1 else "."
seeds = [1, 2, 3, 4, 5]


def rows(arm, s):
    return [json.loads(l) for l in open(os.path.join(root, "runs", arm, "seed-%d" % s, "metrics.jsonl"))]


def window(vals, first, n=20):
    return sum(vals[:n]) / n if first else sum(vals[-n:]) / n


print("AUROC, first 20 -> last 20 logged steps (mean over seeds)")
for arm in ["grpo", "grpo_ppl_stair", "grpo_ppl_none", "grpo_ppl_linear", "grpo_ppl_cosine", "grpo_entropy"]:
    f, l = [], []
    for s in seeds:
        au = [r["calib/auroc"] for r in rows(arm, s) if r.get("calib/auroc") is not None]
        f.append(window(au, True))
        l.append(window(au, False))
    print("  %-16s %.3f -> %.3f  per seed %s" % (arm, sum(f) / 5, sum(l) / 5, [round(b - a, 3) for a, b in zip(f, l)]))
au3 = [r["calib/auroc"] for r in rows("grpo", 3) if r.get("calib/auroc") is not None and r["step"] >= 1]
print("  grpo seed 3 with steps 1-20 as the first window: %+.3f" % (window(au3, False) - window(au3, True)))

print("PPL(incorrect)/PPL(correct), median of the first and last 20 steps per seed, mean over seeds")
for arm in ["grpo", "grpo_ppl_stair", "grpo_ppl_none", "grpo_ppl_linear", "grpo_ppl_cosine"]:
    f, l = [], []
    for s in seeds:
        g = [r["calib/ppl_incorrect"] / r["calib/ppl_correct"] for r in rows(arm, s) if r.get("calib/ppl_correct") and r.get("calib/ppl_incorrect")]
        f.append(statistics.median(g[:20]))
        l.append(statistics.median(g[-20:]))
    print("  %-16s %.3f -> %.3f" % (arm, statistics.mean(f), statistics.mean(l)))

print("c3 pass@64 (%%): base %s, grpo at the end %s" % (
    [round(100 * rows("base", s)[0]["val/c3/pass@64"], 1) for s in seeds],
    [round(100 * [r for r in rows("grpo", s) if "val/c3/pass@64" in r][-1]["val/c3/pass@64"], 1) for s in seeds]))
for arm in ["grpo_simhash", "grpo_simhash_b01"]:
    print("%s final response/length_mean per seed: %s" % (arm, [round([r for r in rows(arm, s) if "response/length_mean" in r][-1]["response/length_mean"], 1) for s in seeds]))

for m in ["val/mean/avg@64", "val/mean/pass@64"]:
    print(m, {a: round(100 * sum([r for r in rows(a, s) if m in r][-1][m] for s in seeds) / 5, 2)
              for a in ["grpo", "grpo_ppl_none", "grpo_ppl_cosine", "grpo_ppl_linear", "grpo_ppl_stair"]})


def detail(arm, s, name):
    return json.load(open(os.path.join(root, "runs", arm, "seed-%d" % s, "evals", name, "step-000200.json")))


def pass_at(n, c, k):
    return 1.0 if n - c < k else 1 - math.comb(n - c, k) / math.comb(n, k)


sets = ["c3", "c4", "ood"]
A = {s: [[pass_at(d["n"], c, 64) for c in d["correct"]] for d in [detail("grpo_ppl_stair", s, x) for x in sets]] for s in seeds}
B = {s: [[pass_at(d["n"], c, 64) for c in d["correct"]] for d in [detail("grpo_ppl_none", s, x) for x in sets]] for s in seeds}


def metric(v, idx):
    return sum(sum(v[j][i] for i in idx[j]) / len(idx[j]) for j in range(len(v))) / len(v)


full = [list(range(len(x))) for x in A[1]]
d = sum(metric(A[s], full) - metric(B[s], full) for s in seeds) / 5
rng = random.Random(7)
eff = []
for _ in range(4000):
    drawn = [rng.choice(seeds) for _ in seeds]
    idx = [[rng.randrange(len(x)) for _ in x] for x in A[1]]
    eff.append(sum(metric(A[s], idx) - metric(B[s], idx) for s in drawn) / 5)
eff.sort()
print("pass@64 staircase - no decay: %+.2f points, crossed 95%% [%+.2f, %+.2f]" % (100 * d, 100 * eff[int(0.025 * 3999)], 100 * eff[int(0.975 * 3999)]))
