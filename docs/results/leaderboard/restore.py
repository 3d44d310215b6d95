#!/usr/bin/env python3
"""Rebuilds a bench directory from a committed leaderboard part, for
`cde-run bench ... --report-only` to judge the claims again.

    python3 restore.py PART_DIR OUT_DIR [--main MAIN_PART_DIR]

The inverse of records.py, as far as the committed files allow. From
PART_DIR/records.csv.xz, PART_DIR/metrics.tar.xz and
PART_DIR/claims-registered.json it writes, for every (arm, seed) of the
records file:

  OUT_DIR/runs/ARM/seed-N/metrics.jsonl   the run's metrics.jsonl as
      committed (perf/* keys were left out when committing);
  OUT_DIR/runs/ARM/seed-N/evals/SET/step-NNNNNN.json   the final
      evaluation of each set in trainer.EvalDetail's format: step, set, n,
      problems (in the records file's order), correct, distinct and maj_at
      (per k, as a string, each problem's maj@k: 1 or 0). The samples
      themselves (keys, answers, hits) were never committed, so maj@k comes
      from maj_at, the field the trainer leaves empty and restored details
      fill; earlier evaluations (the eval curve) are not restored;
  OUT_DIR/runs/ARM/seed-N/DONE   the finished marker. The finishing time and
      the training wall time were not committed: "finished" is empty,
      "seconds" is 0, and "restored" says so. A report's wall-time column
      from a restored directory is therefore 0, not a measurement;

and copies claims-registered.json (the claims registered when the bench
first started, which decide what is exploratory) and commands.txt.

Not restored: checkpoints, the base policy (OUT_DIR/base), head_std.json
(the critic head std measurement), per-sample results, timings. A report
from OUT_DIR reproduces the claims, verdicts.json and the final-step tables;
its critic head std section and its wall times do not.

The second part (extra/) committed only its own arms' metrics: its runs
copied from the first part (grpo, simhash_b1, the base evaluations; see
README.md, "Commands and wall time") take their metrics.jsonl from
--main's metrics.tar.xz. Its grpo seed 1 was retrained by the second part;
README.md records that its metrics agree with the first part's on every
non-perf value, and its records rows are the part's own.

Standard library only.
"""
import csv
import json
import lzma
import os
import shutil
import sys
import tarfile


def read_metrics(part):
    """{(arm, 'seed-N'): bytes of metrics.jsonl} from part/metrics.tar.xz."""
    out = {}
    with tarfile.open(os.path.join(part, "metrics.tar.xz"), "r:xz") as t:
        for m in t.getmembers():
            if not m.isfile():
                continue
            parts = m.name.split("/")
            if len(parts) != 3 or parts[2] != "metrics.jsonl" or not parts[1].startswith("seed-"):
                sys.exit(f"{part}/metrics.tar.xz: unexpected member {m.name}")
            out[(parts[0], parts[1])] = t.extractfile(m).read()
    return out


def read_records(part):
    """{(arm, 'seed-N'): {set: detail dict}}, problems in file order."""
    runs = {}
    with lzma.open(os.path.join(part, "records.csv.xz"), "rt", newline="") as f:
        r = csv.reader(f)
        header = next(r)
        fixed = ["arm", "seed", "set", "step", "problem", "n", "correct", "distinct"]
        if header[:len(fixed)] != fixed:
            sys.exit(f"{part}/records.csv.xz: unexpected header {header}")
        ks = []
        for h in header[len(fixed):]:
            if not h.startswith("maj@"):
                sys.exit(f"{part}/records.csv.xz: unexpected column {h}")
            ks.append(h[len("maj@"):])
        for row in r:
            arm, seed, set_, step, problem, n, correct, distinct = row[:len(fixed)]
            maj = row[len(fixed):]
            sets = runs.setdefault((arm, "seed-" + seed), {})
            d = sets.get(set_)
            if d is None:
                d = sets[set_] = {"step": int(step), "set": set_, "n": int(n), "problems": [], "correct": [],
                                  "distinct": [], "maj_at": {k: [] for k in ks}}
            if d["step"] != int(step) or d["n"] != int(n):
                sys.exit(f"{part}: {arm} seed {seed} set {set_}: rows of more than one evaluation (step or n differ)")
            d["problems"].append(problem)
            d["correct"].append(int(correct))
            d["distinct"].append(None if distinct == "" else int(distinct))
            for k, v in zip(ks, maj):
                d["maj_at"][k].append(None if v == "" else int(v))
    for sets in runs.values():
        for d in sets.values():
            # A column left empty (the run kept no samples or no solutions)
            # is left out, as the trainer leaves the field out.
            if any(x is None for x in d["distinct"]):
                del d["distinct"]
            d["maj_at"] = {k: v for k, v in d["maj_at"].items() if all(x is not None for x in v)}
            if not d["maj_at"]:
                del d["maj_at"]
    return runs


def main(part, out, main_part=None):
    if os.path.exists(out) and os.listdir(out):
        sys.exit(f"{out}: exists and is not empty")
    records = read_records(part)
    metrics = read_metrics(part)
    copied = read_metrics(main_part) if main_part else {}
    from_main = []
    for (arm, seed), sets in sorted(records.items()):
        data = metrics.get((arm, seed))
        if data is None:
            data = copied.get((arm, seed))
            if data is None:
                sys.exit(f"{arm}/{seed}: no metrics.jsonl in {part}/metrics.tar.xz" +
                         (f" or {main_part}/metrics.tar.xz" if main_part else " (a copied run? give --main)"))
            from_main.append(f"{arm}/{seed}")
        run = os.path.join(out, "runs", arm, seed)
        os.makedirs(run)
        with open(os.path.join(run, "metrics.jsonl"), "wb") as f:
            f.write(data)
        for set_, d in sets.items():
            os.makedirs(os.path.join(run, "evals", set_))
            with open(os.path.join(run, "evals", set_, "step-%06d.json" % d["step"]), "w") as f:
                json.dump(d, f, separators=(",", ":"))
                f.write("\n")
        with open(os.path.join(run, "DONE"), "w") as f:
            json.dump({"finished": "", "seconds": 0,
                       "restored": "from the committed records.csv.xz and metrics.tar.xz (restore.py); "
                                   "finishing time and training wall time not committed"}, f, indent=2)
            f.write("\n")
    unused = sorted(set(metrics) - set(records))
    if unused:
        sys.exit(f"{part}: metrics without records: {unused}")
    for name in ("claims-registered.json", "commands.txt"):
        if os.path.exists(os.path.join(part, name)):
            shutil.copyfile(os.path.join(part, name), os.path.join(out, name))
    print(f"{len(records)} runs restored into {out}" +
          (f" ({len(from_main)} with metrics from {main_part}: {', '.join(from_main)})" if from_main else ""))


if __name__ == "__main__":
    args = sys.argv[1:]
    main_part = None
    if len(args) == 4 and args[2] == "--main":
        main_part, args = args[3], args[:2]
    if len(args) != 2:
        sys.exit(__doc__)
    main(args[0], args[1], main_part)
