#!/usr/bin/env python3
"""Judges the committed leaderboard's claims again with the current bench code.

    python3 docs/results/leaderboard/rejudge.py [--cde-run BINARY [--built-at COMMIT]] [--parts main,extra]
        [--dry-run] [--keep]

For each part (main: bench/leaderboard.yaml, extra:
bench/leaderboard-extra.yaml) it rebuilds a bench directory in a temporary
directory from the committed files (restore.py; extra takes its copied runs'
metrics from main), runs `cde-run bench -c BENCH.yaml --out TMP --report-only`
there from the repository root, and writes back into the part's directory:

  - verdicts.json, whole;
  - in results.md, the sections from "## Claims" to the end (Claims, Ranked,
    Power), with a line saying when and by which code they were written;
  - in results.md, the Verdicts section at the top (the forest plot and the
    claims' table, which come from the claims alone), replacing the
    committed one (or a section "## Effects of the claims", its name
    before 2026-11-28) or, when there is none, put before "## Results";
    and plots/forest.png, which it shows.

Everything else before "## Claims" in results.md (Results, Plots, pass@k
curves, Critic head std, PPL bonus) stays as committed, and results.csv and
the other plots are left alone: the restored directory has no wall times (restore.py writes 0)
and no critic head std measurement (head_std.json was never committed), so
a report from it cannot reproduce those; the claims need neither.

It prints a table of every claim whose verdict changed: the committed
verdicts.json's "verdict" and interval beside the new "verdict",
"verdict_holm" (the verdict after Holm's correction in the claim's family)
and interval. The comparison is with what is committed when it runs: after a
first rejudge, that is the rejudged verdicts.

--cde-run: the binary to judge with (default: `go build ./cmd/cde-run` into
the temporary directory, from this checkout); --built-at: the commit it was
built from, for the note (default: this checkout's HEAD when the script
builds it, "with uncommitted changes" when its Go files differ; else what
`go version -m` reads from the binary, if anything). --dry-run prints the
table and writes nothing. --keep keeps the temporary directory and says
where.

Standard library only (and Go, to build the binary when none is given).
"""
import argparse
import datetime
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
PARTS = {"main": "bench/leaderboard.yaml", "extra": "bench/leaderboard-extra.yaml", "rerun": "bench/leaderboard-rerun.yaml"}
CLAIMS = "\n## Claims\n"
VERDICTS = ("\n## Verdicts\n", "\n## Effects of the claims\n")
RESULTS = "\n## Results\n"


def section_at(md, i):
    """The section of md that starts at index i (a "\n## " heading), up to
    the next "\n## " heading."""
    j = md.find("\n## ", i + 1)
    return md[i:] if j < 0 else md[i:j]


def with_verdicts(kept, report):
    """kept with the Verdicts section of report in place of its own."""
    i = report.find(VERDICTS[0])
    if i < 0:
        return kept
    new = section_at(report, i)
    for h in VERDICTS:
        k = kept.find(h)
        if 0 <= k < kept.index(CLAIMS):
            return kept[:k] + new + kept[k + len(section_at(kept, k)):]
    k = kept.index(RESULTS)
    return kept[:k] + new + kept[k:]


