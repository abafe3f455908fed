#!/usr/bin/env python3
"""Checks braidc --recompute=auto against the fixed policies.

For each budget (GiB per rank): the plan auto chooses fits on every
pipeline rank, and on every rank its recompute FLOPs are no more than those
of each uniform policy (full, uniform-N) or selective that fits on that
rank too; so its total is no more than that of any such policy that fits
everywhere. Prints one line per budget and per policy.
"""
import argparse
import re
import subprocess
import sys

RANK = re.compile(r"^memory report \((?:pipeline )?rank (\d+)\)")
ARENA = re.compile(r"^  arena\s+(\d+) bytes")
POLICY = re.compile(r"^  recompute\s+(\S+)")
COSTS = re.compile(r"^    costs\s+(\d+) FLOPs per micro-batch")


def report(braidc, spec, out, args):
    """Per rank: arena bytes, recompute policy and FLOPs per micro-batch."""
    run = subprocess.run([braidc, spec, "-o", out, "--report-memory"] + args,
                         capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit("braidc %s failed:\n%s" % (" ".join(args), run.stderr))
    ranks, rank = {}, None
    for line in run.stderr.splitlines():
        if m := RANK.match(line):
            rank = int(m.group(1))
            ranks[rank] = {"arena": None, "policy": "none", "flops": 0}
        elif rank is None:
            continue
        elif m := ARENA.match(line):
            ranks[rank]["arena"] = int(m.group(1))
        elif m := POLICY.match(line):
            ranks[rank]["policy"] = m.group(1)
        elif m := COSTS.match(line):
            ranks[rank]["flops"] = int(m.group(1))
    if not ranks or any(r["arena"] is None for r in ranks.values()):
        sys.exit("no memory report in:\n" + run.stderr)
    return ranks


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--braidc", required=True)
    p.add_argument("--spec", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--budgets", required=True, help="GiB, comma-separated")
    p.add_argument("--max-layers", type=int, required=True,
                   help="uniform-N is tried for N up to this")
    a = p.parse_args()

    policies = ["selective", "full"] + [
        "uniform-%d" % n for n in range(2, a.max_layers + 1)]
    fixed = {pol: report(a.braidc, a.spec, a.out, ["--recompute=" + pol])
             for pol in policies}
    for gib in [float(b) for b in a.budgets.split(",")]:
        budget = int(gib * 2**30)
        auto = report(a.braidc, a.spec, a.out,
                      ["--recompute=auto", "--memory-budget-gb=%g" % gib])
        for r, fig in sorted(auto.items()):
            if fig["arena"] > budget:
                sys.exit("budget %g: rank %d's arena %d exceeds %d"
                         % (gib, r, fig["arena"], budget))
        total = sum(f["flops"] for f in auto.values())
        print("budget %g GiB: auto %s, %d recompute FLOPs per micro-batch"
              % (gib, "|".join(auto[r]["policy"] for r in sorted(auto)),
                 total))
        for pol, ranks in fixed.items():
            fits = [r for r in ranks if ranks[r]["arena"] <= budget]
            for r in fits:
                if auto[r]["flops"] > ranks[r]["flops"]:
                    sys.exit("budget %g: on rank %d auto recomputes %d FLOPs,"
                             " more than %s's %d, which also fits"
                             % (gib, r, auto[r]["flops"], pol,
                                ranks[r]["flops"]))
            everywhere = len(fits) == len(ranks)
            print("  %-10s %s, %d FLOPs" % (
                pol, "fits" if everywhere else
                "fits on ranks %s" % fits if fits else "does not fit",
                sum(f["flops"] for f in ranks.values())))
    print("OK")


if __name__ == "__main__":
    main()