def load_restore():
    sys.dont_write_bytecode = True  # no __pycache__ beside the committed files
    spec = importlib.util.spec_from_file_location("restore", os.path.join(HERE, "restore.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def build_info(binary, built_here):
    """The commit the binary was built from, "with uncommitted changes" when
    its Go sources were modified; "" when that cannot be told. A binary this
    script built is this checkout's (git); a given one says so only when it
    was built with VCS stamping (go version -m)."""
    def run(*cmd):
        try:
            return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True).stdout
        except (OSError, subprocess.CalledProcessError):
            return None
    if built_here:
        rev = (run("git", "rev-parse", "--short", "HEAD") or "").strip()
        dirty = run("git", "status", "--porcelain", "--untracked-files=no", "--", "*.go", "go.mod", "go.sum")
        if rev and dirty:
            rev += " with uncommitted changes"
        return rev
    info = {}
    for line in (run("go", "version", "-m", binary) or "").splitlines():
        f = line.split("\t")
        if len(f) >= 3 and f[1] == "build" and "=" in f[2]:
            k, v = f[2].split("=", 1)
            info[k] = v
    rev = info.get("vcs.revision", "")[:7]
    if rev and info.get("vcs.modified") == "true":
        rev += " with uncommitted changes"
    return rev


def fmt(x):
    return "-" if x is None else "%.4g" % x


def interval(v):
    if v.get("delta_mean") is None:
        return "missing"
    if v.get("ci_low") is None:
        return fmt(v["delta_mean"]) + " (no interval)"
    return "%s [%s, %s]" % (fmt(v["delta_mean"]), fmt(v["ci_low"]), fmt(v["ci_high"]))


def compare(part, old, new):
    """Rows of the changed-verdict table, and a count line."""
    olds = {v["claim"]: v for v in old}
    news = {v["claim"]: v for v in new}
    if set(olds) != set(news):
        sys.exit(f"{part}: the claims differ: only committed {sorted(set(olds) - set(news))}, "
                 f"only new {sorted(set(news) - set(olds))}")
    rows = []
    for v in new:
        o = olds[v["claim"]]
        if o["verdict"] != v["verdict"] or o["verdict"] != v.get("verdict_holm", v["verdict"]):
            rows.append([part, v["claim"], o["verdict"], interval(o), v["verdict"], v.get("verdict_holm", "-"), interval(v)])
    return rows


def count(vs, key):
    c = {}
    for v in vs:
        c[v.get(key, v["verdict"])] = c.get(v.get(key, v["verdict"]), 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(c.items()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cde-run", help="cde-run binary (default: built from this checkout)")
    ap.add_argument("--built-at", help="the commit the given --cde-run was built from, for the note in results.md "
                    "(default: read from the binary when Go stamped it)")
    ap.add_argument("--parts", default="main,extra")
    ap.add_argument("--dry-run", action="store_true", help="print the table, write nothing")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    a = ap.parse_args()
    parts = a.parts.split(",")
    for p in parts:
        if p not in PARTS:
            sys.exit(f"--parts: no part {p!r} (want {', '.join(PARTS)})")
    restore = load_restore()
    tmp = tempfile.mkdtemp(prefix="cde-rejudge-")
    try:
        binary = a.cde_run
        if binary:
            binary = os.path.abspath(binary)
        else:
            binary = os.path.join(tmp, "cde-run")
            subprocess.run(["go", "build", "-o", binary, "./cmd/cde-run"], cwd=ROOT, check=True)
        rev = a.built_at or build_info(binary, not a.cde_run)
        today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
        table, summary = [], []
        for p in parts:
            part = os.path.join(HERE, p)
            out = os.path.join(tmp, p)
            restore.main(part, out, os.path.join(HERE, "main") if p == "extra" else None)
            cmd = [binary, "bench", "-c", PARTS[p], "--out", out, "--report-only"]
            log = os.path.join(tmp, p + ".log")
            with open(log, "w") as f:
                r = subprocess.run(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT)
            if r.returncode != 0:
                with open(log) as f:
                    sys.stderr.write(f.read()[-4000:])
                sys.exit(f"{p}: cde-run bench --report-only failed (exit {r.returncode})")
            with open(os.path.join(part, "verdicts.json")) as f:
                old = json.load(f)
            with open(os.path.join(out, "verdicts.json")) as f:
                new_verdicts = f.read()
            new = json.loads(new_verdicts)
            table += compare(p, old, new)
            summary.append(f"{p}: {len(new)} claims; committed: {count(old, 'verdict')}; "
                           f"now: {count(new, 'verdict')}; after Holm: {count(new, 'verdict_holm')}")
            seeds_only = [v["claim"] + ": " + v["note"] for v in new if "judged on seeds only" in v.get("note", "")]
            for s in seeds_only:
                summary.append(f"{p}: {s}")

            with open(os.path.join(part, "results.md")) as f:
                kept = f.read()
            with open(os.path.join(out, "results.md")) as f:
                report = f.read()
            if CLAIMS not in kept or CLAIMS not in report:
                sys.exit(f"{p}: no '## Claims' section in the committed or the new results.md")
            section = report[report.index(CLAIMS):]
            if tmp in section or out in section:
                sys.exit(f"{p}: the new Claims section names the temporary directory")
            head = CLAIMS + "\n"
            note = (f"Claims, Ranked and Power written again on {today} by `docs/results/leaderboard/rejudge.py`"
                    + (f" (cde-run built at {rev})" if rev else "")
                    + ", from the committed `records.csv.xz` and `metrics.tar.xz` (`restore.py`);"
                    " the sections above are the original report's.\n\n")
            section = head + note + section[len(head):]
            kept = with_verdicts(kept, report)
            if tmp in kept or out in kept:
                sys.exit(f"{p}: the new Verdicts section names the temporary directory")
            if not a.dry_run:
                with open(os.path.join(part, "verdicts.json"), "w") as f:
                    f.write(new_verdicts)
                with open(os.path.join(part, "results.md"), "w") as f:
                    f.write(kept[:kept.index(CLAIMS)] + section)
                forest = os.path.join(out, "plots", "forest.png")
                if os.path.exists(forest):
                    os.makedirs(os.path.join(part, "plots"), exist_ok=True)
                    shutil.copyfile(forest, os.path.join(part, "plots", "forest.png"))
        print()
        for s in summary:
            print(s)
        print(f"\n{len(table)} claims changed verdict" + (" (dry run: nothing written)" if a.dry_run else "") + ":\n")
        head = ["part", "claim", "old verdict", "old d [95% interval]", "new verdict", "after Holm", "new d [95% interval]"]
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for row in table:
            print("| " + " | ".join(row) + " |")
    finally:
        if a.keep:
            print(f"\nrestored benches kept in {tmp}")
        else:
            shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
